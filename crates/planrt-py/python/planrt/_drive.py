"""``Plan.run`` and ``planrt.ask``: where a run goes.

When Python callables serve every tool the plan needs, the VM is driven on the event
loop's own thread (``Plan.start`` and its ``requests``/``resume``): each call is a task on
the loop (a plain function in the loop's thread pool), and an answer reaches the VM
without leaving the thread. Otherwise (a tools file, a tool left to a built-in backend)
the run goes to the Rust host (``Plan._run_now``), which serves those tools over the
network and calls the Python ones on the loop (``_call``). Both commit results in program
order and count, fail and time out alike, so a plan's outcome does not depend on which
path ran it. A run journaled in a ``Store`` (and ``Store.resume``) always takes the Rust
host, whose journal the store is.
"""

import asyncio
import functools
import inspect
from typing import Any, Callable, Dict, Optional

from ._planrt import Answer, Outcome, Plan, RunError, Store, _ask_now


async def run(plan: Plan, kwargs: Dict[str, Any]) -> Outcome:
    tools = kwargs["tools"]
    if kwargs["store"] is None and kwargs["run_id"] is not None:
        raise ValueError("run_id= names a stored run: pass store= too")
    if (
        kwargs["store"] is None
        and kwargs["tools_file"] is None
        and isinstance(tools, dict)
        and all(isinstance(k, str) and callable(f) for k, f in tools.items())
        and all(name in tools for name in plan.needs)
        # NB: a question to a person stops the run, which the Rust host does.
        and not plan.asks_user
    ):
        return await _drive(plan, tools, kwargs)
    return await plan._run_now(**kwargs)


async def resume(store: Store, kwargs: Dict[str, Any]) -> Outcome:
    return await store._resume_now(**kwargs)


def _settle(fut: "asyncio.Future[Any]", value: Any, failed: bool) -> None:
    """A Rust run's end, on the loop of the future it resolves (the runtime's thread
    schedules this with ``call_soon_threadsafe``). A future cancelled meanwhile keeps
    its cancellation."""
    if fut.done():
        return
    if failed:
        fut.set_exception(value)
    else:
        fut.set_result(value)


async def _call(f: Callable[..., Any], kwargs: Dict[str, Any], is_async: bool) -> Any:
    """One tool call, on the loop's thread."""
    if is_async:
        return await f(**kwargs)
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(f, **kwargs))


async def _drive(plan: Plan, tools: Dict[str, Callable[..., Any]], kwargs: Dict[str, Any]) -> Outcome:
    run = plan.start(
        vars=kwargs["vars"],
        max_concurrency=kwargs["max_concurrency"],
        max_steps=kwargs["max_steps"],
        timeout=kwargs["timeout"],
    )
    loop = asyncio.get_running_loop()
    timeout = kwargs["timeout"]
    deadline = None if timeout is None else loop.time() + timeout
    is_async = {name: inspect.iscoroutinefunction(f) for name, f in tools.items()}
    flying: Dict["asyncio.Future[Any]", Any] = {}  # future -> Request
    raised: Dict[Optional[int], BaseException] = {}  # seq_no -> first exception there
    try:
        while True:
            try:
                # NB: raises the deadline's RunError itself once it has passed.
                waiting = run.requests()
            except RunError as e:
                cause = raised.get(e.seq_no) if e.code == "R0005" else None
                if cause is not None:
                    raise e from cause
                raise
            if run.done:
                return run.outcome
            started = {r.id for r in flying.values()}
            for req in waiting:
                if req.id not in started:
                    task = asyncio.ensure_future(_call(tools[req.tool], req.args, is_async[req.tool]))
                    flying[task] = req
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            done, _ = await asyncio.wait(set(flying), timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                req = flying.pop(fut)
                if fut.cancelled():
                    exc: Optional[BaseException] = asyncio.CancelledError()
                else:
                    exc = fut.exception()
                if exc is None:
                    try:
                        run.resume(req.id, fut.result())
                        continue
                    except (TypeError, ValueError) as e:  # not JSON-compatible
                        exc = e
                raised.setdefault(req.seq_no, exc)
                run.resume(req.id, exc)
    finally:
        for fut in flying:
            fut.cancel()


async def ask(goal: str, response_format: Any = None, tools: Any = None, **options: Any) -> Answer:
    """A goal in, an answer out: the planner (an LLM, or a cassette with ``replay=``)
    writes a plan, errors go back to it for repair, a failed step for a re-plan, and the
    plan runs with ``tools`` (Python callables, or a tools file's backends). Returns an
    ``Answer``; its ``status`` says whether the goal was answered."""
    return await _ask_now(goal, response_format, tools, **options)
