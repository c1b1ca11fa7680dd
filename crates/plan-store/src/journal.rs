//! The store as a journal of the driver: everything since the last commit point (calls
//! about to be sent, answers, steps, commits, the VM state) is written in one
//! transaction when the driver is about to wait, and when the run ends.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use plan_host::{Durable, Journal, ToolErrorKind, TraceEvent};
use plan_value::json::{write_object, write_str, write_value};
use plan_value::value_size;
use plan_vm::MAX_VALUE_DEPTH;
use plan_vm::{CallId, Event, ToolRequest};

use serde_json::Value;

use plan_bytecode::{Effects, ValidatedProgram};

use crate::{CommitPoint, GroupRun, GroupStore, Owner, RunEnd, RunStore};

/// The largest value a step row keeps (bytes as the VM counts them). Larger values are
/// listed with their size only: copying them at every step of a loop that rewrites them
/// would cost time quadratic in the loop. The checkpoint always has every value.
pub const MAX_KEPT_VALUE_BYTES: u64 = 64 * 1024;

/// Bytes of values the step records of one process's part of a run keep in all (a
/// resumed run starts again from zero); past it, only sizes.
pub const MAX_KEPT_RUN_BYTES: u64 = 16 << 20;

/// A commit point saves the VM state when this much time has passed since the last
/// saved state...
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// ...or this many instructions were committed since. In between, only the calls and
/// steps are written: a resumed run starts from the last saved state (or from the start)
/// and runs again up to where it stopped, answering from the stored calls, which costs
/// microseconds per step, while writing the state at every commit point cost a
/// transaction's worth of pages each time.
pub const CHECKPOINT_STEPS: u64 = 4096;

/// Where a journal's commit points go.
enum Target<'s> {
    /// Committed at once, in the driver's task (one run in a process).
    Direct(&'s mut dyn RunStore),
    /// Handed to a writer thread that commits many runs' points together (a batch);
    /// the driver waits for them through [`Journal::durable`].
    Group(GroupRun),
}

/// Journals one run into a store.
pub struct StoreJournal<'s> {
    target: Target<'s>,
    run: String,
    /// This process: every point is written only while it holds the run.
    owner: Owner,
    /// Instructions committed so far (a resumed run starts from its checkpoint's count).
    steps_done: u64,
    /// The calls and steps the next commit point writes, encoded as they come.
    point: PointJson,
    /// The last point's encoded entry (its buffer, reused).
    encoded: Vec<u8>,
    /// Calls answered from saved results: their rows are not touched.
    reused: HashSet<CallId>,
    /// When and at which step count the state was last saved.
    last_checkpoint: (Instant, u64),
    /// Bytes of values kept in step records so far.
    kept_bytes: u64,
    /// Tools with `write` effects (a grouped journal waits before one is sent).
    write_tools: HashSet<String>,
    /// A write call was issued since the last wait.
    must_wait: bool,
    /// Tools a person answers: the state is saved with their question, so that the run
    /// answered days later goes on from there rather than from an older state.
    human_tools: HashSet<String>,
    /// A call of one was issued since the last point.
    save_state: bool,
    /// Calls committed so far, for a journal that has every point of its run (see
    /// [`StoreJournal::continued`]).
    committed_calls: Option<u64>,
    /// The tokens its answers cost so far, as the store would sum them from its rows.
    usage: Option<plan_llm::Usage>,
}

impl<'s> StoreJournal<'s> {
    /// `steps_done`: 0 for a new run, the checkpoint's count for a resumed one. `program`
    /// is the run's program (its `write` tools are treated with care).
    pub fn new(
        store: &'s mut dyn RunStore,
        run: &str,
        owner: Owner,
        steps_done: u64,
        program: &ValidatedProgram,
    ) -> Self {
        Self::to(Target::Direct(store), run, owner, steps_done, program)
    }

