"""Time per `plan.run` of the 14-step plan (13 calls) with instant Python tools, as the
reference Python VM is measured (2.65 ms per run). BENCHMARKS.md records the figures.

Run: python crates/planrt-py/bench/run_speed.py [RUNS]   (after `pip install ./crates/planrt-py`)
"""

import asyncio
import pathlib
import statistics
import sys
import time

import planrt

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAN = planrt.compile((ROOT / "tests/corpus/valid/current_retrieval.json").read_text())
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


async def instant_async(**args):
    return "A short instant tool answer."


def instant_plain(**args):
    return "A short instant tool answer."


def tools(f):
    return {"retrieve_knowledge_graph": f, "vector_search": f, "llm_generate": f}


async def one_after_another(t, runs):
    for _ in range(runs):
        out = await PLAN.run(tools=t)
        assert out.tool_calls == 13


async def all_at_once(t, runs):
    outs = await asyncio.gather(*(PLAN.run(tools=t) for _ in range(runs)))
    assert all(o.tool_calls == 13 for o in outs)


def measure(label, make, rounds=5):
    per_run = []
    for _ in range(rounds):
        start = time.perf_counter()
        asyncio.run(make())
        per_run.append((time.perf_counter() - start) / RUNS * 1e3)
    print(f"{label}: median {statistics.median(per_run):.3f} ms/run "
          f"(min {min(per_run):.3f}, max {max(per_run):.3f}; {rounds} rounds of {RUNS} runs)")


measure("async tools, one run after another", lambda: one_after_another(tools(instant_async), RUNS))
measure("plain tools (thread pool), one after another", lambda: one_after_another(tools(instant_plain), RUNS))
measure("async tools, all runs at once (gather)", lambda: all_at_once(tools(instant_async), RUNS))
