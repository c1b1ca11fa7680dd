//! `GET /v1/runs/{id}/events`: a run as a stream of server-sent events, from what its
//! journal holds: every event journaled so far, then the new ones as the run commits
//! them, until it ends. The events follow the journal's entries in order, whether the
//! run is live or long finished, so each has an id of its own that grows along the
//! stream: `E.N`, the N-th event of the run's journal entry E - 1 (`0.0`, the plan, comes
//! before any), `K:E.N` for run number K of a goal, and `end` for the last one. A client
//! that reconnects with `Last-Event-ID` gets exactly what came after that event, nothing
//! lost and nothing twice. A client that goes away changes nothing for the run.

use std::collections::HashSet;
use std::convert::Infallible;
use std::fmt::Display;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;
use plan_runs::read;
use plan_store::{CallRow, EntryChange, GoalStatus, JournalFold, RunInfo, RunStatus, RunStore};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::State as Shared;
use crate::error::ApiError;

/// How often a run still going is read again when nothing wakes the stream sooner (a run
/// of another process; see `live`).
const POLL: Duration = Duration::from_millis(100);

/// How long a stream stays silent before it sends a comment, so that proxies and clients
/// that time idle connections out keep it (a call can take minutes).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Where an event stands in its run's stream: its journal entry's number + 1 (0: the
/// plan's, before any entry), and its place among that entry's events.
type Pos = (i64, u32);

/// Where a stream stands in one run's events.
#[derive(Default)]
struct RunCursor {
    /// The plan's event was sent (or is before where the client reconnected).
    plan_sent: bool,
    /// The last step sent.
    after: u64,
    /// The calls whose start was sent, by step.
    started: HashSet<u64>,
    /// Where the next event goes: after the last entry read, its next place.
    next: Pos,
    /// The last step sent when the run's question was sent: a run asks once per stop
    /// (entries that commit no step, such as an answer refused, do not make it ask again).
    asked: Option<u64>,
    /// Events up to here were received before (`Last-Event-ID`): made, not sent.
    skip: Option<Pos>,
    /// The run's end was sent (a goal's stream looks at its ended run again while the
    /// goal is planning the next).
    ended: bool,
    /// That run's journal as far as it was read: each look reads only the entries since.
    fold: JournalFold,
    /// A run's row (not a goal's run's) as the last look left it.
    row: Option<RunRead>,
}

/// Where a stream stands.
struct Cursor {
    state: Arc<Shared>,
    id: String,
    /// For a goal's stream: the number of the run being sent (1: `ID`, 2: `ID.2`, ...).
    goal_run: Option<usize>,
    run: RunCursor,
    done: bool,
}

#[utoipa::path(get, path = "/v1/runs/{id}/events", params(("id" = String, Path),
    ("Last-Event-ID" = Option<String>, Header, description = "the last event received")),
    responses((status = 200, description = "server-sent events: plan, tool_call, step, needs_input (the run waits for an answer: POST /v1/runs/{id}/input), answer, failed; for a goal, each run's, then goal", content_type = "text/event-stream", body = Object),
    (status = 401, body = crate::schema::ErrorBody), (status = 404, body = crate::schema::ErrorBody)))]
pub(crate) async fn events(
    State(state): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    stream(state, id, last, None).await
}

/// Where a stream picks up after event `last` (a `Last-Event-ID`): for a goal's stream,
/// the run to send (1: its first); the entry after which a run's events go on; and
/// whether everything was sent. An id that names no event starts from the start.
fn resume_point(is_goal: bool, last: Option<&str>) -> (Option<usize>, Option<Pos>, bool) {
    match (is_goal, last) {
        (_, Some("end")) => (is_goal.then_some(1), None, true),
        (true, Some(last)) => match last
            .split_once(':')
            .and_then(|(k, pos)| Some((k.parse::<usize>().ok().filter(|k| *k >= 1)?, pos)))
        {
            // NB: run K's end was received: the stream goes on at run K + 1.
            Some((k, "end")) => (Some(k + 1), None, false),
            Some((k, pos)) => match parse_pos(pos) {
                Some(pos) => (Some(k), Some(pos), false),
                None => (Some(1), None, false),
            },
            None => (Some(1), None, false),
        },
        (true, None) => (Some(1), None, false),
        (false, last) => (None, last.and_then(parse_pos), false),
    }
}

