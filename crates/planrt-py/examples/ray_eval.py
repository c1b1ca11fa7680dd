"""1,000 replayed plans evaluated over Ray on this machine, and the same list through
`planvm batch`: the answers agree.

    pip install ./crates/planrt-py ray
    python crates/planrt-py/examples/ray_eval.py [path/to/planvm]

Both plans of the list are replayed from their recordings (one cassette holding both),
so nothing is called and every run gives the answer it recorded.
"""

import json
import pathlib
import subprocess
import sys
import tempfile
import time

import ray

import planrt
from planrt.ray import run_many

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
RUNS = 1000


def main(planvm: str) -> None:
    work = pathlib.Path(tempfile.mkdtemp())
    cassette = work / "both.cassette.jsonl"
    cassette.write_text(
        (EXAMPLES / "tidb_overview.cassette.jsonl").read_text()
        + (EXAMPLES / "countdown_loop.cassette.jsonl").read_text()
    )
    tools = work / "tools.toml"
    tools.write_text(f'[defaults.backend]\nkind = "replay"\ncassette = "{cassette}"\n')
    names = ["tidb_overview", "countdown_loop"]
    texts = {n: (EXAMPLES / f"{n}.json").read_text() for n in names}
    order = [names[i % 2] for i in range(RUNS)]

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    outcomes = run_many([(texts[n], None) for n in order], str(tools), batch_size=100)
    took = time.perf_counter() - start
    ray.shutdown()

    listed = work / "runs.txt"
    listed.write_text("".join(f"{EXAMPLES / n}.json\n" for n in order))
    batch = subprocess.run(
        [planvm, "batch", "--list", str(listed), "--replay", str(cassette), "--jobs", "64"],
        capture_output=True,
        text=True,
        check=True,
    )
    by_line = {}
    for line in batch.stdout.splitlines():
        v = json.loads(line)
        by_line[v["line"]] = v["final_answer"]
    agree = sum(
        isinstance(o, planrt.Outcome) and o.final_answer == by_line[i + 1]
        for i, o in enumerate(outcomes)
    )
    print(f"{RUNS} runs over Ray in {took:.2f} s; {agree} answers equal planvm batch's")
    if agree != RUNS:
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/debug/planvm"))
