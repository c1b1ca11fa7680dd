//! Calls started while the plan is still arriving.
//!
//! Rule: a call starts early only when sequential execution is certain to reach it with
//! these arguments. The instructions that have arrived are cut before the first one that
//! could change the path or the world (a `jmp`, an older-dialect `condition`, a call of a
//! `write` tool, an unknown type); the rest, the *prefix*, is compiled with a last
//! instruction that ends it, and an instruction the compiler rejects (a missing
//! parameter, say) cuts it again, for good: instructions that have arrived do not change.
//! The prefix then runs on the real VM and host: the VM issues a call only once its
//! inputs are set, so the calls it makes are exactly the first calls of the sequential
//! run, whatever arrives after (a variable nothing has set yet stays as its text, as it
//! would at that point of the sequential run).
//!
//! A longer prefix runs as more arrives (compiled from its start again, so on a
//! schedule that keeps the whole read linear: see `follow`); the calls are started once and kept by
//! [`EarlyCalls`], a layer over the host's `pure` and `read` backends keyed by tool,
//! arguments and the call's place in the run (instructions executed before it). The
//! final run of the verified plan goes through the same layer, and takes an early result
//! only for a call with the same key made by an instruction of its own straight prefix
//! (before any `jmp` or `write` call of the final plan), and only a successful one: a
//! plan repaired after streaming reuses an early result only for the same call at the
//! same place, never across a write it added before it. While a plan arrives, a call of a
//! `write` tool is refused outright (a second guard besides the prefix rule), so `write`
//! tools never run before the whole plan is verified.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use serde_json::{Value, json};

use plan_bytecode::ValidatedProgram;
use plan_compiler::CompileOptions;
use plan_host::{Backend, Host, ToolError, ToolErrorKind, TraceEvent, run_plan_recording};
use plan_manifest::{Effects, Manifest};
use plan_vm::{Limits, ToolRequest};

use crate::scan::Scanner;

/// The instructions of a plan that have arrived.
struct Arrivals {
    scanner: Scanner,
    arrived: Vec<Value>,
    redactor: Arc<plan_llm::Redactor>,
    round: u64,
    /// `arrived[..straight]` is certain to run; past a `bent` instruction nothing is.
    straight: usize,
    bent: bool,
}

