"""planrt: compile, check and run LLM-written plans with Python tools.

- ``check(text, tools=None)`` lists every diagnostic of a plan.
- ``compile(text, tools=None, strict=False)`` returns a verified ``Plan`` or raises
  ``PlanError`` (with ``.diagnostics``).
- ``await plan.run(tools={...})`` runs it with Python tools (``async def`` or plain
  functions) and returns an ``Outcome``; ``plan.run_sync(...)`` does the same without an
  event loop. A failed run raises ``RunError``.
- ``await ask(goal, response_format=None, tools=...)`` has the planner write the plan,
  repairs and re-plans it, and runs it: an ``Answer``.
- ``Store(path)`` keeps runs: ``await plan.run(tools=..., store=store, run_id="r1")``
  journals the run, ``await store.resume("r1", tools=...)`` continues one that failed or
  was interrupted without making the completed calls again, ``store.runs()`` and
  ``store.run("r1")`` read them (the same file as ``planvm --store``).
- ``plan.start()`` gives a ``Run`` to drive by hand: ``requests()``, ``resume(id, result)``,
  ``state()`` and ``Run.restore(plan, state)``.
"""

from ._drive import ask
from ._planrt import (
    Answer,
    Diagnostic,
    Outcome,
    Plan,
    PlanError,
    Request,
    Run,
    RunError,
    Store,
    StoreError,
    __version__,
    check,
    compile,
)

__all__ = [
    "Answer",
    "Diagnostic",
    "Outcome",
    "Plan",
    "PlanError",
    "Request",
    "Run",
    "RunError",
    "Store",
    "StoreError",
    "__version__",
    "ask",
    "check",
    "compile",
]
