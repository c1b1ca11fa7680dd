"""planrt: compile, check and run LLM-written plans with Python tools.

- ``check(text, tools=None)`` lists every diagnostic of a plan.
- ``compile(text, tools=None, strict=False)`` returns a verified ``Plan`` or raises
  ``PlanError`` (with ``.diagnostics``).
- ``await plan.run(tools={...})`` runs it with Python tools (``async def`` or plain
  functions) and returns an ``Outcome``; ``plan.run_sync(...)`` does the same without an
  event loop. A failed run raises ``RunError``.
- ``plan.start()`` gives a ``Run`` to drive by hand: ``requests()``, ``resume(id, result)``,
  ``state()`` and ``Run.restore(plan, state)``.
"""

from ._planrt import (
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
    "Diagnostic",
    "Outcome",
    "Plan",
    "PlanError",
    "Request",
    "Run",
    "RunError",
    "__version__",
    "check",
    "compile",
]
