//! `GET /v1/runs/{id}/events`: a run as a stream of server-sent events, from what its
//! journal holds: every event journaled so far, then the new ones as the run commits
//! them, until it ends. Each event's `id` is the number of the step it belongs to (0 for
//! the plan), so a client that reconnects with `Last-Event-ID: N` gets what came after
//! step N and nothing twice. A client that goes away changes nothing for the run.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use plan_runs::read;
use plan_store::{CallRow, CallState, GoalStatus, JournalFold, RunInfo, RunStatus, RunStore};
use serde_json::{Value, json};

use crate::State as Shared;
use crate::api::ApiError;

/// How often a run still going is read again when nothing wakes the stream sooner (a run
/// of another process; see `live`).
const POLL: Duration = Duration::from_millis(100);

/// Where a stream stands.
struct Cursor {
    state: Arc<Shared>,
    id: String,
    /// For a goal's stream: the number of the run being sent (1: `ID`, 2: `ID.2`, ...).
    goal_run: Option<usize>,
    /// The last step of that run sent (0: its plan; None: nothing of it yet).
    after: Option<u64>,
    /// The calls of that run whose start was sent, by step.
    started: HashSet<u64>,
    /// The run's step count when its question was sent (a run that waits for a person
    /// asks once per stream, and again only after it went on).
    asked: Option<u64>,
    /// That run's journal as far as it was read: each look reads only the entries since.
    fold: JournalFold,
    done: bool,
}

#[utoipa::path(get, path = "/v1/runs/{id}/events", params(("id" = String, Path),
    ("Last-Event-ID" = Option<String>, Header, description = "the last event received")),
    responses((status = 200, description = "server-sent events: plan, tool_call, step, needs_input (the run waits for an answer: POST /v1/runs/{id}/input), answer, failed; for a goal, each run's, then goal", content_type = "text/event-stream", body = Object),
    (status = 401, body = crate::openapi::ErrorBody), (status = 404, body = crate::openapi::ErrorBody)))]