    /// A journal whose commit points go through a group-committing writer. The driver
    /// waits for them ([`Journal::durable`]) only before it sends a call of one of
    /// `program`'s `write` tools, so that a write in flight is always on record; other
    /// points are written while the run goes on, at most a transaction later. The caller
    /// waits for everything at the end ([`StoreJournal::written`]). `on_written` hears,
    /// from the writer thread, each time points of the run are in the store.
    pub fn grouped(
        store: GroupStore,
        (run, owner): (&str, Owner),
        steps_done: u64,
        program: &ValidatedProgram,
        on_written: Option<crate::OnWritten>,
    ) -> StoreJournal<'static> {
        let points = store.run(run, owner.clone());
        if let Some(tell) = on_written {
            points.on_written(tell);
        }
        StoreJournal::to(Target::Group(points), run, owner, steps_done, program)
    }

    /// A wait until every point given so far is written (None: nothing pending).
    pub fn written(&mut self) -> Option<Durable> {
        let Target::Group(points) = &self.target else {
            return None;
        };
        let wait = points.written()?;
        Some(Box::pin(async move { wait.await.map_err(|e| e.message) }))
    }

    fn to(
        target: Target<'s>,
        run: &str,
        owner: Owner,
        steps_done: u64,
        program: &ValidatedProgram,
    ) -> Self {
        StoreJournal {
            target,
            run: run.to_owned(),
            owner,
            steps_done,
            point: PointJson::default(),
            encoded: Vec::new(),
            reused: HashSet::new(),
            last_checkpoint: (Instant::now(), steps_done),
            write_tools: program
                .tools
                .iter()
                .filter(|t| t.effects == Effects::Write)
                .map(|t| t.name.clone())
                .collect(),
            must_wait: false,
            human_tools: program
                .tools
                .iter()
                .filter(|t| t.effects == Effects::Human)
                .map(|t| t.name.clone())
                .collect(),
            save_state: false,
            kept_bytes: 0,
            committed_calls: Some(0),
            usage: None,
        }
    }

    /// For a run that has journal rows already (a resumed run): the calls it commits may
    /// include some an earlier process committed, so the store counts the run's calls
    /// from its journal when it ends instead of taking this journal's count.
    pub fn continued(mut self) -> Self {
        self.committed_calls = None;
        self
    }

    fn flush(&mut self, state: Option<(u64, String)>, end: Option<RunEnd>) -> Result<(), String> {
        // NB: the point's buffers are kept from one point to the next: growing them anew
        // for each point was a fifth of a batch run's time.
        let mut point = CommitPoint {
            encoded: std::mem::take(&mut self.encoded),
            state,
            end,
            total_steps: self.steps_done,
            ..CommitPoint::default()
        };
        point.encoded.clear();
        self.point.finish_into(&mut point.encoded);
        let done = match &mut self.target {
            Target::Direct(store) => store.commit(&self.run, &self.owner, &point),
            Target::Group(points) => points.give(&mut point),
        };
        self.encoded = point.encoded;
        done.map_err(|e| e.message)
    }
}

/// A commit point's calls and steps, encoded as the journal entry holds them (the format
/// is in migrations/001_init.sql) while they are recorded. NB: building rows (a copy of
/// each call's arguments and answer, of each step's values and names) only to encode
/// them once was most of what a run spent on its journal.
#[derive(Default)]
struct PointJson {
    /// The items of each list, comma-separated, without brackets.
    sent: Vec<u8>,
    answered: Vec<u8>,
    steps: Vec<u8>,
    committed: Vec<u8>,
    discarded: Vec<u8>,
    /// The last step is open: its `writes` object is being written (the variables it
    /// sets come after it).
    step_open: bool,
    /// The open step's `writes` has an entry; its `omitted` entries so far.
    wrote: bool,
    omitted: Vec<u8>,
}

/// Starts an item of a comma-separated list.
fn item(list: &mut Vec<u8>) {
    if !list.is_empty() {
        list.push(b',');
    }
}

fn number(out: &mut Vec<u8>, n: impl serde::Serialize) {
    // NB: serde_json writes integers with itoa; into a vector it cannot fail.
    let _ = serde_json::to_writer(out, &n);
}

/// Starts an item of `list` that begins with a step and a seq_no: `{"step":N,"seq_no":S`.
fn step_item(list: &mut Vec<u8>, step: u64, seq_no: Option<i64>) -> &mut Vec<u8> {
    item(list);
    list.extend_from_slice(b"{\"step\":");
    number(list, step);
    list.extend_from_slice(b",\"seq_no\":");
    match seq_no {
        Some(n) => number(list, n),
        None => list.extend_from_slice(b"null"),
    }
    list
}

impl PointJson {
    fn step(&mut self, step: u64, seq: Option<i64>, pc: u32, op: &str) {
        self.close_step();
        let out = step_item(&mut self.steps, step, seq);
        out.extend_from_slice(b",\"pc\":");
        number(out, pc);
        out.extend_from_slice(b",\"op\":");
        write_str(out, op);
        out.extend_from_slice(b",\"writes\":{");
        self.step_open = true;
    }

