"""Plans and outcomes across process boundaries: pickling round trips, and many plans over
Ray (`planrt.ray.run_many`) on `ray.init(num_cpus=2)`, whose answers equal `planvm
batch`'s on the same list (the example `examples/ray_eval.py`). The Ray tests need the
`ray` package: without it they are skipped, saying so, unless PLANRT_REQUIRE_RAY is set
(as `scripts/test` sets it, having installed it)."""

import os
import pathlib
import pickle
import runpy
import sys

import pytest

import planrt

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAN = (ROOT / "examples/countdown_loop.json").read_text()


def test_a_plan_pickles_to_its_bytecode_and_runs_the_same():
    plan = planrt.compile(PLAN)
    copy = pickle.loads(pickle.dumps(plan))
    assert copy.to_pbc() == plan.to_pbc()
    assert copy.source == plan.source
    assert copy.tools == plan.tools
    # A plan loaded from .pbc has no source; it pickles all the same.
    bare = planrt.Plan.from_pbc(plan.to_pbc(strip=True))
    assert pickle.loads(pickle.dumps(bare)).source is None


def test_an_outcome_pickles_as_plain_data():
    plan = planrt.compile(
        '[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "${a} and ${b}"}}]',
        vars=["a", "b"],
    )
    outcome = plan.run_sync(vars={"a": {"x": [1, 2]}, "b": "two"})
    copy = pickle.loads(pickle.dumps(outcome))
    assert type(copy) is planrt.Outcome
    for field in ("final_answer", "variables", "steps", "tool_calls", "run_id", "status"):
        assert getattr(copy, field) == getattr(outcome, field), field


def ray_or_skip():
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("PLANRT_REQUIRE_RAY"):
            raise
        pytest.skip("SKIPPED: the `ray` package is not installed (scripts/test installs it)")


@pytest.mark.ray
def test_a_thousand_replayed_plans_over_ray_answer_as_planvm_batch(capsys):
    ray_or_skip()
    planvm = ROOT / "target/debug/planvm"
    if not planvm.exists():
        pytest.skip(f"SKIPPED: no {planvm} (cargo build -p planvm)")
    sys.argv = ["ray_eval.py", str(planvm)]
    runpy.run_path(str(ROOT / "crates/planrt-py/examples/ray_eval.py"), run_name="__main__")
    said = capsys.readouterr().out
    assert "1000 answers equal planvm batch's" in said, said


@pytest.mark.ray
def test_failures_come_back_in_order_and_bad_batches_are_refused():
    ray_or_skip()
    import ray

    from planrt.ray import run_many

    good = '[{"seq_no": 0, "type": "assign", "parameters": {"final_answer": "${n}"}}]'
    # NB: a tool no backend serves: the run fails before it starts.
    bad = (
        '[{"seq_no": 0, "type": "calling", "parameters": {"tool_name": "vector_search",'
        ' "tool_params": {"query": "${n}"}, "output_vars": ["final_answer"]}}]'
    )
    items = [(good if i % 3 else bad, {"n": i}) for i in range(10)]
    with pytest.raises(ValueError):
        run_many(items, batch_size=0)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        out = run_many(items, batch_size=4)
    finally:
        ray.shutdown()
    assert len(out) == 10
    for i, o in enumerate(out):
        if i % 3:
            assert isinstance(o, planrt.Outcome) and o.final_answer == i, (i, o)
        else:
            assert isinstance(o, planrt.RunError), (i, o)
