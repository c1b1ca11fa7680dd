//! Stable diagnostic codes of the verifier. Each has one `///` line with an input that
//! triggers it. Reader codes (`E00xx`, `W00xx`) and plan-structure codes (`E01xx`, `W01xx`)
//! live in `plan_syntax::codes`.

/// `[{"seq_no": 0, ...}, {"seq_no": 0, ...}]`: two instructions share a seq_no.
pub const DUPLICATE_SEQ: &str = "E0201";
/// `{"type": "calling", "parameters": {"tool_name": "web_serch", ...}}`: no such tool.
pub const UNKNOWN_TOOL: &str = "E0202";
/// `{"tool_name": "vector_search", "tool_params": {"top_k": 3}}`: `query` is required.
pub const MISSING_PARAM: &str = "E0203";
/// `{"tool_name": "vector_search", "tool_params": {"query": "q", "top_k": "ten"}}`.
pub const PARAM_TYPE: &str = "E0204";
/// `{"type": "jmp", "parameters": {"target_seq": 42}}` when no instruction has seq_no 42.
pub const BAD_TARGET: &str = "E0205";
/// A plan in which no reachable instruction sets `final_answer`.
pub const NO_FINAL_ANSWER: &str = "E0206";
/// `[{"seq_no": 0, "type": "jmp", "parameters": {"target_seq": 0}}]`: a loop nothing can leave.
pub const INESCAPABLE_CYCLE: &str = "E0207";
/// `{"final_answer": 1, "x": 2}` written into more than one output var of the same name.
pub const DUPLICATE_OUTPUT: &str = "E0208";
/// An empty variable name: `{"": 1}` or `"output_vars": [""]`.
pub const BAD_VAR_NAME: &str = "E0209";
/// `"${a}${a}…"` with 70,000 parts: past a limit of the bytecode (`plan_bytecode::limits`).
pub const OVER_LIMIT: &str = "E0210";
/// `planvm branch` to a plan reading `${x}` where `x` neither exists at the branch point
/// nor is assigned anywhere in the plan.
pub const UNKNOWN_VAR_AT_ENTRY: &str = "E0211";

/// `"${summary}"` where no instruction ever assigns `summary`.
pub const NEVER_ASSIGNED: &str = "W0201";
/// `"${x}"` where `x` is assigned only on one branch before this point.
pub const MAYBE_UNSET: &str = "W0202";
/// A path that reaches the end of the plan without setting `final_answer`.
pub const FALLS_OFF_END: &str = "W0203";
/// An instruction no path from the first instruction reaches.
pub const UNREACHABLE: &str = "W0204";
/// `{"final_answer": "done"}` followed by more instructions that only a jump could reach.
pub const AFTER_FINAL: &str = "W0205";
/// The first instruction is not `reasoning`.
pub const FIRST_NOT_REASONING: &str = "W0206";
/// seq_no values 0, 2, 3 or 1, 0, 2: not 0..n-1 in order.
pub const SEQ_ORDER: &str = "W0207";
/// `{"y": "${x}", "x": 10}`: values of one assign reference each other.
pub const ASSIGN_SELF_REF: &str = "W0208";
/// `{"tool_name": "vector_search", "tool_params": {"query": "q", "top_k": 3, "lang": "en"}}`.
pub const UNKNOWN_PARAM: &str = "W0209";
/// `{"date": "2024-10-05"}`: the literal is arithmetic and becomes 2009.
pub const ARITH_CHANGES_LITERAL: &str = "W0210";
/// A `calling` instruction with no `output_vars`: its output is discarded.
pub const OUTPUT_DISCARDED: &str = "W0211";