    /// A variable the open step set, with its value (or only its size: `omitted`).
    fn var(&mut self, name: &str, value: Result<&Value, u64>) {
        if !self.step_open {
            return;
        }
        let out = match value {
            Ok(_) => {
                if std::mem::replace(&mut self.wrote, true) {
                    self.steps.push(b',');
                }
                &mut self.steps
            }
            Err(_) => {
                item(&mut self.omitted);
                &mut self.omitted
            }
        };
        write_str(out, name);
        out.push(b':');
        match value {
            Ok(v) => write_value(out, v),
            Err(bytes) => number(out, bytes),
        }
    }

    fn close_step(&mut self) {
        if !std::mem::take(&mut self.step_open) {
            return;
        }
        self.wrote = false;
        self.steps.push(b'}');
        if !self.omitted.is_empty() {
            self.steps.extend_from_slice(b",\"omitted\":{");
            self.steps.append(&mut self.omitted);
            self.steps.push(b'}');
        }
        self.steps.push(b'}');
    }

    fn sent(&mut self, req: &ToolRequest) {
        self.call(req.instance, req.seq_no, &req.tool, req.args.iter());
    }

    fn call<'a>(
        &mut self,
        step: u64,
        seq: Option<i64>,
        tool: &str,
        args: impl IntoIterator<Item = (&'a str, &'a Value)>,
    ) {
        let out = step_item(&mut self.sent, step, seq);
        out.extend_from_slice(b",\"tool\":");
        write_str(out, tool);
        out.extend_from_slice(b",\"args\":");
        write_object(out, args);
        out.push(b'}');
    }

    /// An answer: its output or its error, its latency, its tokens and its attempts.
    fn answered(
        &mut self,
        step: u64,
        answer: Result<&Value, &str>,
        ms: u64,
        (usage, attempts): (Option<plan_llm::Usage>, Option<u32>),
    ) {
        item(&mut self.answered);
        let out = &mut self.answered;
        out.extend_from_slice(b"{\"step\":");
        number(out, step);
        match answer {
            Ok(v) => {
                out.extend_from_slice(b",\"output\":");
                write_value(out, v);
            }
            Err(e) => {
                out.extend_from_slice(b",\"error\":");
                write_str(out, e);
            }
        }
        out.extend_from_slice(b",\"latency_ms\":");
        number(out, ms);
        if let Some(n) = attempts {
            out.extend_from_slice(b",\"attempts\":");
            number(out, u64::from(n));
        }
        if let Some(u) = usage {
            out.extend_from_slice(b",\"usage\":{\"input_tokens\":");
            number(out, u.input_tokens);
            out.extend_from_slice(b",\"output_tokens\":");
            number(out, u.output_tokens);
            if let Some(c) = u.cost.filter(|c| c.is_finite()) {
                out.extend_from_slice(b",\"cost\":");
                // NB: a finite number is always JSON.
                let _ = serde_json::to_writer(&mut *out, &c);
            }
            out.push(b'}');
        }
        out.push(b'}');
    }

    /// Appends the point to `out` as one JSON object of a journal entry (nothing when it
    /// holds nothing), and empties it for the next point, keeping its buffers.
    fn finish_into(&mut self, out: &mut Vec<u8>) {
        self.close_step();
        let start = out.len();
        for (key, list) in [
            (&b"sent"[..], &mut self.sent),
            (b"answered", &mut self.answered),
            (b"steps", &mut self.steps),
            (b"committed", &mut self.committed),
            (b"discarded", &mut self.discarded),
        ] {
            if list.is_empty() {
                continue;
            }
            out.push(if out.len() == start { b'{' } else { b',' });
            out.push(b'"');
            out.extend_from_slice(key);
            out.extend_from_slice(b"\":[");
            out.extend_from_slice(list);
            out.push(b']');
            list.clear();
        }
        if out.len() > start {
            out.push(b'}');
        }
    }
}

impl Journal for StoreJournal<'_> {
    fn wants_values(&self) -> u64 {
        MAX_KEPT_VALUE_BYTES
    }

    fn wants_states(&self) -> bool {
        true
    }

    fn durable(&mut self) -> Option<Durable> {
        if !std::mem::take(&mut self.must_wait) {
            return None;
        }
        self.written()
    }

    fn record(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        self.encode(event)
    }
}