impl Arrivals {
    /// Reads `piece`, telling `on_event` of each instruction it completes.
    fn take(&mut self, piece: &str, on_event: &mut (dyn FnMut(&TraceEvent<'_>) + Send)) {
        let new = self.scanner.push(piece);
        for a in &new {
            on_event(&TraceEvent::Planning {
                what: "instruction_arrived",
                round: self.round,
                index: Some(a.index as u64),
                seq_no: a.value.get("seq_no").and_then(Value::as_i64),
                tool: None,
            });
        }
        // NB: a reply may quote the request, key included; no call may carry it.
        let redactor = &self.redactor;
        self.arrived
            .extend(new.into_iter().map(|a| redactor.value(a.value)));
    }

    /// Extends the straight prefix over what has arrived.
    fn extend_straight(&mut self, manifest: &Manifest) {
        while !self.bent && self.straight < self.arrived.len() {
            if is_straight(&self.arrived[self.straight], manifest) {
                self.straight += 1;
            } else {
                self.bent = true;
            }
        }
    }
}

/// When a longer prefix is compiled. NB: a longer prefix is compiled (and run) from its
/// start again, so each costs time in its length: it is compiled once enough time has
/// passed since the last (a model writing a plan, at tens of tokens a second, gets one at
/// every instruction), or once it is twice as long. So a reply that arrives all at once
/// costs about two compiles of it, not one per instruction (quadratic), and compiling
/// stays a small share of the time.
#[derive(Default)]
struct Schedule {
    /// The instructions whose calls the prefix run may start.
    started: usize,
    /// Past an instruction the compiler rejected, nothing starts early.
    blocked: Option<usize>,
    /// The straight length last compiled, when that compile ended and how long it took.
    compiled: usize,
    /// NB: on tokio's clock, like the wait it sets: a compile measured on the real clock
    /// but waited for on a paused one (tests) would put off a call by chance of load.
    cost: Option<(tokio::time::Instant, Duration)>,
    /// When a compile put off by the schedule is due.
    later: Option<tokio::time::Instant>,
}

impl Schedule {
    /// The prefix length to compile now, if any, given a straight prefix of `straight`
    /// instructions; a compile not due yet is put off to `later`.
    fn due(&mut self, straight: usize) -> Option<usize> {
        let target = straight.min(self.blocked.unwrap_or(usize::MAX));
        if target <= self.started || target <= self.compiled {
            return None;
        }
        let wait = self.cost.map_or(Duration::ZERO, |(ended, took)| {
            took.saturating_mul(COMPILE_SPACING)
                .saturating_sub(ended.elapsed())
        });
        if target < self.compiled.saturating_mul(2) && !wait.is_zero() {
            self.later = Some(tokio::time::Instant::now() + wait);
            return None;
        }
        self.later = None;
        self.compiled = target;
        Some(target)
    }
}

/// Runs a plan as it arrives (see the module docs). While it lives, the host's `pure` and
/// `read` tools go through the layer of early calls, so the run of the whole plan takes
/// their results; dropping it puts the backends back and stops the early calls no run
/// took.
pub struct Streamer<'h> {
    calls: EarlyCalls<'h>,
    vars: Vec<(String, Value)>,
    limits: Limits,
}

impl<'h> Streamer<'h> {
    /// `vars` and `limits` are those the plan will run with.
    pub fn new(host: &'h Host, vars: Vec<(String, Value)>, limits: Limits) -> Streamer<'h> {
        Streamer {
            calls: EarlyCalls::install(host),
            vars,
            limits,
        }
    }

    /// Follows a plan read from `reader` (`from` names it in messages: "standard
    /// input") as it arrives, as [`Streamer::follow`] does, and returns all its bytes: at
    /// most the size limit of a plan. A character cut between two reads waits for the
    /// rest; bytes that are not text (a .pbc) are only read.
    pub async fn follow_reader(
        &self,
        reader: impl tokio::io::AsyncRead + Unpin,
        from: &str,
        on_event: &mut (dyn FnMut(&TraceEvent<'_>) + Send),
    ) -> Result<Vec<u8>, String> {
        let (tx, pieces) = tokio::sync::mpsc::unbounded_channel();
        self.follow(read_pieces(reader, from, tx), pieces, 0, on_event)
            .await
    }

    /// Follows a plan arriving as `pieces` while `whole` reads all of it (the reply, the
    /// bytes of a file), and returns what `whole` returns. The instructions that have
    /// arrived may start calls, as the schedule below compiles longer prefixes; `on_event`
    /// hears of each arrival and each call started ([`TraceEvent::Planning`], `round`).
    pub async fn follow<T>(
        &self,
        whole: impl std::future::Future<Output = T>,
        mut pieces: tokio::sync::mpsc::UnboundedReceiver<String>,
        round: u64,
        on_event: &mut (dyn FnMut(&TraceEvent<'_>) + Send),
    ) -> T {
        let manifest = self.calls.host.manifest();
        let mut whole = std::pin::pin!(whole);
        let mut arrivals = Arrivals {
            scanner: Scanner::default(),
            arrived: Vec::new(),
            redactor: self.calls.host.redactor().clone(),
            round,
            straight: 0,
            bent: false,
        };
        let mut schedule = Schedule::default();
        let mut prefix_run: Option<BoxFuture<'_, ()>> = None;
        self.calls.set_open(true);
        // NB: also when this is dropped unfinished (a planner call cut by its deadline).
        let closing = Closing(&self.calls);
        let result = loop {
            let mut look = false;
            tokio::select! {
                r = &mut whole => break r,
                Some(piece) = pieces.recv() => {
                    arrivals.take(&piece, on_event);
                    // NB: what is already queued is read before compiling, so a fast
                    // source costs one compile per batch, not one per piece.
                    while let Ok(more) = pieces.try_recv() {
                        arrivals.take(&more, on_event);
                    }
                    arrivals.extend_straight(manifest);
                    look = true;
                }
                () = tokio::time::sleep_until(schedule.later.unwrap_or_else(tokio::time::Instant::now)), if schedule.later.is_some() => {
                    schedule.later = None;
                    look = true;
                }
                () = async { prefix_run.as_mut().expect("guarded").await }, if prefix_run.is_some() => {
                    prefix_run = None;
                }
            }
            if look
                && let Some(target) = schedule.due(arrivals.straight)
                && let Some(run) = self.start_prefix(&arrivals.arrived[..target], &mut schedule)
            {
                // NB: replaces (drops) the shorter prefix's run; its calls go on.
                prefix_run = Some(run);
            }
            self.report(round, on_event);
        };
        drop(prefix_run);
        // The last pieces may have come with the end of the reply.
        while let Ok(more) = pieces.try_recv() {
            arrivals.take(&more, on_event);
        }
        self.report(round, on_event);
        drop(closing);
        result
    }

    /// Compiles the prefix `arrived` (timed, for the schedule) and, when it holds more
    /// instructions than the prefix that runs, the run of it that starts their calls.
    /// Nothing is recorded: the run of the whole plan records.
    fn start_prefix(
        &self,
        arrived: &[Value],
        schedule: &mut Schedule,
    ) -> Option<BoxFuture<'h, ()>> {
        let began = tokio::time::Instant::now();
        let program = prefix_program(arrived, self.calls.host.manifest());
        schedule.cost = Some((tokio::time::Instant::now(), began.elapsed()));
        let Some((program, len)) = program else {
            schedule.blocked = Some(schedule.started);
            return None;
        };
        if len < arrived.len() {
            schedule.blocked = Some(len);
        }
        if len <= schedule.started {
            return None;
        }
        schedule.started = len;
        let (host, vars, limits) = (self.calls.host, self.vars.clone(), self.limits.clone());
        Some(Box::pin(async move {
            run_plan_recording(host, &program, vars, limits, &mut (), None).await;
        }))
    }

    /// Tells `on_event` of the calls started early since it last heard.
    fn report(&self, round: u64, on_event: &mut (dyn FnMut(&TraceEvent<'_>) + Send)) {
        for (tool, seq_no) in self.calls.take_log() {
            on_event(&TraceEvent::Planning {
                what: "call_started_early",
                round,
                index: None,
                seq_no,
                tool: Some(&tool),
            });
        }
    }

    /// The whole plan is `source`: its run may take the early results of the calls made
    /// by the instructions of its straight prefix (see the module docs).
    pub fn settle(&self, source: &str) {
        let manifest = self.calls.host.manifest();
        let seqs = match crate::examples::plan_value(source) {
            Some(Value::Array(plan)) => {
                let n = straight_prefix(&plan, manifest);
                plan[..n]
                    .iter()
                    .filter_map(|i| i.get("seq_no").and_then(Value::as_i64))
                    .collect()
            }
            _ => Default::default(),
        };
        self.calls.allow(seqs);
    }
}

/// Ends a plan's arrival: no call starts early any more, and none is taken until the
/// whole plan says which may be.
struct Closing<'c, 'h>(&'c EarlyCalls<'h>);

impl Drop for Closing<'_, '_> {
    fn drop(&mut self) {
        self.0.set_open(false);
        self.0.allow(Default::default());
    }
}

/// A longer prefix is compiled once this many times the last compile's duration has
/// passed since it ended, or once it is twice as long as the last one compiled.
const COMPILE_SPACING: u32 = 8;

type Answer = Shared<BoxFuture<'static, Result<(Value, Option<plan_llm::Usage>), ToolError>>>;
/// Tool, arguments (as JSON text) and place in the run.
type Key = (String, String, u64);

#[derive(Default)]
struct Calls {
    started: HashMap<Key, Answer>,
    /// The seq_nos whose calls a run may take early results for.
    allowed: std::collections::HashSet<i64>,
    tasks: Vec<tokio::task::AbortHandle>,
    /// (tool, seq_no) of each call started early, for the trace.
    log: Vec<(String, Option<i64>)>,
}

/// The layer over the host's backends (see the module docs).
pub(crate) struct EarlyCalls<'h> {
    host: &'h Host,
    calls: Arc<Mutex<Calls>>,
    /// New calls are started (and kept) only while a plan is arriving.
    open: Arc<AtomicBool>,
    /// The backends replaced, to put back.
    wrapped: Vec<(String, Arc<dyn Backend>)>,
}

impl<'h> EarlyCalls<'h> {
    /// Puts the layer over every `pure` and `read` tool the host can serve.
    pub(crate) fn install(host: &'h Host) -> EarlyCalls<'h> {
        let calls = Arc::new(Mutex::new(Calls::default()));
        let open = Arc::new(AtomicBool::new(false));
        let mut wrapped = Vec::new();
        for t in &host.manifest().tools {
            let Ok(inner) = host.backend_for(&t.name) else {
                continue;
            };
            let layer = Arc::new(Layer {
                inner: inner.clone(),
                calls: calls.clone(),
                open: open.clone(),
                write: t.effects == Effects::Write,
            });
            host.set_backend(&t.name, layer);
            wrapped.push((t.name.clone(), inner));
        }
        EarlyCalls {
            host,
            calls,
            open,
            wrapped,
        }
    }

    /// Whether calls may start (a plan is arriving) or only be taken (a run).
    pub(crate) fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::SeqCst);
    }

    /// Which instructions' calls a run may take early results for.
    pub(crate) fn allow(&self, seqs: std::collections::HashSet<i64>) {
        self.lock().allowed = seqs;
    }

    /// The calls started early since the last look, as (tool, seq_no).
    pub(crate) fn take_log(&self) -> Vec<(String, Option<i64>)> {
        std::mem::take(&mut self.lock().log)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for EarlyCalls<'_> {
    /// Puts the backends back and stops the early calls no run took.
    fn drop(&mut self) {
        for (tool, inner) in self.wrapped.drain(..) {
            self.host.set_backend(&tool, inner);
        }
        let mut calls = self.lock();
        for t in calls.tasks.drain(..) {
            t.abort();
        }
        // NB: a layer may outlive this (a condition served by `llm_generate`'s backend
        // keeps it): with nothing kept and nothing allowed, it only passes calls on.
        calls.started.clear();
        calls.allowed.clear();
    }
}

struct Layer {
    inner: Arc<dyn Backend>,
    calls: Arc<Mutex<Calls>>,
    open: Arc<AtomicBool>,
    /// A `write` tool: refused while a plan arrives, else passed on.
    write: bool,
}

impl Backend for Layer {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move { self.call_with_usage(req).await.map(|(v, _)| v) })
    }

    fn call_with_usage<'a>(
        &'a self,
        req: &'a ToolRequest,
    ) -> BoxFuture<'a, Result<(Value, Option<plan_llm::Usage>), ToolError>> {
        let open = self.open.load(Ordering::SeqCst);
        if self.write {
            if open {
                return Box::pin(async {
                    Err(ToolError::new(
                        ToolErrorKind::Config,
                        "a write tool is not called before the plan is verified",
                    ))
                });
            }
            return self.inner.call_with_usage(req);
        }
        let key: Key = (
            req.tool.to_string(),
            serde_json::to_string(&req.args).unwrap_or_default(),
            req.instance,
        );
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if !open {
            let allowed = req.seq_no.is_some_and(|s| calls.allowed.contains(&s));
            let early = calls.started.get(&key).filter(|_| allowed).cloned();
            drop(calls);
            return match early {
                // NB: a failed early call is made again, not repeated as a failure.
                Some(answer) => Box::pin(async move {
                    match answer.await {
                        Ok(v) => Ok(v),
                        Err(_) => self.inner.call_with_usage(req).await,
                    }
                }),
                None => self.inner.call_with_usage(req),
            };
        }
        if let Some(answer) = calls.started.get(&key) {
            return answer.clone().boxed();
        }
        // NB: a task of its own, so the call goes on when the prefix run that asked for
        // it is replaced by a longer one.
        let inner = self.inner.clone();
        let owned = req.clone();
        let traceparent = plan_llm::current_traceparent();
        let task = tokio::spawn(plan_llm::with_traceparent(traceparent, async move {
            inner.call_with_usage(&owned).await
        }));
        calls.tasks.push(task.abort_handle());
        let answer: Answer = async move {
            task.await.unwrap_or_else(|e| {
                Err(ToolError::new(
                    ToolErrorKind::Transport,
                    format!("the call started early was stopped: {e}"),
                ))
            })
        }
        .boxed()
        .shared();
        calls.started.insert(key, answer.clone());
        calls.log.push((req.tool.to_string(), req.seq_no));
        answer.boxed()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// How many of the arrived instructions, from the first, are certain to run as they
/// are whatever follows (see the module docs).
pub(crate) fn straight_prefix(arrived: &[Value], manifest: &Manifest) -> usize {
    arrived
        .iter()
        .position(|ins| !is_straight(ins, manifest))
        .unwrap_or(arrived.len())
}

fn is_straight(ins: &Value, manifest: &Manifest) -> bool {
    let ty = ins.get("type").and_then(Value::as_str).unwrap_or("");
    let named = ins.pointer("/parameters/tool_name");
    let tool = match (ty, named) {
        ("reasoning" | "assign", _) => return true,
        ("calling", Some(Value::String(t))) => t.as_str(),
        // An older-dialect tool instruction is named after its tool. NB: any other type
        // with a `tool_name` is a call of that tool for the reader: not guessed at here.
        (other, None) if other != "calling" => other,
        _ => return false,
    };
    // NB: a question to a person waits for everything before it, as a write does.
    manifest
        .get(tool)
        .is_some_and(|t| matches!(t.effects, Effects::Pure | Effects::Read))
}

/// The prefix as a program that ends after it, cut further before the first instruction
/// the compiler rejects; `None` when nothing is left.
pub(crate) fn prefix_program(
    prefix: &[Value],
    manifest: &Manifest,
) -> Option<(ValidatedProgram, usize)> {
    let mut len = prefix.len();
    // NB: not stripped: requests carry their seq_no.
    let opts = CompileOptions {
        manifest: manifest.clone(),
        ..CompileOptions::default()
    };
    // NB: each round cuts at least one instruction, so this ends.
    while len > 0 {
        let part = &prefix[..len];
        let last = part
            .iter()
            .filter_map(|i| i.get("seq_no").and_then(Value::as_i64))
            .max()?;
        let mut plan = part.to_vec();
        plan.push(json!({"seq_no": last.checked_add(1)?, "type": "assign",
            "parameters": {"final_answer": null}}));
        let mut compiled = plan_compiler::compile(&Value::Array(plan).to_string(), &opts);
        let first_bad = compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.seq_no)
            .min();
        match first_bad {
            None => {
                let program = compiled.validate()?;
                // A second guard: nothing in a prefix may write, ask or branch.
                let writes = program.tools.iter().any(|t| {
                    !matches!(
                        t.effects,
                        plan_bytecode::Effects::Pure | plan_bytecode::Effects::Read
                    )
                });
                if writes || !program.conds.is_empty() {
                    return None;
                }
                return Some((program, len));
            }
            // An error without a place: give up rather than guess.
            Some(None) => return None,
            Some(Some(seq)) => {
                len = part
                    .iter()
                    .position(|i| i.get("seq_no").and_then(Value::as_i64) == Some(seq))?;
            }
        }
    }
    None
}

/// Reads `reader` to its end, sending each piece of text as it arrives (see
/// [`Streamer::follow_reader`]).
async fn read_pieces(
    mut reader: impl tokio::io::AsyncRead + Unpin,
    from: &str,
    pieces: tokio::sync::mpsc::UnboundedSender<String>,
) -> Result<Vec<u8>, String> {
    use tokio::io::AsyncReadExt;
    let limit = plan_syntax::limits::MAX_SOURCE_BYTES;
    let mut all: Vec<u8> = Vec::new();
    let mut sent = 0;
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = (reader.read(&mut buf).await)
            .map_err(|e| format!("cannot read the plan from {from}: {e}"))?;
        if n == 0 {
            break;
        }
        if all.len() + n > limit {
            return Err(format!("the plan on {from} is larger than {limit} bytes"));
        }
        all.extend_from_slice(&buf[..n]);
        let upto = match std::str::from_utf8(&all[sent..]) {
            Ok(_) => all.len(),
            Err(e) if e.error_len().is_none() => sent + e.valid_up_to(),
            // Not text (a .pbc, say): nothing to follow; the whole is still loaded.
            Err(_) => sent,
        };
        if upto > sent {
            let _ = pieces.send(String::from_utf8_lossy(&all[sent..upto]).into_owned());
            sent = upto;
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that gives `chunks` one read at a time.
    struct Chunks(std::collections::VecDeque<Vec<u8>>);

    impl tokio::io::AsyncRead for Chunks {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            if let Some(chunk) = self.0.pop_front() {
                buf.put_slice(&chunk);
            }
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// A character cut between two reads is sent whole, once the rest arrives; bytes
    /// that are not text are read, not sent.
    #[tokio::test]
    async fn a_plan_read_as_it_arrives_is_sent_in_whole_characters() {
        let text = "[\"é\"]".as_bytes();
        let cut = vec![text[..3].to_vec(), text[3..].to_vec()];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let all = read_pieces(Chunks(cut.into()), "the test", tx)
            .await
            .unwrap();
        assert_eq!(all, text);
        let mut sent = Vec::new();
        while let Ok(piece) = rx.try_recv() {
            sent.push(piece);
        }
        assert_eq!(sent, ["[\"", "é\"]"]);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let pbc = vec![vec![0xff, 0xfe, b'P']];
        assert_eq!(
            read_pieces(Chunks(pbc.into()), "x", tx)
                .await
                .unwrap()
                .len(),
            3
        );
        assert!(rx.try_recv().is_err());
    }

    fn call(seq: i64, tool: &str, query: &str) -> Value {
        json!({"seq_no": seq, "type": "calling", "parameters": {"tool_name": tool,
            "tool_params": {"query": query}, "output_vars": [format!("v{seq}")]}})
    }

    #[test]
    fn the_prefix_stops_at_what_could_change_the_path_or_the_world() {
        let mut m = Manifest::builtin();
        m.tools.push(plan_manifest::ToolSpec {
            retrieval: false,
            name: "post".into(),
            description: String::new(),
            params: vec![],
            effects: Effects::Write,
            backend: None,
        });
        let jmp = json!({"seq_no": 2, "type": "jmp", "parameters": {"target_seq": 3}});
        let reasoning = json!({"seq_no": 0, "type": "reasoning", "parameters": {}});
        let plan = [
            reasoning.clone(),
            call(1, "vector_search", "a"),
            jmp,
            call(3, "vector_search", "b"),
        ];
        assert_eq!(straight_prefix(&plan, &m), 2);
        let plan = [reasoning.clone(), call(1, "post", "a")];
        assert_eq!(straight_prefix(&plan, &m), 1);
        let plan = [reasoning.clone(), call(1, "ask_user", "a")];
        assert_eq!(straight_prefix(&plan, &m), 1);
        let plan = [reasoning.clone(), call(1, "unknown_tool", "a")];
        assert_eq!(straight_prefix(&plan, &m), 1);
        // An unknown type with a `tool_name` calls that tool: not taken for a read.
        let disguised = json!({"seq_no": 1, "type": "vector_search", "parameters": {
            "tool_name": "post", "tool_params": {}, "output_vars": ["x"]}});
        assert_eq!(straight_prefix(&[reasoning.clone(), disguised], &m), 1);
        let older = json!({"seq_no": 1, "type": "vector_search", "parameters": {
            "query": "q", "output_var": "x"}});
        assert_eq!(straight_prefix(&[reasoning, older], &m), 2);
    }

    #[test]
    fn a_prefix_is_cut_before_an_instruction_the_compiler_rejects() {
        let m = Manifest::builtin();
        let plan = [
            call(0, "vector_search", "a"),
            // A variable nothing has set yet stays as its text, as it would in the
            // sequential run at this point.
            call(1, "vector_search", "${v0} ${later}"),
            // The required `query` is missing: an error.
            json!({"seq_no": 2, "type": "calling", "parameters": {"tool_name": "vector_search",
                "tool_params": {}, "output_vars": ["v2"]}}),
            call(3, "vector_search", "d"),
        ];
        let (program, len) = prefix_program(&plan, &m).unwrap();
        assert_eq!(len, 2);
        assert_eq!(program.tools.len(), 1);
        assert!(prefix_program(&plan[2..3], &m).is_none());
    }
}
