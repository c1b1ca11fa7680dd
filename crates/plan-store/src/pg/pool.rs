//! The connections of a PostgreSQL store in this process. A store takes one for each
//! call and gives it back after the call: a process running many runs at once (a worker,
//! a service) holds at most [`MAX_OPEN`] connections to a database however many runs it
//! has (a server takes 100 by default), a run waiting for its tools holds none, and
//! opening a store costs no handshake once the process has connections there.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use postgres::Client;

use super::{LOCK_TIMEOUT_MS, check_version, migrate};
use crate::{Durability, StoreError, StoreErrorKind, StoredProgram};

/// Connections open at most per database, durability and process.
pub(crate) const MAX_OPEN: usize = 16;

/// A connection and the statements prepared on it.
pub(crate) struct Conn {
    pub(crate) client: Client,
    pub(crate) prepared: Prepared,
}

/// The statements of a commit point, prepared once per connection: an unprepared
/// statement costs a round trip more each time. The others this connection runs most
/// (reads, claims) are prepared at their first use and kept ([`Prepared::statement`]):
/// the server then parses and plans each once per connection, not once per call.
pub(crate) struct Prepared {
    /// Fences and journals a point in one statement: a row only when `$2` holds run `$1`.
    pub(crate) journal: postgres::Statement,
    /// Fences a point with nothing to journal.
    pub(crate) held: postgres::Statement,
    others: std::cell::RefCell<HashMap<String, postgres::Statement>>,
}

/// Statements kept per connection at most (a list's pages make a few texts; more are
/// dropped and prepared again).
const KEPT: usize = 64;

impl Prepared {
    fn new(client: &mut Client) -> Result<Prepared, postgres::Error> {
        Ok(Prepared {
            journal: client.prepare(
                "WITH held AS (SELECT id FROM runs WHERE id = $1 AND owner = $2 \
                               AND status = 'running' FOR UPDATE) \
                 INSERT INTO journal (run, seq, at, entry) \
                 SELECT $1, coalesce((SELECT max(seq) + 1 FROM journal WHERE run = $1), 0), \
                        $3, ($4::text)::json FROM held RETURNING seq",
            )?,
            held: client.prepare(
                "SELECT 1 FROM runs WHERE id = $1 AND owner = $2 AND status = 'running' FOR UPDATE",
            )?,
            others: std::cell::RefCell::default(),
        })
    }

    /// `sql` prepared on this connection (`client`, or a transaction on it), once.
    pub(crate) fn statement(
        &self,
        client: &mut impl postgres::GenericClient,
        sql: &str,
    ) -> Result<postgres::Statement, postgres::Error> {
        if let Some(st) = self.others.borrow().get(sql) {
            return Ok(st.clone());
        }
        let st = client.prepare(sql)?;
        let mut others = self.others.borrow_mut();
        if others.len() >= KEPT {
            others.clear();
        }
        others.insert(sql.to_owned(), st.clone());
        Ok(st)
    }
}

/// The connections to one database at one durability.
pub(crate) struct Pool {
    config: postgres::Config,
    durability: Durability,
    /// The URL without its password, for messages.
    pub(crate) shown: String,
    state: Mutex<State>,
    /// Told when a connection is given back or closed.
    freed: Condvar,
    /// Programs read, by hash (at most [`KEPT_PROGRAMS`]).
    programs: Mutex<HashMap<String, StoredProgram>>,
}

/// Programs a pool keeps at most (a worker's runs share a few).
const KEPT_PROGRAMS: usize = 64;

/// How long a check that no newer planvm migrated the database holds (see
/// [`Pool::check`]).
const CHECK_HOLDS: Duration = Duration::from_secs(1);

