//! What a run comes to: its status, its failure, the question it stopped at, and the
//! report `planvm` prints; what journals and recordings are told of it too.

use std::time::Duration;

use plan_vm::{ErrorCode, ToolRequest};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Ok,
    Failed,
    /// Stopped at a question to a person (`ask_user`): it goes on once answered
    /// (`RunReport::question`).
    NeedsInput,
    /// Stopped by its host before its end, at a commit point with no call out
    /// ([`crate::Host::drain`]): a stored run goes on from there when resumed.
    Stopped,
}

/// What a run that stopped for a person asks them: the arguments of its `human` call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub question: String,
    /// The answers to choose from, when the plan gave some: any other is refused.
    pub choices: Option<Vec<String>>,
    pub seq_no: Option<i64>,
}

impl Question {
    /// The question `req` (a call of a `human` tool) asks. NB: its args are the plan's
    /// values: a `question` that is not a string is shown as its JSON, and so are
    /// choices that are not strings (the answer is compared with what is shown).
    pub fn of(req: &ToolRequest) -> Question {
        Question::from_args(|name| req.args.get(name), req.seq_no)
    }

    /// The question a call of a `human` tool whose args `arg` looks up asks (see
    /// [`Question::of`]).
    pub fn from_args<'a>(arg: impl Fn(&str) -> Option<&'a Value>, seq_no: Option<i64>) -> Question {
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let choices = match arg("choices") {
            Some(Value::Array(items)) if !items.is_empty() => {
                Some(items.iter().map(text).collect())
            }
            _ => None,
        };
        Question {
            question: arg("question").map(text).unwrap_or_default(),
            choices,
            seq_no,
        }
    }

    /// Why `answer` does not answer this question (None: it does).
    pub fn refuses(&self, answer: &str) -> Option<String> {
        if answer.trim().is_empty() {
            return Some("the answer is empty".into());
        }
        let choices = self.choices.as_ref()?;
        if choices.iter().any(|c| c == answer) {
            return None;
        }
        let listed: Vec<String> = choices.iter().map(|c| format!("`{c}`")).collect();
        Some(format!(
            "`{answer}` is not one of the choices: {}",
            listed.join(", ")
        ))
    }
}

/// Where and why a run failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportError {
    /// Stable code (`R0001`, ...; see `plan_vm::ErrorCode`).
    pub code: ErrorCode,
    pub message: String,
    pub seq_no: Option<i64>,
    pub line: Option<u32>,
}

/// The result of one run, as `planvm --format json` prints it (`vars` is not printed).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    pub status: RunStatus,
    pub final_answer: Value,
    pub error: Option<ReportError>,
    pub steps: u64,
    pub tool_calls: u64,
    pub elapsed_ms: u64,
    /// The tokens its LLM calls cost (`llm_generate`, conditions), when their servers
    /// said: every call answered in this process, issued ahead or not; a resumed run's
    /// earlier calls are in the store's total.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<plan_llm::Usage>,
    /// What it asks, when it stopped for a person (`needs_input`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub question: Option<Question>,
    /// Every variable set at the end (successful runs only).
    #[serde(skip)]
    pub vars: plan_vm::Vars,
}

impl RunReport {
    /// A run that failed before the VM started (bad preset variable, unservable tool).
    pub fn failed_before_start(message: String, elapsed: Duration) -> RunReport {
        RunReport {
            status: RunStatus::Failed,
            final_answer: Value::Null,
            error: Some(ReportError {
                code: ErrorCode::NotStarted,
                message,
                seq_no: None,
                line: None,
            }),
            steps: 0,
            tool_calls: 0,
            usage: None,
            elapsed_ms: millis(elapsed),
            question: None,
            vars: Default::default(),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == RunStatus::Ok
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