pub(crate) async fn events(
    State(state): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    // NB: an unknown run is a 404, not an empty stream.
    // NB: the first read, done here to answer 404 for an unknown run, is also the
    // stream's first; watched from before it (see below).
    let mut watched = state.live.watch(&id);
    if let Some(rx) = &mut watched {
        rx.borrow_and_update();
    }
    let (first, fold) = read(&state, (&id, None, None), false, JournalFold::default()).await?;
    let is_goal = matches!(first, Read::Goal { .. });
    let (goal_run, after, done) = match (is_goal, last) {
        (true, Some("end")) => (Some(1), None, true),
        // NB: runs are numbered from 1; an id that names no event starts from the start.
        (true, Some(last)) => match last.split_once(':').and_then(|(k, step)| {
            let k = k.parse::<usize>().ok().filter(|k| *k >= 1)?;
            Some((k, step.parse::<u64>().ok()?))
        }) {
            Some((k, step)) => (Some(k), Some(step), false),
            None => (Some(1), None, false),
        },
        (true, None) => (Some(1), None, false),
        (false, last) => (None, last.and_then(|l| l.parse::<u64>().ok()), false),
    };
    // NB: it read a goal's first run: of no use to a stream that starts at a later one.
    let from_first = goal_run.unwrap_or(1) == 1;
    let cursor = Cursor {
        state,
        id,
        goal_run,
        after,
        started: HashSet::new(),
        asked: None,
        fold: if from_first {
            fold
        } else {
            JournalFold::default()
        },
        done,
    };
    let first = from_first.then_some((first, watched));
    let stream = futures::stream::unfold((cursor, first), |(mut c, mut first)| async move {
        if c.done {
            return None;
        }
        loop {
            let (read, changed) = match first.take() {
                Some((read, changed)) => (Ok(read), changed),
                None => {
                    // NB: marked seen before the read: a commit after it wakes the wait
                    // below.
                    let mut changed = c.state.live.watch(&c.id);
                    if let Some(rx) = &mut changed {
                        rx.borrow_and_update();
                    }
                    // NB: a stream that is not a goal's is a run's: no goal is looked up.
                    let run = c.goal_run.is_none();
                    let fold = std::mem::take(&mut c.fold);
                    let read = read(&c.state, (&c.id, c.goal_run, c.after), run, fold).await;
                    let read = read.map(|(read, fold)| {
                        c.fold = fold;
                        read
                    });
                    (read, changed)
                }
            };
            let read = match read {
                Ok(r) => r,
                Err(_) => {
                    c.done = true;
                    let gone = Event::default().event("failed").data(
                        json!({"error": {"code": "unreadable", "message": "the run can no longer be read"}})
                            .to_string(),
                    );
                    return Some((vec![Ok(gone)], (c, None)));
                }
            };
            let events = c.advance(read);
            if !events.is_empty() || c.done {
                return Some((events.into_iter().map(Ok).collect(), (c, None)));
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
    let stream = futures::StreamExt::flat_map(stream, futures::stream::iter);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A run's row as one look found it, with its plan's source when that is still to be
/// sent; its journal is in the cursor's fold.
type RunRead = Box<(RunInfo, Option<String>)>;

/// What one look at the store found.
enum Read {
    Run(RunRead),
    Goal {
        /// How the goal ended (None: open).
        ended: Option<Value>,
        /// Its run the cursor is at, if it exists yet, and whether a later one does.
        run: Option<RunRead>,
        next: bool,
    },
}

impl Cursor {
    /// The events `read` holds beyond what was sent; moves on to a goal's next run once
    /// one ended.
    fn advance(&mut self, read: Read) -> Vec<Event> {
        match read {
            Read::Run(run) => {
                let (events, done) = self.run_events(&run, None);
                self.done = done;
                events
            }
            Read::Goal { ended, run, next } => {
                let k = self.goal_run.unwrap_or(1);
                let (mut out, run_done) = match run {
                    Some(run) => self.run_events(&run, Some(k)),
                    None => (Vec::new(), true),
                };
                if run_done && next {
                    self.goal_run = Some(k + 1);
                    self.after = None;
                    self.started.clear();
                    self.asked = None;
                    self.fold = JournalFold::default();
                } else if let Some(ended) = ended.filter(|_| run_done || !next) {
                    out.push(
                        Event::default()
                            .id("end")
                            .event("goal")
                            .data(ended.to_string()),
                    );
                    self.done = true;
                }
                out
            }
        }
    }

    /// The events of `run` beyond what was sent, the cursor moved past them; and whether
    /// the run has ended.
    fn run_events(
        &mut self,
        run: &(RunInfo, Option<String>),
        goal_run: Option<usize>,
    ) -> (Vec<Event>, bool) {
        let (batch, done) = new_events(
            (&run.0, run.1.as_deref(), &self.fold),
            (self.after, &mut self.started, &mut self.asked),
            goal_run,
        );
        if let Some((last, _)) = batch.last() {
            self.after = Some(*last);
        }
        (batch.into_iter().map(|(_, e)| e).collect(), done)
    }
}

/// Run `id`, or for a goal its run number `goal_run` (and the goal's state), its journal
/// folded on into `fold` (which comes back with it).
/// NB: the plan's source only when the plan is still to be sent (`after` None).
/// `run`: `id` is known to be a run's, not a goal's.
async fn read(
    state: &Arc<Shared>,
    (id, goal_run, after): (&str, Option<usize>, Option<u64>),
    run: bool,
    mut fold: JournalFold,
) -> Result<(Read, JournalFold), ApiError> {
    let id = id.to_owned();
    state
        .read(move |store| {
            let read = read_on(store, (&id, run), goal_run, after, &mut fold)?;
            Ok((read, fold))
        })
        .await
}

fn read_on(
    store: &dyn RunStore,
    (id, run): (&str, bool),
    goal_run: Option<usize>,
    after: Option<u64>,
    fold: &mut JournalFold,
) -> Result<Read, plan_runs::Error> {
    // NB: the row before the journal: a run's end is written with its last entry, so a
    // row read as ended comes with a journal that holds everything before the end.
    let mut run_of = |id: &str| -> Result<RunRead, plan_runs::Error> {
        let row = store.run(id)?;
        store.fold_journal(id, fold)?;
        let source = match after {
            None => read::source(store, &row),
            Some(_) => None,
        };
        Ok(Box::new((row, source)))
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

/// `value` as an event's data. NB: straight to text, not through a `Value`.
fn data(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The events of `run` after step `after` (all of them when None), each with the step it
/// belongs to, and whether the run has ended (its last event is among them). Ids are the
/// step's number, `K:STEP` for run number K of a goal.
fn new_events(
    (run, source, fold): (&RunInfo, Option<&str>, &JournalFold),
    (after, started, asked): (Option<u64>, &mut HashSet<u64>, &mut Option<u64>),
    goal_run: Option<usize>,
) -> (Vec<(u64, Event)>, bool) {
    let mut out = Vec::new();
    let event = |id: u64, kind: &str, data: String| {
        let shown = match goal_run {
            Some(k) => format!("{k}:{id}"),
            None => id.to_string(),
        };
        (id, Event::default().id(shown).event(kind).data(data))
    };
    if after.is_none() {
        let plan = json!({"id": run.id, "plan": source});
        out.push(event(0, "plan", plan.to_string()));
    }
    let after = after.unwrap_or(0);
    let start = |c: &CallRow| {
        json!({"phase": "started", "step": c.step, "seq_no": c.seq_no, "tool": c.tool,
               "args": c.args, "sent_at": c.sent_at})
        .to_string()
    };
    for s in fold.steps().range(after + 1..).map(|(_, s)| s) {
        // NB: a call belongs to the step that made it: the one after the `step`
        // instructions executed before it. It finishes with that step; a call this
        // stream did not see start gets its start first.
        if let Some(c) = s.step.checked_sub(1).and_then(|k| fold.calls().get(&k)) {
            if started.insert(c.step) {
                out.push(event(s.step, "tool_call", start(c)));
            }
            let finished = Finished {
                call: c,
                phase: "finished",
            };
            out.push(event(s.step, "tool_call", data(&finished)));
        }
        out.push(event(s.step, "step", data(s)));
    }
    // NB: a call out (sent: on record before it goes) starts now, under the id of the
    // last step sent: a client that reconnects from there may see its start again.
    let last_step = fold.steps().last_key_value().map_or(0, |(n, _)| *n);
    let last = last_step.max(after);
    for c in fold.calls().range(last..).map(|(_, c)| c) {
        let out_now = matches!(c.state, CallState::Inflight | CallState::Answered);
        if out_now && started.insert(c.step) {
            out.push(event(last, "tool_call", start(c)));
        }
    }
    // NB: the end is the event after the last step, sent once.
    let end = last_step + 1;
    let ended = match run.status {
        RunStatus::Ok => Some(("answer", json!({"final_answer": run.final_answer}))),
        RunStatus::Failed => Some(("failed", json!({"error": run.error}))),
        RunStatus::Running | RunStatus::Interrupted | RunStatus::NeedsInput | RunStatus::Queued => {
            None
        }
    };
    // NB: not an end: the run goes on once answered, and its events follow on this
    // stream. Under the id of its last step: a client that reconnects is asked again.
    if run.status == RunStatus::NeedsInput && *asked != Some(end) {
        *asked = Some(end);
        out.push(event(end - 1, "needs_input", data(&run.question)));
    }
    let done = ended.is_some();
    if let Some((kind, data)) = ended
        && after < end
    {
        out.push(event(end, kind, data.to_string()));
    }
    (out, done)
}