struct State {
    idle: Vec<Conn>,
    /// Connections open, idle or taken.
    open: usize,
    /// Whether the schema was brought up to date (by the first connection).
    migrated: bool,
    /// When the schema's version was last checked.
    checked: Option<Instant>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// The pool of the database `url` names at `durability`, made at its first use.
    pub(crate) fn of(url: &str, durability: Durability) -> Result<Arc<Pool>, StoreError> {
        type Pools = Mutex<HashMap<(String, bool), Arc<Pool>>>;
        static POOLS: OnceLock<Pools> = OnceLock::new();
        let key = (url.to_owned(), durability == Durability::Full);
        let mut pools = lock(POOLS.get_or_init(Pools::default));
        if let Some(pool) = pools.get(&key) {
            return Ok(pool.clone());
        }
        let shown = plan_sql::without_password(url);
        let mut config: postgres::Config = url.parse().map_err(|e| {
            StoreError::new(
                StoreErrorKind::NotAStore,
                format!("`{shown}` is not a PostgreSQL URL: {e}"),
            )
        })?;
        plan_sql::name_connections(&mut config);
        config.connect_timeout(Duration::from_secs(10));
        let pool = Arc::new(Pool {
            config,
            durability,
            shown,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
                migrated: false,
                checked: None,
            }),
            freed: Condvar::new(),
            programs: Mutex::new(HashMap::new()),
        });
        pools.insert(key, pool.clone());
        Ok(pool)
    }

    /// A connection: an idle one, a new one while fewer than [`MAX_OPEN`] are open, else
    /// the first given back. Blocks: call off any runtime.
    pub(crate) fn take(&self) -> Result<Conn, StoreError> {
        let mut state = lock(&self.state);
        loop {
            while let Some(conn) = state.idle.pop() {
                // NB: one the server closed while it was idle is let go of.
                if !conn.client.is_closed() {
                    return Ok(conn);
                }
                state.open -= 1;
            }
            if state.open < MAX_OPEN {
                break;
            }
            state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.open += 1;
        let migrated = state.migrated;
        drop(state);
        // NB: counted open from here; a failure (a panic included) lets go of it.
        let opening = Opening(self);
        let conn = self.connect(!migrated)?;
        std::mem::forget(opening);
        lock(&self.state).migrated = true;
        Ok(conn)
    }

    /// Program `hash`, if this process read it already.
    pub(crate) fn program(&self, hash: &str) -> Option<StoredProgram> {
        lock(&self.programs).get(hash).cloned()
    }

    pub(crate) fn keep_program(&self, program: &StoredProgram) {
        let mut programs = lock(&self.programs);
        if programs.len() >= KEPT_PROGRAMS {
            programs.clear();
        }
        programs.insert(program.hash.clone(), program.clone());
    }

    /// Gives `conn` back for the next call (one the server closed is let go of).
    pub(crate) fn give(&self, conn: Conn) {
        let mut state = lock(&self.state);
        if conn.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        drop(state);
        self.freed.notify_one();
    }

    /// Brings the schema up to date at the first use; later, checks that no newer planvm
    /// migrated it since (a round trip), at most once per [`CHECK_HOLDS`]: a worker opens
    /// the store for each run it takes. Blocks: call off any runtime.
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        if lock(&self.state)
            .checked
            .is_some_and(|at| at.elapsed() < CHECK_HOLDS)
        {
            return Ok(());
        }
        let checked = self.check_now();
        if checked.is_ok() {
            lock(&self.state).checked = Some(Instant::now());
        }
        checked
    }

    fn check_now(&self) -> Result<(), StoreError> {
        let mut tries = 0;
        loop {
            let mut conn = self.take()?;
            let checked = check_version(&mut conn, &self.shown);
            let closed = conn.client.is_closed();
            self.give(conn);
            // NB: a connection the server closed while it was idle: the next one.
            if checked.is_ok() || !closed || tries == MAX_OPEN {
                return checked;
            }
            tries += 1;
        }
    }

    /// A new connection, its session set up (and the schema brought up to date first
    /// when `migrating`), not counted in the pool's: the caller keeps it.
    pub(crate) fn connect(&self, migrating: bool) -> Result<Conn, StoreError> {
        let shown = &self.shown;
        let cannot = |e: &dyn std::fmt::Display| {
            StoreError::new(
                StoreErrorKind::Io,
                format!("cannot connect to {shown}: {e}"),
            )
        };
        let mut client = plan_sql::connect_postgres(&self.config).map_err(|e| cannot(&e))?;
        // NB: a process stopped (SIGSTOP, a debugger) inside a transaction holds its
        // locks: a claim waiting for one gives up rather than hang. The server's JIT
        // compiles a statement it guesses costly (a whole run's journal read at its end)
        // in milliseconds: more than running it, for statements this short.
        let sync = match self.durability {
            Durability::Normal => "off",
            Durability::Full => "on",
        };
        client
            .batch_execute(&format!(
                "SET lock_timeout = {LOCK_TIMEOUT_MS}; SET synchronous_commit = {sync}; SET jit = off"
            ))
            .map_err(|e| cannot(&e))?;
        if migrating {
            migrate(&mut client, shown)?;
        }
        let prepared = Prepared::new(&mut client)
            .map_err(|e| StoreError::new(StoreErrorKind::Io, format!("{shown}: {e}")))?;
        Ok(Conn { client, prepared })
    }
}

/// A connection counted open while it is being opened: uncounted if that fails.
struct Opening<'a>(&'a Pool);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).open -= 1;
        self.0.freed.notify_one();
    }
}

/// Runs `f` off any tokio runtime (the `postgres` client runs a small runtime of its own,
/// which must not be driven from a thread of another one): on this thread when it drives
/// none; in place on a thread of a multi-threaded runtime, whose other tasks move to
/// another thread meanwhile; else on a scoped thread.
pub(crate) fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Err(_) => f(),
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|s| match s.spawn(f).join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }),
    }
}