/// A run just created by this service, as its stream starts from it: its id, its plan's
/// source, and its channel, watched from before the run started.
pub(crate) type Created = (String, String, watch::Receiver<u64>);

/// The events of run (or goal) `id` from after event `last`, as `GET
/// /v1/runs/{id}/events` sends them; from `created` when given, without a first read.
pub(crate) async fn stream(
    state: Arc<Shared>,
    id: String,
    last: Option<&str>,
    created: Option<Created>,
) -> Result<Response, ApiError> {
    // NB: an unknown run is a 404, not an empty stream.
    // NB: the first read, done here to answer 404 for an unknown run, is also the
    // stream's first; watched from before it (see below).
    let (mut watched, read_first) = match created {
        Some((id, source, rx)) => (
            Some(rx),
            Some(Box::new((RunView::running(id), Some(source)))),
        ),
        None => (state.live.watch(&id), None),
    };
    if let Some(rx) = &mut watched {
        rx.borrow_and_update();
    }
    let (first, fold) = match read_first {
        Some(run) => (Read::Run(run), JournalFold::default()),
        None => read(&state, (&id, None, false), false, JournalFold::default()).await?,
    };
    let (goal_run, skip, done) = resume_point(matches!(first, Read::Goal { .. }), last);
    // NB: it read a goal's first run: of no use to a stream that starts at a later one.
    let from_first = goal_run.unwrap_or(1) == 1;
    let cursor = Cursor {
        state,
        id,
        goal_run,
        run: RunCursor {
            plan_sent: skip.is_some(),
            skip,
            fold: if from_first {
                fold
            } else {
                JournalFold::default()
            },
            ..RunCursor::default()
        },
        done,
    };
    let first = from_first.then_some((first, watched));
    // NB: each look's events go out as one frame: a run that goes quickly is a few
    // writes, not one per event.
    let stream = futures::stream::unfold((cursor, first), |(mut c, mut first)| async move {
        if c.done {
            return None;
        }
        let silent = tokio::time::Instant::now();
        loop {
            let (read, changed) = match first.take() {
                Some((read, changed)) => (Ok(read), changed),
                None => c.look().await,
            };
            let read = match read {
                Ok(r) => r,
                Err(_) => {
                    c.done = true;
                    return Some((Frame::unreadable().done(), (c, None)));
                }
            };
            let mut frame = Frame::default();
            c.advance(read, &mut frame);
            if !frame.0.is_empty() || c.done {
                return Some((frame.done(), (c, None)));
            }
            if silent.elapsed() >= KEEP_ALIVE {
                return Some((Ok(Bytes::from_static(b":\n\n")), (c, None)));
            }
            let wait = async {
                match changed {
                    Some(mut rx) => {
                        let _ = tokio::time::timeout(POLL, rx.changed()).await;
                    }
                    None => tokio::time::sleep(POLL).await,
                }
            };
            // NB: a stopping service ends its streams; a client reconnects to the next
            // one with Last-Event-ID.
            tokio::select! {
                () = wait => {}
                () = c.state.stopped() => return None,
            }
        }
    });
    Ok(event_stream(Body::from_stream(stream)))
}

