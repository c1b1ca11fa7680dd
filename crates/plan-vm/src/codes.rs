//! The run errors' codes (`R00NN`), declared like the compiler's (each with one `///`
//! line: what fails, and an example), so `planc codes` lists and explains them too.
//! [`crate::ErrorCode`] is the type a run reports; a test checks the two agree.

plan_syntax::declare_codes! {
    /// The step limit (`--max-steps`): a loop that runs 10,001 instructions.
    STEP_LIMIT = "R0001";
    /// A value over the per-value byte limit: a template that would be 17 MiB.
    VALUE_TOO_LARGE = "R0002";
    /// All variables (or one call's arguments) over `max_total_bytes`: variables holding
    /// 65 MiB together.
    TOTAL_TOO_LARGE = "R0003";
    /// A value nested more than 100 levels deep: an assign nesting a 100-level value in
    /// an array.
    TOO_DEEP = "R0004";
    /// A tool call, or a condition's LLM call, failed after its retries: HTTP 500 five
    /// times; no cassette entry; `--tool-timeout`.
    TOOL_FAILED = "R0005";
    /// A call with several output vars got no JSON object with those keys:
    /// `output_vars: ["a", "b"]`, output `{"a": 1}`.
    MISSING_OUTPUT = "R0006";
    /// A condition's answer is not a boolean: `"maybe"`.
    BAD_CONDITION_ANSWER = "R0007";
    /// The run went past the last instruction without setting `final_answer`: a plan
    /// whose last step is a search.
    NO_FINAL_ANSWER = "R0008";
    /// The run's deadline (`--timeout`) passed: `--timeout 60` on a run of 61 s.
    DEADLINE = "R0009";
    /// The run could not start: no backend or API key for a tool; a `--var` over a
    /// limit; a batch plan that does not compile.
    NOT_STARTED = "R0010";
    /// A saved run that does not belong to the program, or a result for an unknown
    /// request: restoring a state into an edited plan.
    BAD_STATE = "R0011";
    /// A journal of the run (a `--record` cassette, a run store) could not be written:
    /// a full disk.
    RECORD_FAILED = "R0012";
    /// The run was cancelled (`planvm runs cancel ID`, `Store.cancel`): a process running
    /// it stops at its next commit point.
    CANCELLED = "R0013";
    /// A bug in planvm itself (report it).
    INTERNAL = "R0099";
}
