"""Type stubs of the native module (re-exported by ``planrt``)."""

import os
import pathlib
from typing import Any, Callable, Coroutine, Iterable, Optional, Union

__version__: str

JSON = Any
"""None, bool, int, float, str, and lists, tuples and dicts (str keys) of those."""

Tools = Union[dict[str, Callable[..., Any]], str, os.PathLike[str], None]
"""A dict of tool name -> callable (``async def`` or plain), or a tools file's path."""

class PlanError(Exception):
    """A plan that does not compile or load."""

    diagnostics: list[Diagnostic]

class RunError(Exception):
    """A run that failed. A tool's own exception is the ``__cause__``."""

    code: str
    """Stable code: R0001 step limit, R0005 a tool failed, R0009 deadline, ..."""
    seq_no: Optional[int]
    line: Optional[int]
    run_id: Optional[str]
    """The stored run (a run with ``store=``, or resumed): pass it to ``Store.resume``."""

class StoreError(Exception):
    """A run store that cannot do what was asked."""

    code: str
    """Why: ``unknown_run``, ``duplicate_run``, ``busy`` (a live process runs it),
    ``unknown_writes`` (a write call was in flight: resume with
    ``retry_unknown_writes=True`` once checked), ``damaged``, ``not_a_store``,
    ``no_store``, ``read_only``, ``io``, ..."""

class Diagnostic:
    severity: str
    """``"error"`` or ``"warning"``."""
    code: str
    message: str
    seq_no: Optional[int]
    line: Optional[int]
    column: Optional[int]
    help: Optional[str]

class Outcome:
    final_answer: JSON
    variables: dict[str, JSON]
    steps: int
    tool_calls: int
    elapsed_ms: int
    run_id: Optional[str]
    """The stored run's id (a run with ``store=``, or resumed), else ``None``."""
    status: str
    """``"ok"``, or ``"needs_input"``: the run stopped at a question to a person
    (``ask_user``); with a store, ``Store.resume(run_id, input=...)`` answers it."""
    question: Optional[str]
    """The question, while ``needs_input``."""
    choices: Optional[list[str]]
    """The answers to choose from, when the question has some."""

class Answer:
    status: str
    """``"answered"``, ``"invalid_plan"``, ``"run_failed"``, ``"planner_failed"`` or
    ``"needs_input"`` (the plan asks the user ``question``: answer it with
    ``Store.resume(runs[-1], input=...)``, and the goal is answered when that run ends)."""
    answer: JSON
    plan: Optional[str]
    rounds: list[dict[str, Any]]
    error: Optional[str]
    steps: int
    tool_calls: int
    run_id: Optional[str]
    """With ``store=``: the goal's id (its runs are ``ID``, ``ID.2``, ...)."""
    runs: list[str]
    """With ``store=``: the ids of the runs of its plans, in order."""
    question: Optional[str]
    """While ``needs_input``: the question its last run stopped at."""
    choices: Optional[list[str]]

class Request:
    id: int
    tool: str
    args: dict[str, JSON]
    seq_no: Optional[int]
    line: Optional[int]
    step: int
    """Which step of the run issued it: the sequential run makes its calls in this order."""
    kind: str
    """``"tool"`` or ``"condition"`` (answer a condition with a bool)."""
    output_keys: Optional[list[str]]

