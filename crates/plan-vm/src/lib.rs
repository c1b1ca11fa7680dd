//! `plan-vm`: the register VM that runs validated bytecode and suspends at every tool call.
//!
//! Pure library: no I/O, no clock, no tokio. A host drives it (rune-style):
//! `run()` → `Halt::Yield(requests)` → host performs them → `resume(id, result)` for each →
//! `run()` again, until `Halt::Done` or `Halt::Failed`.
//!
//! Properties:
//! - **Architecture Invariant:** accepts only a [`plan_bytecode::ValidatedProgram`], so the
//!   dispatch loop indexes tables without re-checking (plain indexing, no `unsafe`).
//! - Deterministic: the same program, presets and tool results give the same run.
//! - Bounded: steps, bytes per value, bytes in all variables and value depth are limited;
//!   templates are measured before they are built, so a doubling loop stops on the byte
//!   limit without allocating past it.
//! - Suspendable: [`VmState`] (pc, slots, outstanding requests, counters) serializes, so a
//!   suspended run can continue in another process ([`Vm::from_state`]). It records its
//!   [`STATE_FORMAT`] and its program's fingerprint: restoring it into another program or
//!   from another format is refused with a message saying which.
//! - Concurrent, yet sequential in result: while the head waits for a tool, the VM looks
//!   ahead along the sequential path and issues every call whose inputs are settled
//!   (out-of-order issue, in-order commit, like a CPU reorder buffer). Results are
//!   committed in program order, so variables, final answer and failure are exactly those
//!   of a sequential run, whatever order the host answers in. Nothing past an unresolved
//!   condition is issued; `effects = "write"` tools keep program order relative to every
//!   other call; at most [`Limits::max_concurrency`] requests are outstanding.
//!
//! Module map (start at `vm.rs`):
//! - `vm.rs`: [`Vm`], the dispatch loop (the head) and one `op_*` method per instruction;
//! - `sched.rs`: the look-ahead scan that issues independent calls ahead of the head
//!   (using the read/write slot sets `ValidatedProgram::reads`/`writes`);
//! - `resolve.rs`: operands → values (constants, references with dotted paths, one-pass
//!   templates, arithmetic with text fallback, arrays/objects), against the committed
//!   slots or the look-ahead's overlay;
//! - `state.rs`: [`VmState`], the serializable suspended run, and its checks on restore.
//!
//! A host loop, with one tool call (`answer = llm_generate(...)`, then
//! `final_answer = ${answer}`):
//!
//! ```
//! use plan_bytecode::*;
//! use plan_vm::{Halt, Limits, Vm};
//! use serde_json::json;
//!
//! let program = validate(Program {
//!     consts: vec![json!("prompt"), json!("Say hi"), json!("${answer}")],
//!     slots: vec!["answer".into(), "final_answer".into()],
//!     code: vec![Instr::Call { call: 0 }, Instr::Set { dst: 1, src: Operand::Ref(0) }],
//!     refs: vec![RefDef { slot: 0, path: vec![], raw: 2 }],
//!     calls: vec![CallDef { tool: 0, args: vec![(0, Operand::Const(1))], outputs: vec![0] }],
//!     tools: vec![ToolDef { name: "llm_generate".into(), effects: Effects::Read }],
//!     ..Program::default()
//! })
//! .unwrap();
//! let mut vm = Vm::new(&program, Limits::default());
//! let outcome = loop {
//!     match vm.run() {
//!         Halt::Yield(requests) => {
//!             for r in requests {
//!                 assert_eq!(r.tool, "llm_generate");
//!                 vm.resume(r.id, Ok(json!("hi!"))).unwrap();
//!             }
//!         }
//!         Halt::Done(outcome) => break outcome,
//!         Halt::Failed(e) => panic!("{e}"),
//!     }
//! };
//! assert_eq!(outcome.final_answer, json!("hi!"));
//! ```
//!
//! API CONTRACT (stable): the types below; `Vm`/`VmState` are added by this crate.

pub mod codes;
mod owned;
mod resolve;
mod sched;
mod state;
mod vars;
mod view;
mod vm;

