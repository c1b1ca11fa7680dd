"""planrt: compile, check and run LLM-written plans with Python tools.

- ``check(text, tools=None)`` lists every diagnostic of a plan.
- ``compile(text, tools=None, strict=False)`` returns a verified ``Plan`` or raises
  ``PlanError`` (with ``.diagnostics``).
- ``await plan.run(tools={...})`` runs it with Python tools (``async def`` or plain
  functions) and returns an ``Outcome``; ``plan.run_sync(...)`` does the same without an
  event loop. A failed run raises ``RunError``.
- ``await ask(goal, response_format=None, tools=...)`` has the planner write the plan,
  repairs and re-plans it, and runs it: an ``Answer``.
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
    "__version__",
    "ask",
    "check",
    "compile",
]