/// `body` answered as server-sent events, never cached.
fn event_stream(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Server-sent events written as text into one buffer, to go out as one frame.
#[derive(Default)]
struct Frame(Vec<u8>);

impl Frame {
    /// The end of a stream whose run can no longer be read.
    fn unreadable() -> Frame {
        let mut frame = Frame::default();
        frame.event(
            "end",
            "failed",
            &json!({"error": {"code": "unreadable", "message": "the run can no longer be read"}}),
        );
        frame
    }

    /// Appends one event. `data` goes as compact JSON, which has no line break: one
    /// `data:` line.
    fn event(&mut self, id: impl Display, kind: &str, data: &impl serde::Serialize) {
        let b = &mut self.0;
        // NB: writing into a Vec does not fail.
        let _ = write!(b, "id: {id}\nevent: {kind}\ndata: ");
        let at = b.len();
        if serde_json::to_writer(&mut *b, data).is_err() {
            b.truncate(at);
            b.extend_from_slice(b"null");
        }
        b.extend_from_slice(b"\n\n");
    }

    fn done(self) -> Result<Bytes, Infallible> {
        Ok(Bytes::from(self.0))
    }
}

/// An event's id (see the module's doc): `E.N`, or `K:E.N` in a goal's run K.
struct EventId(Option<usize>, Pos);

impl Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (entry, n) = self.1;
        match self.0 {
            Some(k) => write!(f, "{k}:{entry}.{n}"),
            None => write!(f, "{entry}.{n}"),
        }
    }
}

/// The end of a run's events: `end`, or `K:end` for a goal's run K (the goal's own
/// event ends its stream).
struct EndId(Option<usize>);

impl Display for EndId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(k) => write!(f, "{k}:end"),
            None => f.write_str("end"),
        }
    }
}

/// Where one run's events go: into `out`, those up to `skip` left out.
struct Emit<'a> {
    out: &'a mut Frame,
    skip: Option<Pos>,
    goal_run: Option<usize>,
}

impl Emit<'_> {
    fn event(&mut self, pos: Pos, kind: &str, data: &impl serde::Serialize) {
        if self.skip.is_some_and(|s| pos <= s) {
            return;
        }
        self.out.event(EventId(self.goal_run, pos), kind, data);
    }
}

/// `E.N` as a position (see the module's doc).
fn parse_pos(text: &str) -> Option<Pos> {
    let (entry, n) = text.split_once('.')?;
    Some((entry.parse().ok()?, n.parse().ok()?))
}

/// A run's row as one look found it, with its plan's source when that is still to be
/// sent; its journal is in the cursor's fold.
type RunRead = Box<(RunView, Option<String>)>;

/// What a stream shows of a run's row.
pub(crate) struct RunView {
    id: String,
    pub(crate) status: RunStatus,
    pub(crate) final_answer: Option<Value>,
    pub(crate) error: Option<Value>,
    pub(crate) question: Option<Value>,
}

impl RunView {
    /// A run that has just started.
    fn running(id: String) -> RunView {
        RunView {
            id,
            status: RunStatus::Running,
            final_answer: None,
            error: None,
            question: None,
        }
    }
}

impl From<RunInfo> for RunView {
    fn from(row: RunInfo) -> RunView {
        RunView {
            id: row.id,
            status: row.status,
            final_answer: row.final_answer,
            error: row.error,
            question: row.question,
        }
    }
}

/// What one look found.
enum Read {
    Run(RunRead),
    /// What the run's writer handed since the last look, folded into the cursor.
    Handed,
    Goal {
        /// How the goal ended (None: open).
        ended: Option<Value>,
        /// Its run the cursor is at, if it exists yet, and whether a later one does.
        run: Option<RunRead>,
        next: bool,
    },
}

impl Cursor {
    /// One look at the run: what its writer handed since the last look, or else a read
    /// of the store; with the channel whose change says there is more (watched from
    /// before the look, so that a commit after it wakes the wait).
    async fn look(&mut self) -> (Result<Read, ApiError>, Option<watch::Receiver<u64>>) {
        let mut changed = self.state.live.watch(&self.id);
        if let Some(rx) = &mut changed {
            rx.borrow_and_update();
        }
        // NB: a run on this service's writer: what it wrote since the last look is
        // handed to the stream, not read back from the store.
        let RunCursor { fold, row, .. } = &mut self.run;
        let handed = match (&changed, self.goal_run, row) {
            (Some(_), None, Some(row)) => self.state.live.handed(&self.id, fold, &mut row.0),
            _ => None,
        };
        if handed.is_some() {
            return (Ok(Read::Handed), changed);
        }
        // NB: a stream that is not a goal's is a run's: no goal is looked up.
        let run = self.goal_run.is_none();
        let fold = std::mem::take(&mut self.run.fold);
        let at = (self.id.as_str(), self.goal_run, self.run.plan_sent);
        let read = read(&self.state, at, run, fold).await;
        let read = read.map(|(read, fold)| {
            self.run.fold = fold;
            read
        });
        (read, changed)
    }