pub use codes::ErrorCode;
pub use owned::OwnedVm;
pub use sched::WINDOW;
pub use state::{Pending, STATE_FORMAT, Status, VmState};
pub use vars::Vars;
pub use vm::{MAX_VALUE_DEPTH, Vm};

use std::sync::Arc;

use plan_bytecode::Pc;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Configurable limits; each failing the run with a clear message and the seq_no.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Maximum instructions executed (default 10,000).
    pub max_steps: u64,
    /// Maximum bytes held in all variables together (default 64 MiB).
    pub max_total_bytes: u64,
    /// Maximum bytes of any one value (default 16 MiB).
    pub max_value_bytes: u64,
    /// Maximum requests outstanding at once (default 16). The head's own request is
    /// always issued; 0 and 1 both mean strictly sequential (one call at a time).
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: u32,
}

/// Default of [`Limits::max_concurrency`].
pub const DEFAULT_MAX_CONCURRENCY: u32 = 16;

fn default_max_concurrency() -> u32 {
    DEFAULT_MAX_CONCURRENCY
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 10_000,
            max_total_bytes: 64 << 20,
            max_value_bytes: 16 << 20,
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
        }
    }
}

/// Identifies one outstanding tool request of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallId(pub u64);

/// What the host is asked to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RequestKind {
    /// A tool call. `output_keys` is `Some(keys)` when the call has several output vars:
    /// the output must be (or contain) a JSON object with these keys. For `llm_generate`
    /// the host appends a response-format instruction listing them to the prompt.
    Tool { output_keys: Option<Vec<String>> },
    /// An LLM condition. `tool` is `"jmp_condition"`, `args` is
    /// `{"prompt": <interpolated>, "context": <resolved or null>}`. The host appends the
    /// `{"result": boolean, "explanation": string}` instruction and returns the raw answer.
    Condition,
}

/// One request issued by the VM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    pub id: CallId,
    /// Tool name (`"jmp_condition"` for conditions).
    pub tool: ToolName,
    /// The instruction's own params after resolution, in source order (cassette key).
    pub args: Args,
    pub kind: RequestKind,
    /// Where it came from.
    pub pc: Pc,
    pub seq_no: Option<i64>,
    /// Which dynamic instruction issued it: the number of instructions the sequential run
    /// executes before it. The same in every run of the same program with the same
    /// inputs, whatever the concurrency and whichever call was issued first, so it tells
    /// two identical calls apart (cassettes record it as `step`). The VM consumes the
    /// answer when its step count reaches this number.
    pub instance: u64,
}

/// The tool name of a [`ToolRequest`], shared with the program that issued it (no copy
/// per request). Reads and compares like a `&str`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolName(Arc<str>);

impl ToolName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<Arc<str>> for ToolName {
    fn from(name: Arc<str>) -> Self {
        ToolName(name)
    }
}

impl From<&str> for ToolName {
    fn from(name: &str) -> Self {
        ToolName(name.into())
    }
}

impl std::ops::Deref for ToolName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for ToolName {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for ToolName {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl Serialize for ToolName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ToolName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(|s| ToolName(s.into()))
    }
}

/// The arguments of a [`ToolRequest`]: resolved once when the request is issued, then
/// shared, not copied, between the request handed to the host and the VM's own record of
/// it (kept so that a saved run can re-issue it). Names are the program's own (shared,
/// not copied per request), in source order; validation guarantees they are distinct.
/// Reads like a map (`get`, `iter`, `len`) and serializes as a JSON object.
#[derive(Clone, Debug, Default)]
pub struct Args(Arc<ArgList>);

/// Most calls have one or two arguments (a query and a count, a prompt and a context):
/// those live in the `Args` allocation itself. Room for more would be carried by every
/// request of every run in flight (a batch holds thousands).
type ArgList = smallvec::SmallVec<[(Arc<str>, Value); 2]>;

impl Args {
    /// Arguments from `(name, value)` pairs with distinct names.
    pub(crate) fn from_pairs(pairs: ArgList) -> Self {
        Args(Arc::new(pairs))
    }

