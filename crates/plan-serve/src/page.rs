//! A page of `GET /v1/runs`: every run (a goal's with the goal's text) and every goal none
//! of whose plans has run yet, newest first, read from the store a chunk at a time from
//! the page's cursor, so that a page costs what it shows however many runs the store
//! holds (the runs page asks for one every second while runs go on).

use std::collections::{HashMap, VecDeque};

use plan_store::{GoalInfo, RunInfo, RunStore, StoreErrorKind};

use crate::schema::RunSummary;

/// Rows read from the store at a time, of runs and of goals.
const CHUNK: usize = 128;

/// Which entries a page shows.
#[derive(Clone, Copy, Default)]
pub(crate) struct Wanted<'a> {
    /// Of this status (any when None).
    pub(crate) status: Option<&'a str>,
    /// Whose name or goal holds this text, lowercased (any when None).
    pub(crate) text: Option<&'a str>,
}

impl Wanted<'_> {
    fn shows(&self, entry: &RunSummary) -> bool {
        self.status.is_none_or(|w| entry.status == w)
            && self.text.is_none_or(|t| {
                entry.plan.to_lowercase().contains(t)
                    || entry
                        .goal
                        .as_ref()
                        .is_some_and(|g| g.to_lowercase().contains(t))
            })
    }
}

/// At most `limit` entries `wanted` created before the entry `before` (from the newest
/// when None; none when no run or goal has that id).
pub(crate) fn runs(
    store: &dyn RunStore,
    before: Option<&str>,
    wanted: Wanted<'_>,
    limit: usize,
) -> Result<Vec<RunSummary>, plan_runs::Error> {
    let start = match before {
        None => None,
        Some(id) => match created(store, id)? {
            Some(at) => Some((at, id.to_owned())),
            None => return Ok(Vec::new()),
        },
    };
    let mut runs = Stream::new(start.clone());
    let mut goals = Stream::new(start);
    let mut goal_of: HashMap<String, Option<GoalInfo>> = HashMap::new();
    // NB: a store that holds no goal (runs of plans only) looks none up.
    let any_goal = !store.goals_before(None, 1)?.is_empty();
    let mut out = Vec::new();
    while out.len() < limit {
        let run = runs.peek(|c, n| store.runs_before(c, n), |r| (r.created_at, &r.id))?;
        let goal = goals.peek(|c, n| store.goals_before(c, n), |g| (g.created_at, &g.id))?;
        let entry = match (run, goal) {
            (None, None) => break,
            (Some(r), Some(g)) if (g.created_at, &g.id) > (r.created_at, &r.id) => {
                Entry::Goal(goals.next())
            }
            (Some(_), _) => Entry::Run(runs.next()),
            (None, Some(_)) => Entry::Goal(goals.next()),
        };
        let shown = match entry {
            Entry::Run(run) if any_goal => match goal_of_run(store, &mut goal_of, &run.id)? {
                Some(goal) => RunSummary::of_goal(&goal, Some(&run)),
                None => RunSummary::of_run(&run),
            },
            Entry::Run(run) => RunSummary::of_run(&run),
            // NB: a goal whose first run exists is shown by its runs.
            Entry::Goal(goal) => match store.run(&goal.id) {
                Ok(_) => continue,
                Err(e) if e.kind == StoreErrorKind::UnknownRun => RunSummary::of_goal(&goal, None),
                Err(e) => return Err(e.into()),
            },
        };
        if wanted.shows(&shown) {
            out.push(shown);
        }
    }
    Ok(out)
}

enum Entry {
    Run(RunInfo),
    Goal(GoalInfo),
}

/// When the run or goal `id` was created.
fn created(store: &dyn RunStore, id: &str) -> Result<Option<i64>, plan_runs::Error> {
    match store.run(id) {
        Ok(run) => return Ok(Some(run.created_at)),
        Err(e) if e.kind == StoreErrorKind::UnknownRun => {}
        Err(e) => return Err(e.into()),
    }
    Ok(store.goal(id)?.map(|g| g.created_at))
}

/// The goal run `id` is a plan of, if any, looked up once per id.
fn goal_of_run(
    store: &dyn RunStore,
    known: &mut HashMap<String, Option<GoalInfo>>,
    id: &str,
) -> Result<Option<GoalInfo>, plan_runs::Error> {
    if let Some(goal) = known.get(id) {
        return Ok(goal.clone());
    }
    let goal = plan_runs::ask::goal_of_run(store, id)?;
    known.insert(id.to_owned(), goal.clone());
    Ok(goal)
}

/// Rows of one table, newest first, read a chunk at a time.
struct Stream<T> {
    /// Where the next chunk starts (before it).
    cursor: Option<(i64, String)>,
    read: VecDeque<T>,
    done: bool,
}

impl<T> Stream<T> {
    fn new(cursor: Option<(i64, String)>) -> Self {
        Stream {
            cursor,
            read: VecDeque::new(),
            done: false,
        }
    }

    /// The next row, reading a chunk with `more` when none is left.
    fn peek(
        &mut self,
        more: impl FnOnce(Option<(i64, &str)>, usize) -> Result<Vec<T>, plan_store::StoreError>,
        key: impl Fn(&T) -> (i64, &String),
    ) -> Result<Option<&T>, plan_runs::Error> {
        if self.read.is_empty() && !self.done {
            let cursor = self.cursor.as_ref().map(|(at, id)| (*at, id.as_str()));
            let chunk = more(cursor, CHUNK)?;
            self.done = chunk.len() < CHUNK;
            if let Some(last) = chunk.last() {
                let (at, id) = key(last);
                self.cursor = Some((at, id.clone()));
            }
            self.read.extend(chunk);
        }
        Ok(self.read.front())
    }

    /// The row [`Stream::peek`] gave.
    fn next(&mut self) -> T {
        self.read.pop_front().expect("peeked")
    }
}
