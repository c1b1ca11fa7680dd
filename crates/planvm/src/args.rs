//! Argument groups several commands share (flattened into theirs with clap), and the
//! parsers of their values.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use plan_store::Durability;
use plan_vm::Limits;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// The final answer on stdout (a string raw, anything else as compact JSON).
    Text,
    /// One JSON object: status, final_answer, error, steps, tool_calls, elapsed_ms.
    Json,
}

impl Format {
    pub(crate) fn is_json(self) -> bool {
        self == Format::Json
    }
}

/// The tools a run calls and where their answers come from and go, with the variables it
/// starts with (`run`, `ask`).
#[derive(Args, Debug)]
pub(crate) struct ToolArgs {
    /// Tools file: the tools plans may call and the backend serving each (the same file
    /// planc uses; for `ask`, also [planner]).
    #[arg(long, value_name = "FILE.toml")]
    pub(crate) tools: Option<PathBuf>,
    /// Serve every call from this cassette, no network: tool calls (and, for `ask`, the
    /// planner's).
    #[arg(long, value_name = "CASSETTE")]
    pub(crate) replay: Option<PathBuf>,
    /// Append every completed call to this cassette (JSON lines): tool calls (and, for
    /// `ask`, the planner's).
    #[arg(long, value_name = "CASSETTE")]
    pub(crate) record: Option<PathBuf>,
    /// Preset a variable; VALUE is parsed as JSON when it parses, else taken as a string.
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub(crate) vars: Vec<(String, Value)>,
}

impl ToolArgs {
    /// The files a run writes besides the store: `--trace` and `--record`.
    pub(crate) fn outputs<'a>(&'a self, output: &'a OutputArgs) -> Vec<(&'static str, &'a Path)> {
        let mut outputs = Vec::new();
        outputs.extend(output.trace.as_deref().map(|p| ("--trace", p)));
        outputs.extend(self.record.as_deref().map(|p| ("--record", p)));
        outputs
    }
}

/// Where the calls of a process that runs many plans are answered (`serve`, `mcp`,
/// `worker`).
#[derive(Args, Debug)]
pub(crate) struct HostArgs {
    /// Answer the tools' calls (and a service's planner) from this cassette instead of
    /// their backends, as `planvm run --replay`: no network, for demos and benchmarks.
    #[arg(long, value_name = "FILE.jsonl")]
    pub(crate) replay: Option<PathBuf>,
    /// Limit on one tool call, retries included, in seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub(crate) tool_timeout: Option<Duration>,
}

impl HostArgs {
    pub(crate) fn options(&self) -> plan_host::HostOptions {
        plan_host::HostOptions {
            tool_timeout: self.tool_timeout,
            replay: self.replay.clone(),
            ..plan_host::HostOptions::default()
        }
    }
}

/// Where a run's trace and result go (`run`, `resume`, `branch`).
#[derive(Args, Debug)]
pub(crate) struct OutputArgs {
    /// Write trace events (JSON lines) to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

/// Limits of one run, shared by `run` and `batch` (in a batch they apply to each run).
#[derive(clap::Args, Debug)]
pub(crate) struct LimitArgs {
    /// Maximum instructions executed.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_steps)]
    pub(crate) max_steps: u64,
    /// Maximum bytes held in all variables together.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_total_bytes)]
    max_bytes: u64,
    /// Maximum tool calls in flight at once (independent calls run concurrently; 1 runs
    /// them one at a time, like the reference VM).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_concurrency)]
    max_concurrency: u32,
    /// Overall deadline of the run, in seconds (for `ask`: of the whole ask, its planner
    /// calls included).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<Duration>,
    /// Limit on one tool call, retries included, in seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    tool_timeout: Option<Duration>,
}

impl LimitArgs {
    pub(crate) fn times(&self) -> Times {
        Times {
            deadline: self.timeout,
            tool_timeout: self.tool_timeout,
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_steps: self.max_steps,
            max_total_bytes: self.max_bytes,
            max_concurrency: self.max_concurrency,
            ..Limits::default()
        }
    }
}

/// The run's deadline and per-call limit.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Times {
    pub(crate) deadline: Option<Duration>,
    pub(crate) tool_timeout: Option<Duration>,
}

pub(crate) fn parse_var(s: &str) -> Result<(String, Value), String> {
    plan_runs::batch::parse_var(s)
}

/// JSON when it parses, else the text itself (`--response-format`).
pub(crate) fn json_or_text(s: &str) -> Result<Value, String> {
    Ok(serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned())))
}

pub(crate) fn parse_secs(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(secs > 0.0 && secs <= 1e9) {
        return Err(format!(
            "expected more than 0 and at most 1e9 seconds, got {s}"
        ));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

/// Store options of `run` (and `batch`).
#[derive(Args, Debug, Clone)]
pub(crate) struct StoreArgs {
    /// Journal the run in this store (an SQLite file, created if missing) so that it can
    /// be resumed after a crash, inspected and branched. Default: $PLANVM_STORE.
    #[arg(long, value_name = "DB", env = "PLANVM_STORE")]
    pub(crate) store: Option<PathBuf>,
    /// The stored run's id (default: a new UUID v7). Letters, digits, `.`, `_`, `-`.
    #[arg(long, value_name = "ID", requires = "store", value_parser = parse_run_id)]
    pub(crate) run_id: Option<String>,
    #[command(flatten)]
    pub(crate) durability: DurabilityArg,
}

#[derive(Args, Debug, Clone, Copy)]
pub(crate) struct DurabilityArg {
    /// What each commit survives: `normal`, a crash of planvm (SQLite synchronous=NORMAL);
    /// `full`, also a power loss (synchronous=FULL, slower).
    #[arg(long, value_enum, default_value_t = DurabilityLevel::Normal)]
    durability: DurabilityLevel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DurabilityLevel {
    Normal,
    Full,
}

impl DurabilityArg {
    pub(crate) fn get(self) -> Durability {
        match self.durability {
            DurabilityLevel::Normal => Durability::Normal,
            DurabilityLevel::Full => Durability::Full,
        }
    }
}

pub(crate) fn parse_run_id(s: &str) -> Result<String, String> {
    plan_store::check_run_id(s)?;
    Ok(s.to_owned())
}

/// A number of days, 0 or more.
pub(crate) fn parse_days(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(d) if (0.0..=1e6).contains(&d) => Ok(d),
        _ => Err(format!("`{s}` is not a number of days from 0 to 1e6")),
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum Verdict {
    Good,
    Bad,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Good => "good",
            Verdict::Bad => "bad",
        }
    }
}