    /// The value of argument `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| &**k == name).map(|(_, v)| v)
    }

    /// `(name, value)` pairs in source order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.into_iter()
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
    }

    pub fn values(&self) -> impl ExactSizeIterator<Item = &Value> {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The arguments as a JSON map (copied).
    pub fn to_map(&self) -> Map<String, Value> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.clone()))
            .collect()
    }

    /// The arguments as a JSON map (values moved if the arguments are not shared).
    pub fn into_map(self) -> Map<String, Value> {
        match Arc::try_unwrap(self.0) {
            Ok(list) => list.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            Err(shared) => Args(shared).to_map(),
        }
    }
}

/// `args["name"]`: the argument's value, `null` when there is none (as indexing a JSON
/// value reads; never a panic).
impl std::ops::Index<&str> for Args {
    type Output = Value;

    fn index(&self, name: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.get(name).unwrap_or(&NULL)
    }
}

impl<'a> IntoIterator for &'a Args {
    type Item = (&'a str, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Arc<str>, Value)>,
        fn(&'a (Arc<str>, Value)) -> (&'a str, &'a Value),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (&**k, v))
    }
}

impl From<Map<String, Value>> for Args {
    fn from(map: Map<String, Value>) -> Self {
        Args::from_pairs(map.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

/// Equal when they hold the same names with equal values, in any order (as two JSON
/// objects are).
impl PartialEq for Args {
    fn eq(&self, other: &Self) -> bool {
        self.same_as(other.len(), |k| other.get(k))
    }
}

impl PartialEq<Map<String, Value>> for Args {
    fn eq(&self, other: &Map<String, Value>) -> bool {
        self.same_as(other.len(), |k| other.get(k))
    }
}

impl Args {
    /// Whether a map of `len` names reading `get` holds exactly these arguments.
    fn same_as<'a>(&self, len: usize, get: impl Fn(&str) -> Option<&'a Value>) -> bool {
        self.len() == len && self.iter().all(|(k, v)| get(k) == Some(v))
    }
}

impl Serialize for Args {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Args {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Args::from)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run's failure, with where it happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunError {
    /// What kind of failure (stable; match this, not the message).
    #[serde(default)]
    pub code: ErrorCode,
    pub message: String,
    pub pc: Option<Pc>,
    pub seq_no: Option<i64>,
    pub line: Option<u32>,
}

/// A finished run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub final_answer: Value,
    /// Every set variable at the end, in slot order (then presets the program never
    /// mentions). Moved out of the VM, not copied, and named by the program's shared
    /// names: the first `Done` hands them over, and the finished VM keeps only
    /// `final_answer`.
    pub vars: Vars,
    /// Instructions executed.
    pub steps: u64,
}

/// Why `run()` returned.
#[derive(Clone, Debug, PartialEq)]
pub enum Halt {
    /// New tool requests to perform, all at once (possibly empty if only older ones are
    /// outstanding). The first is the head's when the head issued one; the rest were
    /// issued ahead of it (see "Concurrency" in docs/semantics.md).
    Yield(Vec<Arc<ToolRequest>>),
    Done(Outcome),
    Failed(RunError),
}

/// Trace event recorded when tracing is on (drained by the host with `take_events`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    Step {
        pc: Pc,
        seq_no: Option<i64>,
        op: String,
    },
    VarSet {
        name: String,
        /// Empty when the event carries its value and the host turned previews off
        /// ([`Vm::set_trace_previews`]).
        preview: String,
        bytes: u64,
        /// The value itself, when the host asked for values up to this size
        /// ([`Vm::set_trace_values`]); never part of the serialized trace.
        #[serde(skip)]
        value: Option<Value>,
    },
    Jump {
        from_seq: Option<i64>,
        to_seq: Option<i64>,
        taken: Option<bool>,
    },
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match (self.seq_no, self.line) {
            (Some(s), Some(l)) => write!(f, " (seq_no {s}, line {l})"),
            (Some(s), None) => write!(f, " (seq_no {s})"),
            (None, Some(l)) => write!(f, " (line {l})"),
            (None, None) => Ok(()),
        }
    }
}

impl std::error::Error for RunError {}
