"""A program that ran plans through the Rust host exits cleanly: the threads that
deliver a run's result to asyncio are gone before the interpreter finalizes. Each such
thread raced the program's own exit, a crash (SIGABRT, "Fatal Python error") in a few
exits out of a hundred on a busy machine, so each script runs many times beside a
CPU-bound process."""

import concurrent.futures
import subprocess
import sys

import pytest

# A tiny plan that calls nothing, journaled in a store: the Rust host runs it.
RUN = """
import asyncio, sys, planrt
plan = planrt.compile('[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "done"}}]')
store = planrt.Store(sys.argv[1])
out = asyncio.run(plan.run(store=store))
assert out.final_answer == "done", out
"""

# A stored run whose one call fails, then resumed with a tool that answers. NB: `async def`
# tools: a plain one would leave `asyncio.run` joining its thread pool at the end, time in
# which the result's thread would be done.
RESUME = """
import asyncio, sys, planrt

async def fail():
    raise RuntimeError("not yet")

async def answer():
    return "done"

plan = planrt.compile(
    '[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "f", "tool_params": {},'
    ' "output_vars": ["final_answer"]}}]',
    tools={"f": answer},
)
store = planrt.Store(sys.argv[1])
try:
    asyncio.run(plan.run(tools={"f": fail}, store=store, run_id="r"))
    sys.exit("the first run should have failed")
except planrt.RunError:
    pass
out = asyncio.run(store.resume("r", tools={"f": answer}))
assert out.final_answer == "done", out
"""

TIMES = 50


@pytest.mark.parametrize("script", [RUN, RESUME], ids=["run", "resume"])
def test_a_script_that_ran_a_stored_plan_exits_cleanly_every_time(tmp_path, script):
    path = tmp_path / "script.py"
    path.write_text(script)

    def once(i):
        p = subprocess.run(
            [sys.executable, str(path), str(tmp_path / f"runs{i}.db")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return p.returncode, p.stderr

    # NB: the race is lost more often when the exiting program shares the CPU.
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(once, range(TIMES)))
    finally:
        busy.kill()
        busy.wait()
    failed = [(code, err) for code, err in results if code != 0 or "Fatal Python error" in err]
    assert not failed, f"{len(failed)} of {TIMES} exits failed; the first: {failed[0]}"
