//! The run errors' codes (`R00NN`), declared like the compiler's (each with one `///`
//! line: what fails, and an example), so `planc codes` lists and explains them too. The
//! same table makes [`crate::ErrorCode`], the type a run reports: its variants, their
//! serialized names, [`crate::ErrorCode::ALL`] and [`crate::ErrorCode::as_str`], so a code
//! is written once.

use serde::{Deserialize, Serialize};

/// The codes' constants and `ALL` (for `planc codes`), and [`ErrorCode`], from one table:
/// each entry is its documentation, its variant, its constant and its code.
macro_rules! run_codes {
    ($( #[doc = $doc:literal] $(#[doc = $more:literal])* $variant:ident $name:ident = $code:literal; )*) => {
        plan_syntax::declare_codes! {
            $( #[doc = $doc] $(#[doc = $more])* $name = $code; )*
        }

        /// What kind of failure a [`crate::RunError`] is: stable codes that scripts and
        /// tests match instead of message text (docs/semantics.md lists them with
        /// examples).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ErrorCode {
            $(
                #[doc = $doc]
                $(#[doc = $more])*
                #[serde(rename = $code)]
                $variant,
            )*
        }

        impl ErrorCode {
            /// Every code, in order.
            pub const ALL: [ErrorCode; ALL.len()] = [$(ErrorCode::$variant),*];

            /// The code as written in reports: `R0001`, ...
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                }
            }
        }
    };
}

run_codes! {
    /// The step limit (`--max-steps`): a loop that runs 10,001 instructions.
    StepLimit STEP_LIMIT = "R0001";
    /// A value over the per-value byte limit: a template that would be 17 MiB.
    ValueTooLarge VALUE_TOO_LARGE = "R0002";
    /// All variables (or one call's arguments) over `max_total_bytes`: variables holding
    /// 65 MiB together.
    TotalTooLarge TOTAL_TOO_LARGE = "R0003";
    /// A value nested more than 100 levels deep: an assign nesting a 100-level value in
    /// an array.
    TooDeep TOO_DEEP = "R0004";
    /// A tool call, or a condition's LLM call, failed after its retries: HTTP 500 five
    /// times; no cassette entry; `--tool-timeout`.
    ToolFailed TOOL_FAILED = "R0005";
    /// A call with several output vars got no JSON object with those keys:
    /// `output_vars: ["a", "b"]`, output `{"a": 1}`.
    MissingOutput MISSING_OUTPUT = "R0006";
    /// A condition's answer is not a boolean: `"maybe"`.
    BadConditionAnswer BAD_CONDITION_ANSWER = "R0007";
    /// The run went past the last instruction without setting `final_answer`: a plan
    /// whose last step is a search.
    NoFinalAnswer NO_FINAL_ANSWER = "R0008";
    /// The run's deadline (`--timeout`) passed: `--timeout 60` on a run of 61 s.
    Deadline DEADLINE = "R0009";
    /// The run could not start: no backend or API key for a tool; a `--var` over a
    /// limit; a batch plan that does not compile.
    NotStarted NOT_STARTED = "R0010";
    /// A saved run that does not belong to the program, or a result for an unknown
    /// request: restoring a state into an edited plan.
    BadState BAD_STATE = "R0011";
    /// A journal of the run (a `--record` cassette, a run store) could not be written:
    /// a full disk.
    RecordFailed RECORD_FAILED = "R0012";
    /// The run was cancelled (`planvm runs cancel ID`, `Store.cancel`): a process running
    /// it stops at its next commit point.
    Cancelled CANCELLED = "R0013";
    /// A bug in planvm itself (report it).
    Internal INTERNAL = "R0099";
}

/// A failure said without its kind is planvm's own.
impl Default for ErrorCode {
    fn default() -> Self {
        ErrorCode::Internal
    }
}
