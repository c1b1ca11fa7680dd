//! Stable diagnostic codes of the verifier. Each has one `///` line with an input that
//! triggers it. Reader codes (`E00xx`, `W00xx`) and plan-structure codes (`E01xx`, `W01xx`)
//! live in `plan_syntax::codes`.

plan_syntax::declare_codes! {
    /// `[{"seq_no": 0, ...}, {"seq_no": 0, ...}]`: two instructions share a seq_no.
    DUPLICATE_SEQ = "E0201";
    /// `{"type": "calling", "parameters": {"tool_name": "web_serch", ...}}`: no such tool.
    UNKNOWN_TOOL = "E0202";
    /// `{"tool_name": "vector_search", "tool_params": {"top_k": 3}}`: `query` is required.
    MISSING_PARAM = "E0203";
    /// `{"tool_name": "vector_search", "tool_params": {"query": "q", "top_k": "ten"}}`, or a
    /// constant outside the param's `enum`.
    PARAM_TYPE = "E0204";
    /// `{"type": "jmp", "parameters": {"target_seq": 42}}` when no instruction has seq_no 42.
    BAD_TARGET = "E0205";
    /// A plan in which no reachable instruction sets `final_answer`.
    NO_FINAL_ANSWER = "E0206";
    /// `[{"seq_no": 0, "type": "jmp", "parameters": {"target_seq": 0}}]`: a loop nothing can leave.
    INESCAPABLE_CYCLE = "E0207";
    /// `{"final_answer": 1, "x": 2}` written into more than one output var of the same name.
    DUPLICATE_OUTPUT = "E0208";
    /// An empty variable name: `{"": 1}` or `"output_vars": [""]`.
    BAD_VAR_NAME = "E0209";
    /// `"${a}${a}…"` with 70,000 parts: past a limit of the bytecode (`plan_bytecode::limits`).
    OVER_LIMIT = "E0210";
    /// `planvm branch` to a plan reading `${x}` where `x` neither exists at the branch point
    /// nor is assigned anywhere in the plan.
    UNKNOWN_VAR_AT_ENTRY = "E0211";
    /// No plan should: the program the compiler produced fails the bytecode validator (a
    /// bug of the compiler, reported instead of a crash).
    INVALID_PROGRAM = "E0212";

    /// `"${summary}"` where no instruction ever assigns `summary` and the run is not started
    /// with it (`--var summary=...` counts as set).
    NEVER_ASSIGNED = "W0201";
    /// `"${x}"` where `x` is assigned only on one branch before this point.
    MAYBE_UNSET = "W0202";
    /// A path that reaches the end of the plan without setting `final_answer`.
    FALLS_OFF_END = "W0203";
    /// An instruction no path from the first instruction reaches.
    UNREACHABLE = "W0204";
    /// `{"final_answer": "done"}` followed by more instructions that only a jump could reach.
    AFTER_FINAL = "W0205";
    /// The first instruction is not `reasoning`.
    FIRST_NOT_REASONING = "W0206";
    /// seq_no values 0, 2, 3 or 1, 0, 2: not 0..n-1 in order.
    SEQ_ORDER = "W0207";
    /// `{"y": "${x}", "x": 10}`: values of one assign reference each other.
    ASSIGN_SELF_REF = "W0208";
    /// `{"tool_name": "vector_search", "tool_params": {"query": "q", "top_k": 3, "lang": "en"}}`.
    UNKNOWN_PARAM = "W0209";
    /// `{"date": "2024-10-05"}`: the literal is arithmetic and becomes 2009.
    ARITH_CHANGES_LITERAL = "W0210";
    /// A `calling` instruction with no `output_vars`: its output is discarded.
    OUTPUT_DISCARDED = "W0211";
}