class Plan:
    @staticmethod
    def from_pbc(data: bytes) -> Plan: ...
    def to_pbc(self, strip: bool = False) -> bytes: ...
    @property
    def source(self) -> Optional[str]: ...
    @property
    def warnings(self) -> list[Diagnostic]: ...
    @property
    def tools(self) -> list[str]: ...
    @property
    def needs(self) -> list[str]:
        """The tools a run must be able to call (``jmp_condition`` too if it has conditions)."""
    @property
    def asks_user(self) -> bool:
        """Whether a run may stop at a question to a person (``ask_user``): its outcome is
        then ``needs_input``."""
    def disasm(self) -> str: ...
    def explain(self) -> list[dict[str, Any]]: ...
    def run(
        self,
        tools: Tools = None,
        *,
        vars: Optional[dict[str, JSON]] = None,
        max_concurrency: int = 16,
        max_steps: Optional[int] = None,
        timeout: Optional[float] = None,
        tools_file: Union[str, os.PathLike[str], None] = None,
        store: Optional[Store] = None,
        run_id: Optional[str] = None,
    ) -> Coroutine[Any, Any, Outcome]: ...
    def run_sync(
        self,
        tools: Tools = None,
        *,
        vars: Optional[dict[str, JSON]] = None,
        max_concurrency: int = 16,
        max_steps: Optional[int] = None,
        timeout: Optional[float] = None,
        tools_file: Union[str, os.PathLike[str], None] = None,
        store: Optional[Store] = None,
        run_id: Optional[str] = None,
    ) -> Outcome: ...
    def start(
        self,
        *,
        vars: Optional[dict[str, JSON]] = None,
        max_concurrency: int = 16,
        max_steps: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> Run: ...

class Run:
    def requests(self) -> list[Request]: ...
    def resume(self, call_id: int, result: Union[JSON, BaseException]) -> None: ...
    @property
    def done(self) -> bool: ...
    @property
    def outcome(self) -> Optional[Outcome]: ...
    def state(self) -> bytes: ...
    @staticmethod
    def restore(
        plan: Plan,
        state: bytes,
        *,
        max_concurrency: int = 16,
        max_steps: Optional[int] = None,
    ) -> Run: ...

def check(
    text: str,
    tools: Tools = None,
    *,
    tools_file: Union[str, os.PathLike[str], None] = None,
    strict: bool = False,
    vars: Union[Iterable[str], dict[str, Any], None] = None,
) -> list[Diagnostic]:
    """Every diagnostic of ``text``. ``vars``: the variables its runs will preset (names,
    or a dict), counted as set (no W0201 for them)."""
def compile(
    text: str,
    tools: Tools = None,
    *,
    tools_file: Union[str, os.PathLike[str], None] = None,
    strict: bool = False,
    vars: Union[Iterable[str], dict[str, Any], None] = None,
) -> Plan:
    """``text`` compiled and verified, or ``PlanError``. ``vars``: the variables its runs
    will preset (names, or a dict), counted as set (no W0201 for them)."""

def _ask_now(
    goal: str, response_format: JSON = None, tools: Tools = None, **options: Any
) -> Coroutine[Any, Any, Answer]: ...

class Store:
    """A run store: an SQLite file, created when missing (the file ``planvm --store``
    uses). ``Plan.run(store=...)`` journals a run in it; ``resume`` continues a run that
    failed or was interrupted; ``runs`` and ``run`` read what is stored."""

    def __init__(self, path: Union[str, os.PathLike[str]], *, durability: str = "normal") -> None:
        """``durability``: ``"normal"`` (each commit survives a crash of the process) or
        ``"full"`` (also a power loss; slower). Raises ``StoreError`` for a file that is not
        a store."""
    @property
    def path(self) -> pathlib.Path: ...
    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first: ``id``, ``status`` (``running``, ``ok``, ``failed``,
        ``interrupted``, ``needs_input``), ``plan``, ``steps``, ``tool_calls``, ``parent``, ``branch_seq``,
        ``created_at`` and ``updated_at`` (Unix milliseconds), ``final_answer``, ``error``,
        ``presets``, ``limits``."""
    def run(self, id: str) -> dict[str, Any]:
        """Run ``id`` with its committed steps and calls: ``{"run": ..., "steps": [...],
        "calls": [...]}``, as ``planvm runs show --format json`` prints it."""
    def cancel(self, id: str) -> bool:
        """Cancels run ``id``: one that has not finished ends as failed (``R0013``), and a
        process running it stops at its next commit point. ``False``: it had finished."""
    def resume(
        self,
        id: str,
        tools: Tools = None,
        *,
        tools_file: Union[str, os.PathLike[str], None] = None,
        retry_unknown_writes: bool = False,
        max_concurrency: Optional[int] = None,
        max_steps: Optional[int] = None,
        timeout: Optional[float] = None,
        input: Optional[str] = None,
    ) -> Coroutine[Any, Any, Outcome]:
        """Continues run ``id`` from its last commit point; calls that completed are not
        made again. A run waiting for input goes on only with ``input``, the answer to its
        question (``StoreError`` ``bad_input`` when it is empty or not one of the choices,
        ``not_waiting`` when the run asks nothing); without it, its outcome says
        ``needs_input`` again and nothing runs. A ``write`` call in flight when it stopped is sent again only with
        ``retry_unknown_writes=True``. A finished run returns its stored outcome (its
        ``variables`` empty). A failed run raises ``RunError``; a store that cannot,
        ``StoreError``."""
