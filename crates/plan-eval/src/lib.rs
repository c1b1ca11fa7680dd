//! `plan-eval`: a planner measured on a dataset of goals (`planvm eval`, docs/eval.md).
//!
//! - `dataset`: JSON lines of cases (`goal`, the checks on its answer, labels); a bad
//!   line is reported with its number and skipped.
//! - `grade`: the checks of one case on one answer (`expected`, `must_contain`,
//!   `must_not_contain`, `regex`): a verdict, a score and the reason.
//! - `judge`: the LLM judge (`[eval.judge]`), its rubric (`judge.md`), its reply read
//!   leniently.
//! - `run`: every case asked as `planvm ask` asks a goal, many at once, each on a host
//!   of its own when its calls are recorded or replayed per case.
//! - `store`: an evaluation in the run store: each case a stored goal, its verdict
//!   beside it; people's verdicts on a baseline's runs; the JSON report.
//! - `report`: the summary (pass rate with its 95% interval, latency, failures by cause),
//!   the comparison with an earlier report, and the report as text for people.
//! - `evaluation`: an evaluation as a face asks for one: read, checked, set up, run and
//!   concluded.
//! - `conclude`: how an evaluation ends: its summary stored, the comparison, the gates.

mod conclude;
mod dataset;
mod evaluation;
mod grade;
mod judge;
mod report;
mod run;
mod store;

pub use conclude::{Concluded, conclude};
pub use dataset::{Case, parse};
pub use evaluation::{EvalRequest, Evaluated, Evaluation};
pub use grade::{Check, Grade, grade};
pub use judge::{JUDGE_TOOL, Judge, Verdict};
pub use report::{CaseReport, Change, Comparison, Summary, compare, summarize, text_report};
pub use run::{Cassettes, CassettesError, Setup, cassette_names, run};
pub use store::{
    PersonVerdict, Stored, begin, compare_with_people, end, new_eval_id, people, report_json,
};