    /// Writes into `out` the events `read` holds beyond what was sent; moves on to a
    /// goal's next run once one ended.
    fn advance(&mut self, read: Read, out: &mut Frame) {
        match read {
            Read::Run(mut run) => {
                self.done = self.run.events(&run, None, out);
                run.1 = None;
                self.run.row = Some(run);
            }
            Read::Handed => {
                if let Some(run) = self.run.row.take() {
                    self.done = self.run.events(&run, None, out);
                    self.run.row = Some(run);
                }
            }
            Read::Goal { ended, run, next } => {
                let k = self.goal_run.unwrap_or(1);
                let run_done = match run {
                    Some(run) => self.run.events(&run, Some(k), out),
                    None => true,
                };
                if run_done && next {
                    self.goal_run = Some(k + 1);
                    self.run = RunCursor::default();
                } else if let Some(ended) = ended.filter(|_| run_done || !next) {
                    out.event("end", "goal", &ended);
                    self.done = true;
                }
            }
        }
    }
}

/// Run `id`, or for a goal its run number `goal_run` (and the goal's state), its journal
/// folded on into `fold` (which comes back with it).
/// NB: the plan's source only when the plan is still to be sent (not `plan_sent`).
/// `run`: `id` is known to be a run's, not a goal's.
async fn read(
    state: &Arc<Shared>,
    (id, goal_run, plan_sent): (&str, Option<usize>, bool),
    run: bool,
    mut fold: JournalFold,
) -> Result<(Read, JournalFold), ApiError> {
    let id = id.to_owned();
    state
        .read(move |store| {
            let read = read_on(store, (&id, run), goal_run, plan_sent, &mut fold)?;
            Ok((read, fold))
        })
        .await
}

fn read_on(
    store: &dyn RunStore,
    (id, run): (&str, bool),
    goal_run: Option<usize>,
    plan_sent: bool,
    fold: &mut JournalFold,
) -> Result<Read, plan_runs::Error> {
    // NB: the row with the journal (`run_journal`): a run's end is written with its last
    // entry, so a row read as ended comes with a journal that holds everything before it.
    let mut run_of = |id: &str| -> Result<RunRead, plan_runs::Error> {
        let row = store.run_journal(id, fold)?;
        let source = match plan_sent {
            false => read::source(store, &row),
            true => None,
        };
        Ok(Box::new((row.into(), source)))
    };
    let goal = match run {
        true => None,
        false => store.goal(id)?,
    };
    let read = match goal {
        None => Read::Run(run_of(id)?),
        Some(goal) => {
            let k = goal_run.unwrap_or(1).max(1);
            let runs = plan_runs::ask::goal_runs(store, id)?;
            let run = match runs.get(k - 1) {
                Some(r) => Some(run_of(&r.id)?),
                None => None,
            };
            // NB: a queued goal is still to be asked: its stream waits for it.
            let ended = match goal.status {
                GoalStatus::Open | GoalStatus::NeedsInput | GoalStatus::Queued => None,
                _ => {
                    Some(json!({"status": goal.status, "answer": goal.answer, "error": goal.error}))
                }
            };
            Read::Goal {
                ended,
                run,
                next: runs.len() > k,
            }
        }
    };
    store.unchanged()?;
    Ok(read)
}

/// A call's row as its `finished` event sends it.
#[derive(serde::Serialize)]
struct Finished<'a> {
    #[serde(flatten)]
    call: &'a CallRow,
    phase: &'static str,
}

/// A call's `started` event's data.
#[derive(serde::Serialize)]
struct Started<'a> {
    phase: &'static str,
    step: u64,
    seq_no: Option<i64>,
    tool: &'a str,
    args: &'a serde_json::Map<String, Value>,
    sent_at: Option<i64>,
}

