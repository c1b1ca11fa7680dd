"""``Plan.run``: where the run goes.

When Python callables serve every tool the plan needs, the VM is driven on the event
loop's own thread (``Plan.start`` and its ``requests``/``resume``): each call is a task on
the loop (a plain function in the loop's thread pool), and an answer reaches the VM
without leaving the thread. Otherwise (a tools file, a tool left to a built-in backend)
the run goes to the Rust host (``Plan._run_now``), which serves those tools over the
network and calls the Python ones on the loop. Both commit results in program order, so
a plan's outcome does not depend on which path ran it.
"""

import asyncio
import functools
import inspect

from ._planrt import RunError, _ask_now


async def run(plan, kwargs):
    tools = kwargs["tools"]
    if (
        kwargs["tools_file"] is None
        and isinstance(tools, dict)
        and all(callable(f) for f in tools.values())
        and all(name in tools for name in plan.needs)
    ):
        return await _drive(plan, tools, kwargs)
    return await plan._run_now(**kwargs)


def _deadline_error(timeout, waiting):
    seq_no = min((r.seq_no for r in waiting if r.seq_no is not None), default=None)
    where = f" (seq_no {seq_no})" if seq_no is not None else ""
    err = RunError(f"R0009{where}: deadline of {timeout:g} s exceeded")
    err.code, err.seq_no, err.line = "R0009", seq_no, None
    return err


async def _drive(plan, tools, kwargs):
    run = plan.start(
        vars=kwargs["vars"],
        max_concurrency=kwargs["max_concurrency"],
        max_steps=kwargs["max_steps"],
    )
    timeout = kwargs["timeout"]
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout}")
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    is_async = {name: inspect.iscoroutinefunction(f) for name, f in tools.items()}
    flying = {}  # future -> Request
    raised = {}  # seq_no -> the first exception a tool raised there
    try:
        while True:
            try:
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
                if req.id in started:
                    continue
                f = tools[req.tool]
                if is_async[req.tool]:
                    fut = asyncio.ensure_future(f(**req.args))
                else:
                    fut = loop.run_in_executor(None, functools.partial(f, **req.args))
                flying[fut] = req
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise _deadline_error(timeout, flying.values())
            done, _ = await asyncio.wait(
                set(flying), timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                raise _deadline_error(timeout, flying.values())
            for fut in done:
                req = flying.pop(fut)
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


async def ask(goal, response_format=None, tools=None, **options):
    """A goal in, an answer out: the planner (an LLM, or a cassette with ``replay=``)
    writes a plan, errors go back to it for repair, a failed step for a re-plan, and the
    plan runs with ``tools`` (Python callables, or a tools file's backends). Returns an
    ``Answer``; its ``status`` says whether the goal was answered."""
    return await _ask_now(goal, response_format, tools, **options)
