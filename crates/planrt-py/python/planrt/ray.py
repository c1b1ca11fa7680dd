"""Many plans over a Ray cluster: ``run_many(items, tools=..., batch_size=...)``.

``items`` is a list of ``(plan, vars)`` pairs: a ``Plan`` or plan text (compiled once per
distinct text, against ``tools``), and a dict of variables or ``None``. The result is the
list of outcomes in the same order: an ``Outcome``, or the ``RunError`` of a run that
failed (returned, not raised, so that one failure does not hide the others).

Each Ray task runs a batch of ``batch_size`` plans in one process, all at once on one
event loop (as ``planvm batch`` does): a run takes microseconds of the process, a task
costs milliseconds, so a task per plan would spend its time in Ray.
Plans cross to the workers as their ``.pbc`` bytes (a plan used by many items once per
batch), outcomes come back as plain data. ``tools`` is what ``Plan.run`` takes: a tools
file's path (read on each worker: give a path they can all read), or a dict of picklable
callables; the other keyword arguments (``max_steps``, ``timeout``, ``tools_file``, ...)
go to every run.
"""

from __future__ import annotations

import asyncio

from typing import Any, Iterable, List, Optional, Tuple, Union

from ._planrt import Outcome, Plan, RunError
from ._planrt import compile as _compile

Item = Tuple[Union[Plan, str], Optional[dict]]


def run_many(
    items: Iterable[Item],
    tools: Any = None,
    *,
    batch_size: int = 256,
    **run_options: Any,
) -> List[Union[Outcome, RunError]]:
    import ray

    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    compiled: dict = {}
    runs: List[Tuple[Plan, Optional[dict]]] = []
    for plan, variables in items:
        if isinstance(plan, str):
            if plan not in compiled:
                compiled[plan] = _compile(
                    plan, tools, tools_file=run_options.get("tools_file")
                )
            plan = compiled[plan]
        runs.append((plan, variables))
    task = ray.remote(_run_batch)
    pending = [
        task.remote(runs[i : i + batch_size], tools, run_options)
        for i in range(0, len(runs), batch_size)
    ]
    out: List[Union[Outcome, RunError]] = []
    for batch in ray.get(pending):
        out.extend(batch)
    return out


def _run_batch(
    runs: List[Tuple[Plan, Optional[dict]]], tools: Any, run_options: dict
) -> List[Union[Outcome, RunError]]:
    # NB: the batch's runs go on at once on one event loop, as `planvm batch` runs them:
    # a run waiting for its tools leaves the process to the others.
    return asyncio.run(_run_all(runs, tools, run_options))


async def _run_all(
    runs: List[Tuple[Plan, Optional[dict]]], tools: Any, run_options: dict
) -> List[Union[Outcome, RunError]]:
    async def one(plan: Plan, variables: Optional[dict]) -> Union[Outcome, RunError]:
        try:
            return await plan.run(tools, vars=variables, **run_options)
        except RunError as e:
            return e

    return list(await asyncio.gather(*(one(p, v) for p, v in runs)))