fn started(c: &CallRow) -> Started<'_> {
    Started {
        phase: "started",
        step: c.step,
        seq_no: c.seq_no,
        tool: &c.tool,
        args: &c.args,
        sent_at: c.sent_at,
    }
}

impl RunCursor {
    /// Writes into `out` the events of `run` (its row as read, its plan's source, the
    /// entries its fold took in since the last look) beyond what was sent, the cursor
    /// moved past them; true when the run has ended (its last event is among them).
    fn events(
        &mut self,
        (run, source): &(RunView, Option<String>),
        goal_run: Option<usize>,
        out: &mut Frame,
    ) -> bool {
        let mut emit = Emit {
            out,
            skip: self.skip,
            goal_run,
        };
        if !self.plan_sent {
            self.plan_sent = true;
            emit.event((0, 0), "plan", &json!({"id": run.id, "plan": source}));
        }
        self.next = self.next.max((0, 1));
        for change in self.fold.take_entries() {
            let n = self.entry_events(&change, &mut emit);
            self.next = (change.seq + 1, n);
        }
        // NB: not an end: the run goes on once answered, and its events follow on this
        // stream; asked once per stop.
        if run.status == RunStatus::NeedsInput && self.asked != Some(self.after) {
            self.asked = Some(self.after);
            emit.event(self.next, "needs_input", &run.question);
            self.next.1 += 1;
        }
        let ended = match run.status {
            RunStatus::Ok => Some(("answer", json!({"final_answer": run.final_answer}))),
            RunStatus::Failed => Some(("failed", json!({"error": run.error}))),
            RunStatus::Running
            | RunStatus::Interrupted
            | RunStatus::NeedsInput
            | RunStatus::Queued => None,
        };
        let done = ended.is_some();
        if let Some((kind, data)) = ended.filter(|_| !std::mem::replace(&mut self.ended, true)) {
            // NB: for a goal's run, not the stream's end: the goal's own event is.
            emit.out.event(EndId(goal_run), kind, &data);
        }
        done
    }

    /// The events of one journal entry, given to `emit` with their positions; how many.
    fn entry_events(&mut self, change: &EntryChange, emit: &mut Emit<'_>) -> u32 {
        let (steps, calls) = (self.fold.steps(), self.fold.calls());
        let mut n = 0;
        let mut at = || {
            n += 1;
            (change.seq + 1, n - 1)
        };
        for &k in &change.steps {
            // NB: a resumed run commits again steps it had committed: sent once.
            let Some(s) = steps.get(&k).filter(|_| k > self.after) else {
                continue;
            };
            // NB: a call belongs to the step that made it: the one after the `step`
            // instructions executed before it. It finishes with that step; a call whose
            // start was not sent gets its start first.
            if let Some(c) = k.checked_sub(1).and_then(|c| calls.get(&c)) {
                if self.started.insert(c.step) {
                    emit.event(at(), "tool_call", &started(c));
                }
                let finished = Finished {
                    call: c,
                    phase: "finished",
                };
                emit.event(at(), "tool_call", &finished);
            }
            emit.event(at(), "step", s);
            self.after = k;
        }
        for k in &change.sent {
            if let Some(c) = calls.get(k)
                && self.started.insert(*k)
            {
                emit.event(at(), "tool_call", &started(c));
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_holds_its_events_as_server_sent_events_text() {
        let mut frame = Frame::default();
        frame.event(
            EventId(None, (3, 1)),
            "step",
            &json!({"text": "two\nlines"}),
        );
        frame.event(EventId(Some(2), (0, 0)), "plan", &json!({"id": "r"}));
        frame.event(EndId(Some(2)), "answer", &json!({"final_answer": 1}));
        frame.event(EndId(None), "goal", &json!(null));
        assert_eq!(
            String::from_utf8(frame.0).unwrap(),
            "id: 3.1\nevent: step\ndata: {\"text\":\"two\\nlines\"}\n\n\
             id: 2:0.0\nevent: plan\ndata: {\"id\":\"r\"}\n\n\
             id: 2:end\nevent: answer\ndata: {\"final_answer\":1}\n\n\
             id: end\nevent: goal\ndata: null\n\n"
        );
    }
}