impl StoreJournal<'_> {
    /// A call's answer, kept at the next commit point unless it is one the run reused.
    fn answered(
        &mut self,
        request: &ToolRequest,
        result: Result<&Value, &plan_host::ToolError>,
        took: Duration,
        (usage, retries): (Option<plan_llm::Usage>, usize),
    ) {
        if self.reused.contains(&request.id) {
            return;
        }
        let depth_error;
        let answer = match result {
            // NB: a write that failed in any way but a refusal (timed out, lost
            // its connection, a 5xx, an answer of the wrong shape) may have taken
            // effect: no answer is recorded, so it stays unknown (even once the
            // run has consumed the failure) and `resume` does not send it again
            // unasked. Never sent at all (no cassette entry, no backend): failed.
            Err(e)
                if self.write_tools.contains(request.tool.as_str())
                    && !matches!(
                        e.kind,
                        ToolErrorKind::Refused | ToolErrorKind::Replay | ToolErrorKind::Config
                    ) =>
            {
                return;
            }
            Err(e) => Err(e.message.as_str()),
            // NB: deeper than the VM accepts (it fails the run on it): recorded as
            // that failure, since the journal could not be read back past
            // serde_json's nesting limit.
            Ok(v) if value_size(v).depth > MAX_VALUE_DEPTH => {
                if self.write_tools.contains(request.tool.as_str()) {
                    // It took effect, but its answer cannot be kept: unknown.
                    return;
                }
                depth_error =
                    format!("the output is nested more than {MAX_VALUE_DEPTH} levels deep");
                Err(depth_error.as_str())
            }
            Ok(v) => Ok(v),
        };
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        let attempts = (retries > 0).then(|| u32::try_from(retries + 1).unwrap_or(u32::MAX));
        if let Some(u) = usage {
            *self.usage.get_or_insert_default() += u;
        }
        self.point
            .answered(request.instance, answer, ms, (usage, attempts));
    }

    /// Adds `event` to the next commit point (writing the point when the driver is about
    /// to wait, or at the end).
    fn encode(&mut self, event: &TraceEvent<'_>) -> Result<(), String> {
        match event {
            TraceEvent::Vm(Event::Step { pc, seq_no, op }) => {
                self.steps_done += 1;
                self.point.step(self.steps_done, *seq_no, *pc, op);
            }
            TraceEvent::Vm(Event::VarSet {
                name, value, bytes, ..
            }) => {
                // NB: a loop rewriting a large value would keep a copy per step: past the
                // run's budget, only sizes are kept. Another journal of the same run may
                // have asked the VM for larger values than this one keeps.
                match value {
                    Some(v)
                        if self.point.step_open
                            && self.kept_bytes < MAX_KEPT_RUN_BYTES
                            && *bytes <= MAX_KEPT_VALUE_BYTES =>
                    {
                        self.kept_bytes += *bytes;
                        self.point.var(name, Ok(v));
                    }
                    _ => {
                        self.point.var(name, Err(*bytes));
                    }
                }
            }
            TraceEvent::Vm(Event::Jump { .. }) => {}
            TraceEvent::CallIssued {
                request,
                reused: true,
                ..
            } => {
                self.reused.insert(request.id);
            }
            TraceEvent::CallIssued { request, .. } => {
                self.must_wait |= self.write_tools.contains(request.tool.as_str());
                self.save_state |= self.human_tools.contains(request.tool.as_str());
                self.point.sent(request);
            }
            TraceEvent::CallAnswered {
                request,
                result,
                took,
                usage,
                retries,
                ..
            } => self.answered(request, *result, *took, (*usage, retries.len())),
            TraceEvent::CallCommitted { request } => {
                if let Some(n) = &mut self.committed_calls {
                    *n += 1;
                }
                item(&mut self.point.committed);
                number(&mut self.point.committed, request.instance);
            }
            TraceEvent::CallDiscarded { request, .. } => {
                item(&mut self.point.discarded);
                number(&mut self.point.discarded, request.instance);
            }
            TraceEvent::Suspended { state } => {
                let (at, steps) = self.last_checkpoint;
                if std::mem::take(&mut self.save_state)
                    || at.elapsed() >= CHECKPOINT_INTERVAL
                    || state.steps().saturating_sub(steps) >= CHECKPOINT_STEPS
                {
                    let json = serde_json::to_string(state).map_err(|e| e.to_string())?;
                    self.flush(Some((state.steps(), json)), None)?;
                    self.last_checkpoint = (Instant::now(), state.steps());
                } else {
                    self.flush(None, None)?;
                }
            }
            TraceEvent::Warning { .. } | TraceEvent::Planning { .. } => {}
            TraceEvent::Finished { report } if report.status == plan_host::RunStatus::Stopped => {
                // NB: not an end: the run stays this process's until it lets it go, and
                // reads as interrupted then.
                self.flush(None, None)?;
            }
            TraceEvent::Finished { report } => {
                let error = report
                    .error
                    .as_ref()
                    .map(|e| serde_json::to_value(e).unwrap_or(Value::Null));
                let end = RunEnd {
                    ok: report.is_ok(),
                    question: report
                        .question
                        .as_ref()
                        .filter(|_| report.status == plan_host::RunStatus::NeedsInput)
                        .map(|q| Box::new(serde_json::to_value(q).unwrap_or(Value::Null))),
                    final_answer: report.final_answer.clone(),
                    error,
                    tool_calls: self.committed_calls,
                    usage: self.committed_calls.and(self.usage),
                };
                self.flush(None, Some(end))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallRow, CallState, StepRow};
    use serde_json::{Map, json};

    /// The entry encoded as events come is exactly the one the rows would give (the
    /// format readers and the SQL views of migrations/001_init.sql expect).
    #[test]
    fn a_point_encoded_as_it_comes_is_the_rows_entry() {
        let args = json!({"query": "q \"1\"\u{1}", "top_k": 3});
        let mut p = PointJson::default();
        let pairs = args.as_object().unwrap().iter();
        p.call(4, Some(2), "search", pairs.map(|(k, v)| (k.as_str(), v)));
        p.call(5, None, "llm_generate", []);
        p.step(1, Some(0), 0, "nop");
        p.step(2, Some(1), 1, "assign");
        p.var("a", Ok(&json!([1, {"b": null}])));
        p.var("big", Err(70_000));
        p.var("c", Ok(&json!("ü\n")));
        let tokens = plan_llm::Usage {
            input_tokens: 30,
            output_tokens: 4,
            cost: Some(0.5),
        };
        p.answered(4, Ok(&json!({"hits": [1.5]})), 12, (Some(tokens), Some(3)));
        p.answered(5, Err("down"), 0, (None, None));
        p.step(3, None, 7, "call search");
        p.var("only_size", Err(9));
        for n in [4, 5] {
            item(&mut p.committed);
            number(&mut p.committed, n);
        }
        item(&mut p.discarded);
        number(&mut p.discarded, 9);
        let mut encoded = Vec::new();
        p.finish_into(&mut encoded);

        let call = |step, seq_no, tool: &str, args: &Value| CallRow {
            step,
            seq_no,
            tool: tool.into(),
            args: args.as_object().unwrap().clone(),
            state: CallState::Inflight,
            output: None,
            error: None,
            latency_ms: None,
            usage: None,
            attempts: None,
            sent_at: None,
        };
        let mut ok = call(4, None, "", &json!({}));
        ok.output = Some(json!({"hits": [1.5]}));
        ok.latency_ms = Some(12);
        ok.usage = Some(tokens);
        ok.attempts = Some(3);
        let mut failed = call(5, None, "", &json!({}));
        failed.error = Some("down".into());
        failed.latency_ms = Some(0);
        let obj = |v: Value| -> Map<String, Value> { v.as_object().unwrap().clone() };
        let step = |step, seq_no, pc, op: &str, writes, omitted| StepRow {
            step,
            seq_no,
            pc,
            op: op.into(),
            writes,
            omitted,
        };
        let rows = CommitPoint {
            sent: vec![
                call(4, Some(2), "search", &args),
                call(5, None, "llm_generate", &json!({})),
            ],
            answered: vec![ok, failed],
            steps: vec![
                step(1, Some(0), 0, "nop", Map::new(), Map::new()),
                step(
                    2,
                    Some(1),
                    1,
                    "assign",
                    obj(json!({"a": [1, {"b": null}], "c": "ü\n"})),
                    obj(json!({"big": 70_000})),
                ),
                step(
                    3,
                    None,
                    7,
                    "call search",
                    Map::new(),
                    obj(json!({"only_size": 9})),
                ),
            ],
            committed: vec![4, 5],
            discarded: vec![9],
            ..CommitPoint::default()
        };
        let mut expected = Vec::new();
        assert!(rows.write_entry(&mut expected));
        assert_eq!(
            String::from_utf8(encoded).unwrap(),
            String::from_utf8(expected).unwrap()
        );
        let mut again = Vec::new();
        p.finish_into(&mut again);
        assert!(again.is_empty(), "a point is empty once written");
    }
}
