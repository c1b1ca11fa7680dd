//! The embedded store: one SQLite file (WAL mode), schema in `migrations/`, applied by
//! `rusqlite_migration` (the schema version is SQLite's `user_version`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, LazyLock};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use rusqlite_migration::{M, Migrations};
use std::collections::{HashMap, HashSet};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{
    CallRow, CommitPoint, EvalCase, EvalInfo, Feedback, GoalInfo, GoalRound, JournalFold, NewGoal,
    NewRun, Owner, RunEnd, RunInfo, RunStore, Seen, SessionInfo, StepRow, StoreError,
    StoreErrorKind, StoreWrite, StoredProgram, Wrote, now_ms,
};

/// `PRAGMA application_id` of a planvm store ('plnr').
const APPLICATION_ID: i64 = 0x706c_6e72;

/// How long a write waits for another process's transaction before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

static MIGRATIONS: LazyLock<Migrations<'static>> = LazyLock::new(|| {
    Migrations::new(vec![
        M::up(include_str!("migrations/001_init.sql")),
        // NB: rebuilds `runs`, which other tables reference: foreign keys are off while
        // migrations run, and checked before the migration commits.
        M::up(include_str!("migrations/002_status_check.sql")).foreign_key_check(),
        M::up(include_str!("migrations/003_tool_calls.sql")),
        M::up(include_str!("migrations/004_goals.sql")),
        M::up(include_str!("migrations/005_sessions.sql")),
        M::up(include_str!("migrations/006_needs_input.sql")).foreign_key_check(),
        M::up(include_str!("migrations/007_evals.sql")),
        M::up(include_str!("migrations/008_usage.sql")),
        M::up(include_str!("migrations/009_planner_usage.sql")),
        M::up(include_str!("migrations/010_by_creation.sql")),
        M::up(include_str!("migrations/011_goal_leases.sql")),
        M::up(include_str!("migrations/012_goal_rounds.sql")),
    ])
});

/// The schema version this planvm writes (the number of migrations).
const SCHEMA_VERSION: i64 = 12;

/// What a commit survives (SQLite's `synchronous` in WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `NORMAL`: a commit survives the process dying; a power loss may lose the last
    /// commits (never corrupts the store).
    #[default]
    Normal,
    /// `FULL`: every commit is on disk before the run goes on; survives a power loss.
    Full,
}

/// SQLite's automatic checkpoint (copying the WAL back into the database file) runs
/// inside the commit that crosses its threshold: two fsyncs and the copy of a thousand
/// pages, which cost that commit milliseconds and every commit ≈ 8 µs on average here
/// (BENCHMARKS.md, "Durable runs"). A store checkpoints from a thread of its own instead,
/// within [`CHECKPOINT_EVERY`] of a commit. The automatic checkpoint stays, at this many
/// pages (32 MiB), only as a bound on the WAL while writes never pause: a checkpoint
/// beside a writer cannot let the WAL start over.
const WAL_BOUND_PAGES: i64 = 8192;

/// How often the checkpoint thread looks for commits to copy back. NB: 10 ms, not 50: a
/// batch commits continuously, and what the thread has not copied when the store closes
/// is copied then, in the foreground (1,000 zero-latency runs: 126 ms at 50 ms, 105 ms
/// at 10 ms). A run whose commits are further apart gets one checkpoint per commit either
/// way.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(10);

/// The thread that checkpoints a store's WAL (see [`WAL_BOUND_PAGES`]), with a connection
/// of its own, started by the store's first write transaction. It ends, and is joined,
/// when the store is dropped, before the store's own connection closes: whichever
/// connection to the file closes last (of any process) copies the rest back and removes
/// the WAL.
struct Checkpointer {
    wrote: Arc<AtomicBool>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    fn spawn(path: PathBuf) -> Checkpointer {
        let wrote = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = mpsc::channel::<()>();
        let flag = Arc::clone(&wrote);
        let thread = std::thread::Builder::new()
            .name("store checkpoint".to_owned())
            .spawn(move || {
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let Ok(conn) = Connection::open_with_flags(&path, flags) else {
                    return;
                };
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(CHECKPOINT_EVERY) {
                    if flag.swap(false, Ordering::Relaxed) {
                        // NB: PASSIVE neither waits for nor blocks a writer. One that fails
                        // (another process checkpointing) is done again after a later write,
                        // or by the automatic checkpoint.
                        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    }
                }
            })
            // NB: no thread, no harm: the automatic checkpoint still bounds the WAL.
            .ok();
        Checkpointer {
            wrote,
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A write transaction of the store; its commit tells the checkpoint thread.
struct Write<'c> {
    tx: rusqlite::Transaction<'c>,
    wrote: Arc<AtomicBool>,
}

impl Write<'_> {
    fn commit(self) -> rusqlite::Result<()> {
        self.tx.commit()?;
        // NB: after the commit, not before the transaction: the thread may checkpoint
        // while this one waits for the write lock, and must see this commit next time.
        self.wrote.store(true, Ordering::Relaxed);
        Ok(())
    }
}

impl std::ops::Deref for Write<'_> {
    type Target = rusqlite::Connection;
    fn deref(&self) -> &rusqlite::Connection {
        &self.tx
    }
}

/// The programs a store knows to be in its file. NB: a batch creates a run per line, most
/// of one program: hashing its bytes and handing them to `INSERT OR IGNORE` (which copies
/// them into a record before it finds the row there) for each run was half of a creation.
#[derive(Default)]
struct Programs {
    /// Hashes of the programs committed by this store (programs are never deleted).
    stored: HashSet<String>,
    /// The last program's bytes and their hash.
    last: Option<(Vec<u8>, String)>,
}

/// The largest program [`Programs`] keeps the bytes of.
const LAST_PROGRAM: usize = 1 << 20;

impl Programs {
    fn hash(&mut self, pbc: &[u8]) -> String {
        if let Some((bytes, hash)) = &self.last
            && bytes == pbc
        {
            return hash.clone();
        }
        let hash = format!("{:x}", Sha256::digest(pbc));
        // NB: a large program is not kept: its copy would stay for the store's life.
        self.last = (pbc.len() <= LAST_PROGRAM).then(|| (pbc.to_vec(), hash.clone()));
        hash
    }
}

/// A run store in one SQLite file.
pub struct SqliteStore {
    /// Started by the first write. NB: declared before `conn`, so dropped (and joined)
    /// before it.
    checkpointer: Option<Checkpointer>,
    conn: Connection,
    path: String,
    file: PathBuf,
    programs: Programs,
    /// Read as it is, without locks (SQLite's `immutable`): the file's size and
    /// modification time when opened.
    immutable: Option<FileStamp>,
}

/// A file's size and modification time: whether it was written.
type FileStamp = Option<(u64, std::time::SystemTime)>;

fn file_stamp(path: &Path) -> FileStamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// The files a store at `path` is made of: the database and the files SQLite keeps
    /// beside it (`-wal`, `-shm`, and `-journal` while it rolls back), whether they exist
    /// yet or not. NB: SQLite puts them beside the file a symbolic link leads to: a caller
    /// that protects them takes this of the link's target too.
    pub fn files(path: &Path) -> [PathBuf; 4] {
        let with = |suffix: &str| {
            let mut p = path.as_os_str().to_owned();
            p.push(suffix);
            PathBuf::from(p)
        };
        [
            path.to_owned(),
            with("-wal"),
            with("-shm"),
            with("-journal"),
        ]
    }

    /// Opens (creating it if needed) the store at `path` and brings its schema up to
    /// date. Refuses a file that is not a planvm store, or one from a newer planvm.
    pub fn open(path: &Path, durability: Durability) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, durability, true)
    }

    /// Opens an existing store (commands that only read or continue runs): a missing
    /// file is `NoStore`, not a new empty store.
    pub fn open_existing(path: &Path, durability: Durability) -> Result<SqliteStore, StoreError> {
        if !path.exists() {
            return Err(StoreError::new(
                StoreErrorKind::NoStore,
                format!("no store at {}", path.display()),
            ));
        }
        Self::open_with(path, durability, false)
    }

    /// Opens an existing store to read it (`runs list`, `runs show`): as
    /// [`SqliteStore::open_existing`] where this process may write it, read-only where it
    /// may not (a store of another user, a read-only mount). NB: SQLite reads a WAL-mode
    /// file through an index beside it (`-shm`), which a reader must be able to create.
    /// Without a `-wal` beside the file no process has the store open (the last one to
    /// close merged it into the file and removed it), so the file is read as it is
    /// (SQLite's `immutable`); with one, through the index the processes that have it
    /// open keep.
    pub fn open_to_read(path: &Path) -> Result<SqliteStore, StoreError> {
        match Self::open_existing(path, Durability::Normal) {
            Err(e) if e.kind == StoreErrorKind::ReadOnly => Self::open_read_only(path),
            opened => opened,
        }
    }

    fn open_read_only(path: &Path) -> Result<SqliteStore, StoreError> {
        let shown = path.display().to_string();
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let immutable = !Path::new(&wal).exists();
        check_header(path, &shown)?;
        let stamp = file_stamp(path);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(file_uri(path, immutable), flags)
            .map_err(|e| io(&shown, e))?;
        let version = set_up(&conn, &shown).map_err(|e| match e.kind {
            StoreErrorKind::ReadOnly => StoreError::new(
                StoreErrorKind::ReadOnly,
                format!(
                    "{shown}: a process has the store open, or the last one did not close it, \
                     and its WAL cannot be read read-only ({}): try again once that process \
                     is done, or as a user who may write the store",
                    e.message
                ),
            ),
            _ => e,
        })?;
        if version < SCHEMA_VERSION {
            return Err(StoreError::new(
                StoreErrorKind::ReadOnly,
                format!(
                    "{shown}: the store's schema version {version} is older than this planvm's \
                     {SCHEMA_VERSION}, and this process may not write it to bring it up to date"
                ),
            ));
        }
        Ok(SqliteStore {
            checkpointer: None,
            conn,
            path: shown,
            file: path.to_owned(),
            programs: Programs::default(),
            immutable: immutable.then_some(stamp),
        })
    }

    fn open_with(
        path: &Path,
        durability: Durability,
        create: bool,
    ) -> Result<SqliteStore, StoreError> {
        let shown = path.display().to_string();
        // NB: SQLite says only "unable to open database file" for a directory.
        if path.is_dir() {
            return Err(not_a_store(&shown, "a directory"));
        }
        check_header(path, &shown)?;
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(path, flags).map_err(|e| io(&shown, e))?;
        // NB: SQLite opens a file this process may not write read-only, and says nothing:
        // its first read would then create the WAL's files beside the store, owned by
        // this process, which a read-only connection cannot remove (and which stop the
        // store's owner from writing it); a writing command would fail only at its first
        // write, after its tools were called.
        if conn
            .is_readonly(rusqlite::MAIN_DB)
            .map_err(|e| io(&shown, e))?
        {
            return Err(StoreError::new(
                StoreErrorKind::ReadOnly,
                format!("{shown}: this process may not write the store"),
            ));
        }
        set_up(&conn, &shown)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| io(&shown, e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::new(
                StoreErrorKind::Io,
                format!("{shown}: cannot switch to WAL mode (got {mode})"),
            ));
        }
        let sync = match durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", sync)
            .map_err(|e| io(&shown, e))?;
        // NB: statement journals (one per statement of a multi-statement transaction)
        // in memory, not in temporary files.
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(|e| io(&shown, e))?;
        conn.pragma_update(None, "wal_autocheckpoint", WAL_BOUND_PAGES)
            .map_err(|e| io(&shown, e))?;
        let mut store = SqliteStore {
            checkpointer: None,
            conn,
            path: shown,
            file: path.to_owned(),
            programs: Programs::default(),
            immutable: None,
        };
        // NB: a migration that rebuilds a table others reference must run with foreign
        // keys off (the bundled SQLite turns them on by default, and the pragma does
        // nothing inside the migration's transaction); they are turned on after.
        store
            .conn
            .pragma_update(None, "foreign_keys", "OFF")
            .map_err(|e| io(&store.path, e))?;
        if let Err(e) = MIGRATIONS.to_latest(&mut store.conn) {
            // NB: two processes creating one store at once: the one that lost the race
            // finds the schema in place.
            let now: i64 = store
                .conn
                .query_row("SELECT user_version FROM pragma_user_version", [], |r| {
                    r.get(0)
                })
                .unwrap_or(0);
            if now != SCHEMA_VERSION {
                return Err(StoreError::new(
                    StoreErrorKind::Io,
                    format!("{}: {e}", store.path),
                ));
            }
        }
        store
            .conn
            .pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| io(&store.path, e))?;
        Ok(store)
    }

    fn io(&self, e: rusqlite::Error) -> StoreError {
        io(&self.path, e)
    }

    /// The rows of `select` (of a table with `created_at` and `id`) created before
    /// `before`, newest first, at most `limit` (see [`RunStore::runs_before`]).
    fn newest_before<T>(
        &self,
        select: &str,
        before: Option<(i64, &str)>,
        limit: usize,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, StoreError> {
        let (at, id) = before.unzip();
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "{select} WHERE ?1 IS NULL OR created_at < ?1 OR (created_at = ?1 AND id < ?2) \
                 ORDER BY created_at DESC, id DESC LIMIT ?3"
            ))
            .map_err(|e| self.io(e))?;
        let rows = stmt
            .query_map(params![at, id, to_i64(limit as u64)], row)
            .map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }

    fn write(&mut self) -> Result<Write<'_>, StoreError> {
        let wrote = Arc::clone(
            &self
                .checkpointer
                .get_or_insert_with(|| Checkpointer::spawn(self.file.clone()))
                .wrote,
        );
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| io(&path, e))?;
        Ok(Write { tx, wrote })
    }

    /// [`RunStore::write_group`]; the programs it stored for the first time are added to
    /// `new_programs` (known to be in the file only if the group commits).
    fn write_group_with(
        &mut self,
        writes: &[&StoreWrite],
        programs: &mut Programs,
        new_programs: &mut Vec<String>,
    ) -> Vec<Result<Wrote, StoreError>> {
        let path = self.path.clone();
        let all_failed = |e: StoreError| writes.iter().map(|_| Err(e.clone())).collect();
        let tx = match self.write() {
            Ok(tx) => tx,
            Err(e) => return all_failed(e),
        };
        // NB: a run created in this group whose first points come in the same group (a
        // quick run, as in a batch) is written as one row with its end, and its journal
        // row follows with no fencing query: the run is this process's by construction.
        // That was a third of the writer's work per run in a batch. `first[i]`: the
        // position of the first commit of the run created at `i`.
        let mut first: Vec<Option<usize>> = vec![None; writes.len()];
        let mut created: HashMap<&str, usize> = HashMap::new();
        for (j, w) in writes.iter().enumerate() {
            match w {
                StoreWrite::Create(run, _) => {
                    created.insert(&run.id, j);
                }
                StoreWrite::Commit(id, owner, _) => {
                    if let Some(i) = created.remove(id.as_str())
                        && matches!(writes[i], StoreWrite::Create(_, o) if o == owner)
                    {
                        first[i] = Some(j);
                    }
                }
            }
        }
        let mut results: Vec<Option<Result<Wrote, StoreError>>> = vec![None; writes.len()];
        for (i, w) in writes.iter().enumerate() {
            if results[i].is_some() {
                continue;
            }
            // NB: no savepoint per write: each write checks what may refuse it (a
            // duplicate id, a run held elsewhere) before it changes anything, so a refused
            // write leaves nothing to undo, and any other failure fails the group. (A
            // savepoint copied every page a write touched into a statement journal: a
            // tenth of the writer's time in a batch.)
            let r = match w {
                StoreWrite::Create(run, owner) => {
                    let point = first[i].and_then(|j| match writes[j] {
                        StoreWrite::Commit(_, _, point) => Some(point),
                        StoreWrite::Create(..) => None,
                    });
                    let r = create(&tx, &path, &run.borrow(), Some(owner), programs, point);
                    // NB: a refused creation wrote nothing: the commit is then tried on
                    // its own, in its turn (the id may name a run this process holds).
                    r.map(|(new, wrote)| {
                        new_programs.extend(new);
                        if let Some(j) = first[i] {
                            results[j] = Some(Ok(wrote));
                        }
                        Wrote::default()
                    })
                }
                StoreWrite::Commit(id, owner, point) => commit(&tx, &path, id, owner, point),
            };
            // NB: only a refusal leaves the rest going on; after an I/O error SQLite may
            // have rolled the whole transaction back, so everything fails.
            if let Err(e) = &r
                && !matches!(e.kind, StoreErrorKind::DuplicateRun | StoreErrorKind::Busy)
            {
                return all_failed(e.clone());
            }
            results[i] = Some(r);
        }
        match tx.commit() {
            Ok(()) => results.into_iter().flatten().collect(),
            Err(e) => all_failed(io(&path, e)),
        }
    }

    /// The points of run `id`'s journal, in order, each with the time of its row.
    fn entries<P: serde::de::DeserializeOwned>(
        &self,
        id: &str,
    ) -> Result<Vec<(i64, P)>, StoreError> {
        crate::rows::points(|each| self.entries_after(id, -1, each))
    }

    /// Each entry of run `id`'s journal after entry `after`, in order: (its number, the
    /// time of its row, its points). Fails for a run the store does not hold.
    fn entries_after<P: serde::de::DeserializeOwned>(
        &self,
        id: &str,
        after: i64,
        each: impl FnMut(i64, i64, Vec<P>),
    ) -> Result<(), StoreError> {
        // NB: a run with entries exists: asked only when none came.
        if self.journal_rows(id, after, each)? == 0 {
            self.exists(id)?;
        }
        Ok(())
    }

    /// [`SqliteStore::entries_after`] of a run known to exist; how many entries.
    fn journal_rows<P: serde::de::DeserializeOwned>(
        &self,
        id: &str,
        after: i64,
        mut each: impl FnMut(i64, i64, Vec<P>),
    ) -> Result<usize, StoreError> {
        let mut n = 0;
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT seq, entry, at FROM journal WHERE run = ?1 AND seq > ?2 ORDER BY seq",
            )
            .map_err(|e| io_run(&self.path, id, e))?;
        let rows = stmt
            .query_map(params![id, after], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .map_err(|e| io_run(&self.path, id, e))?;
        for row in rows {
            let (seq, text, at) = row.map_err(|e| io_run(&self.path, id, e))?;
            let points: Vec<P> = serde_json::from_str(&text).map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Damaged,
                    format!(
                        "{}: run `{id}`: its journal entry {seq} cannot be read ({e}): the store is damaged",
                        self.path
                    ),
                )
            })?;
            each(seq, at, points);
            n += 1;
        }
        Ok(n)
    }

    fn claim_run(&mut self, id: &str, owner: &Owner, seen: Seen) -> Result<(), StoreError> {
        let now = now_ms();
        let path = self.path.clone();
        let tx = self.write()?;
        let row: Option<(String, Option<String>, Option<i64>, i64)> = tx
            .query_row(
                "SELECT status, owner, lease_until, updated_at FROM runs WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(|e| io(&path, e))?;
        let Some((status, holder, lease, updated_at)) = row else {
            return Err(unknown_run(id));
        };
        if status == "ok" {
            return Err(StoreError::new(
                StoreErrorKind::Busy,
                format!("run `{id}` has finished meanwhile (another process resumed it)"),
            ));
        }
        if journal_head(&tx, id).map_err(|e| io(&path, e))? != seen.journal_head
            || seen.updated_at.is_some_and(|at| at != updated_at)
        {
            return Err(StoreError::new(
                StoreErrorKind::Busy,
                format!(
                    "run `{id}` changed meanwhile (it went on in another process, or was cancelled); resume it again"
                ),
            ));
        }
        if status == "running"
            && let Some(holder) = holder
            && holder != owner.0
            && crate::rows::holds(&holder, lease, now)
        {
            return Err(StoreError::new(
                StoreErrorKind::Busy,
                format!(
                    "run `{id}` is being run by another process ({holder}); wait for it to end, or for its lease to lapse ({} s after it stops)",
                    crate::lease_ms() / 1000
                ),
            ));
        }
        tx.execute(
            "UPDATE runs SET status = 'running', owner = ?2, lease_until = ?3, updated_at = ?4, \
                             final_answer = NULL, error = NULL, tool_calls = NULL, question = NULL \
             WHERE id = ?1",
            params![id, owner.0, now + crate::lease_ms(), now],
        )
        .map_err(|e| io(&path, e))?;
        tx.commit().map_err(|e| io(&path, e))
    }

    /// The first journal entry that is not JSON, as (run, seq), if any: SQLite's JSON
    /// functions name none when they fail on one.
    fn entry_not_json(&self) -> Option<(String, i64)> {
        self.conn
            .query_row(
                "SELECT run, seq FROM journal WHERE NOT json_valid(entry) LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .ok()
    }

    fn exists(&self, id: &str) -> Result<(), StoreError> {
        let found: Option<i64> = self
            .conn
            .prepare_cached("SELECT 1 FROM runs WHERE id = ?1")
            .and_then(|mut st| st.query_row([id], |r| r.get(0)).optional())
            .map_err(|e| io_run(&self.path, id, e))?;
        match found {
            Some(_) => Ok(()),
            None => Err(unknown_run(id)),
        }
    }
}

/// The number of run `id`'s last journal entry.
fn journal_head(conn: &Connection, id: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT max(seq) FROM journal WHERE run = ?1")
        .and_then(|mut st| st.query_row([id], |r| r.get(0)))
}

fn unknown_run(id: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::UnknownRun,
        format!("no run `{id}` in this store (`planvm runs list` shows them)"),
    )
}

/// The start of every SQLite file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Refuses a file that is neither empty (which becomes a new store) nor an SQLite file.
/// NB: SQLite itself takes a file shorter than a page for an empty database, and would
/// write a new store over it.
fn check_header(path: &Path, shown: &str) -> Result<(), StoreError> {
    use std::io::Read;
    // A missing file is created; anything but a regular file (opening a FIFO would wait
    // for a writer), or one that cannot be opened, is SQLite's to report.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(());
    };
    let mut head = Vec::with_capacity(SQLITE_HEADER.len());
    if file
        .take(SQLITE_HEADER.len() as u64)
        .read_to_end(&mut head)
        .is_err()
    {
        return Ok(());
    }
    if head.is_empty() || head == SQLITE_HEADER {
        Ok(())
    } else {
        Err(not_a_store(shown, "not an SQLite file"))
    }
}

fn not_a_store(path: &str, why: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::NotAStore,
        format!("{path} is not a planvm run store ({why})"),
    )
}

/// Sets `conn` up (its busy timeout, its statement cache), checks that it is a planvm
/// store this planvm can read (or an empty SQLite file, to become one), and returns its
/// schema version. NB: the first read of the file: a file that is not SQLite fails here.
fn set_up(conn: &Connection, path: &str) -> Result<i64, StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| io(path, e))?;
    // NB: room for every statement the store caches (rusqlite keeps 16 by default; one
    // evicted is prepared again at its next use).
    conn.set_prepared_statement_cache_capacity(64);
    let (app, version): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT application_id FROM pragma_application_id), \
                    (SELECT user_version FROM pragma_user_version)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => not_a_store(path, "not an SQLite file"),
            // NB: the file itself is open: what SQLite could not open are the files it
            // keeps beside it (`-wal`, `-shm`), as on a read-only file system.
            Some(rusqlite::ErrorCode::CannotOpen) => StoreError::new(
                StoreErrorKind::ReadOnly,
                format!(
                    "{path}: cannot open the files SQLite keeps beside the store (`-wal`, \
                     `-shm`): {e}"
                ),
            ),
            _ => io(path, e),
        })?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .map_err(|e| io(path, e))?;
    if app != APPLICATION_ID && (app != 0 || version != 0 || tables != 0) {
        return Err(not_a_store(path, "an SQLite file of another program"));
    }
    if version > SCHEMA_VERSION {
        return Err(not_a_store(
            path,
            &format!(
                "its schema version {version} is newer than this planvm's {SCHEMA_VERSION}; use a newer planvm"
            ),
        ));
    }
    Ok(version)
}

/// `path` as an SQLite URI (`file:`, every byte but a few percent-encoded), read as
/// `immutable` or not.
fn file_uri(path: &Path, immutable: bool) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    // NB: an absolute path gets an empty authority (`file://` then the path): `file:` and
    // a path starting `//` would read its first component as a host name.
    let mut uri = String::from(if bytes.starts_with(b"/") {
        "file://"
    } else {
        "file:"
    });
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~') {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    if immutable {
        uri.push_str("?immutable=1");
    }
    uri
}

fn io(path: &str, e: rusqlite::Error) -> StoreError {
    if let Some(why) = damage(&e) {
        return StoreError::new(StoreErrorKind::Damaged, format!("{path}: {why}"));
    }
    let message = match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => format!(
            "{path}: the store is locked by another process (waited {} s)",
            BUSY_TIMEOUT.as_secs()
        ),
        Some(rusqlite::ErrorCode::ReadOnly) => {
            return StoreError::new(
                StoreErrorKind::ReadOnly,
                format!("{path}: this process may not write the store ({e})"),
            );
        }
        _ => format!("{path}: {e}"),
    };
    StoreError::new(StoreErrorKind::Io, message)
}

/// [`io`] for a read of run `id`: damage is said to be in that run.
fn io_run(path: &str, id: &str, e: rusqlite::Error) -> StoreError {
    match damage(&e) {
        Some(why) if !why.starts_with("run `") => StoreError::new(
            StoreErrorKind::Damaged,
            format!("{path}: run `{id}`: {why}"),
        ),
        _ => io(path, e),
    }
}

/// Why `e` says the store holds what planvm cannot have written (a damaged file, a row
/// changed by hand or by bit flips), if it does: damage is exit 65 and names what is
/// damaged, never an I/O error that a retry could fix.
fn damage(e: &rusqlite::Error) -> Option<String> {
    use rusqlite::Error as E;
    const DAMAGED: &str = "the store is damaged";
    match e {
        E::FromSqlConversionFailure(_, _, inner) => Some(match inner.downcast_ref::<Damaged>() {
            Some(damaged) => damaged.to_string(),
            None => format!("a value cannot be read ({inner}): {DAMAGED}"),
        }),
        E::Utf8Error(..) | E::InvalidColumnType(..) | E::IntegralValueOutOfRange(..) => {
            Some(format!("a value cannot be read ({e}): {DAMAGED}"))
        }
        E::SqliteFailure(f, msg) => match f.code {
            rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase => {
                Some(format!(
                    "{DAMAGED} ({e}): restore it from a copy; sqlite3's `PRAGMA integrity_check` says where"
                ))
            }
            // NB: the journal's JSON read by SQLite's own functions (the views, the count
            // of a run's calls).
            _ if msg.as_deref().is_some_and(|m| m.contains("malformed JSON")) => {
                Some(format!("a journal entry is not JSON: {DAMAGED}"))
            }
            _ => None,
        },
        _ => None,
    }
}

fn json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned())
}

/// A JSON column of a run's row: NULL is None; anything else must parse (a value read
/// as null or as the default instead would change what a resumed run does, or say).
fn json_column<T: serde::de::DeserializeOwned>(
    r: &rusqlite::Row<'_>,
    idx: usize,
    what: &str,
) -> rusqlite::Result<Option<T>> {
    let Some(text) = r.get::<_, Option<String>>(idx)? else {
        return Ok(None);
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            idx,
            rusqlite::types::Type::Text,
            Box::new(Damaged(format!(
                "run `{}`: its stored {what} cannot be read ({e}): the store is damaged",
                row_id(r)
            ))),
        )
    })
}

/// A row whose content cannot be what planvm wrote.
#[derive(Debug)]
struct Damaged(String);

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Damaged {}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The calls the run `$run` (an SQL expression) committed, counted from its journal.
/// NB: distinct steps: a resumed run may commit a call again.
macro_rules! count_calls {
    ($run:literal) => {
        concat!(
            "(SELECT count(DISTINCT c.value) FROM journal j, json_each(j.entry) p, \
              json_each(p.value, '$.committed') c WHERE j.run = ",
            $run,
            ")"
        )
    };
}

/// The tokens the answers in run `$run`'s journal cost, as `{"input_tokens",
/// "output_tokens"}`; NULL when none reported any.
macro_rules! sum_usage {
    ($run:literal) => {
        concat!(
            "(SELECT CASE WHEN count(*) = 0 THEN NULL ELSE json_object('input_tokens', \
              sum(json_extract(a.value, '$.usage.input_tokens')), 'output_tokens', \
              sum(json_extract(a.value, '$.usage.output_tokens')), 'cost', \
              sum(json_extract(a.value, '$.usage.cost'))) END \
              FROM journal j, json_each(j.entry) p, json_each(p.value, '$.answered') a \
              WHERE j.run = ",
            $run,
            " AND json_type(a.value, '$.usage') = 'object')"
        )
    };
}

// NB: a finished run's count and tokens are in its row; a run still going is counted from
// its journal.
const RUN_COLUMNS: &str = concat!(
    "id, status, plan, program, parent, branch_seq, created_at, updated_at, steps, \
     coalesce(tool_calls, ",
    count_calls!("runs.id"),
    "), final_answer, error, presets, limits, owner, lease_until, question, \
     CASE WHEN status = 'running' THEN ",
    sum_usage!("runs.id"),
    " ELSE usage END, planner_usage"
);

/// The id of the run `r` is the row of, as far as it can be read (for errors).
fn row_id(r: &rusqlite::Row<'_>) -> String {
    match r.get_ref(0) {
        Ok(rusqlite::types::ValueRef::Text(t)) => String::from_utf8_lossy(t).into_owned(),
        _ => "?".to_owned(),
    }
}

fn run_info(r: &rusqlite::Row<'_>, now: i64) -> rusqlite::Result<RunInfo> {
    run_columns(r, now).map_err(|e| match damage(&e) {
        Some(why) if !why.starts_with("run `") => rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            Box::new(Damaged(format!("run `{}`: {why}", row_id(r)))),
        ),
        _ => e,
    })
}

fn run_columns(r: &rusqlite::Row<'_>, now: i64) -> rusqlite::Result<RunInfo> {
    let stored: String = r.get(1)?;
    let owner: Option<String> = r.get(14)?;
    let lease: Option<i64> = r.get(15)?;
    let status = crate::rows::run_status(&stored, owner.as_deref(), lease, now);
    Ok(RunInfo {
        id: r.get(0)?,
        status,
        plan: r.get(2)?,
        program: r.get(3)?,
        parent: r.get(4)?,
        branch_seq: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        steps: u64::try_from(r.get::<_, i64>(8)?).unwrap_or(0),
        tool_calls: u64::try_from(r.get::<_, i64>(9)?).unwrap_or(0),
        final_answer: json_column(r, 10, "final answer")?,
        error: json_column(r, 11, "error")?,
        presets: json_column(r, 12, "presets")?.unwrap_or_default(),
        limits: json_column(r, 13, "limits")?.unwrap_or_default(),
        owner,
        question: json_column(r, 16, "question")?,
        usage: crate::rows::add_usage(
            json_column(r, 17, "usage")?,
            json_column(r, 18, "planner usage")?,
        ),
    })
}

/// The statements that take the runs ready for a worker: up to `?2` of them at `?1`,
/// oldest first; then each given its token (`?2`) and lease (`?3`, at `?4`).
const READY_RUNS: (&str, &str) = (
    "SELECT id FROM runs WHERE status = 'running' \
     AND (owner IS NULL OR lease_until IS NULL OR lease_until < ?1) \
     ORDER BY created_at, id LIMIT ?2",
    "UPDATE runs SET owner = ?2, lease_until = ?3, updated_at = ?4 WHERE id = ?1",
);

/// [`READY_RUNS`] for goals: queued, or open under a lease that lapsed.
const READY_GOALS: (&str, &str) = (
    "SELECT id FROM goals WHERE status = 'open' AND (owner IS NULL OR lease_until < ?1) \
     ORDER BY created_at, id LIMIT ?2",
    "UPDATE goals SET owner = ?2, lease_until = ?3, updated_at = ?4 WHERE id = ?1",
);

impl SqliteStore {
    /// Takes up to `n` rows that `(select, update)` find ready ([`READY_RUNS`]), each
    /// held from now on by a fresh `owner()` under a lease.
    fn reserve_from(
        &mut self,
        (select, update): (&str, &str),
        n: usize,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Result<Vec<(String, Owner)>, StoreError> {
        let path = self.path.clone();
        let now = now_ms();
        let tx = self.write()?;
        let ids: Vec<String> = tx
            .prepare_cached(select)
            .and_then(|mut st| {
                st.query_map(params![now, to_i64(n as u64)], |r| r.get(0))?
                    .collect()
            })
            .map_err(|e| io(&path, e))?;
        let mut taken = Vec::with_capacity(ids.len());
        for id in ids {
            let o = owner();
            tx.prepare_cached(update)
                .and_then(|mut st| st.execute(params![id, o.0, now + crate::lease_ms(), now]))
                .map_err(|e| io(&path, e))?;
            taken.push((id, o));
        }
        tx.commit().map_err(|e| io(&path, e))?;
        Ok(taken)
    }
}

impl RunStore for SqliteStore {
    /// Lists the runs whose ids start with `prefix` (a batch's runs), in the order they
    /// were created; a damaged row of another run does not stop it. NB: a range of the
    /// primary key, not a scan: ids hold only `[A-Za-z0-9._-]`, all below `~`.
    fn runs_under(&self, prefix: &str) -> Result<Vec<RunInfo>, StoreError> {
        let now = now_ms();
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs \
                 WHERE id >= ?1 AND id < ?1 || '~' AND substr(id, 1, ?2) = ?1 \
                 ORDER BY created_at, id"
            ))
            .map_err(|e| self.io(e))?;
        let rows = stmt
            .query_map(params![prefix, to_i64(prefix.len() as u64)], |r| {
                run_info(r, now)
            })
            .map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }

    /// Fails when the store was read as it is (see [`SqliteStore::open_to_read`]) and a
    /// process wrote it since it was opened: what was read may mix two states of it. A
    /// caller that read several things checks this before it shows them.
    fn unchanged(&self) -> Result<(), StoreError> {
        match &self.immutable {
            Some(stamp) if file_stamp(&self.file) != *stamp => Err(StoreError::new(
                StoreErrorKind::Io,
                format!(
                    "{}: a process wrote the store while it was read; run the command again",
                    self.path
                ),
            )),
            _ => Ok(()),
        }
    }

    fn name(&self) -> &str {
        &self.path
    }

    fn prune(&mut self, before: i64, keep_failed: bool) -> Result<u64, StoreError> {
        let path = self.path.clone();
        let tx = self.write()?;
        let failed = !keep_failed;
        let mut gone = 0;
        for table in [
            "journal WHERE run",
            "checkpoints WHERE run",
            "runs WHERE id",
        ] {
            gone = tx
                .execute(
                    &format!(
                        "DELETE FROM {table} IN ({})",
                        crate::pruned_runs!("?1", "?2")
                    ),
                    params![before, failed],
                )
                .map_err(|e| io(&path, e))?;
        }
        tx.commit().map_err(|e| io(&path, e))?;
        Ok(gone as u64)
    }

    fn submit(&mut self, runs: &[NewRun<'_>]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let mut programs = std::mem::take(&mut self.programs);
        let mut new = Vec::new();
        let created = self.write().and_then(|tx| {
            for run in runs {
                new.extend(create(&tx, &path, run, None, &mut programs, None)?.0);
            }
            tx.commit().map_err(|e| io(&path, e))
        });
        if created.is_ok() {
            programs.stored.extend(new);
        }
        self.programs = programs;
        created
    }

    fn reserve(
        &mut self,
        n: usize,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Result<Vec<(String, Owner)>, StoreError> {
        self.reserve_from(READY_RUNS, n, owner)
    }

    /// NB: in one read transaction: a batch checks each of its runs' ids before it
    /// starts, and a lookup in a transaction of its own took the WAL's read lock each time.
    fn first_taken(&mut self, ids: &[&str]) -> Result<Option<usize>, StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| io(&path, e))?;
        let mut taken = tx
            .prepare_cached("SELECT 1 FROM runs WHERE id = ?1")
            .map_err(|e| io(&path, e))?;
        for (i, id) in ids.iter().enumerate() {
            if taken.exists([id]).map_err(|e| io(&path, e))? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    fn create_run(&mut self, run: &NewRun<'_>, owner: &Owner) -> Result<(), StoreError> {
        let path = self.path.clone();
        let mut programs = std::mem::take(&mut self.programs);
        let created = self.write().and_then(|tx| {
            let (new, _) = create(&tx, &path, run, Some(owner), &mut programs, None)?;
            tx.commit().map_err(|e| io(&path, e))?;
            Ok(new)
        });
        programs.stored.extend(created.iter().flatten().cloned());
        self.programs = programs;
        created.map(drop)
    }

    fn claim(&mut self, id: &str, owner: &Owner, seen: Seen) -> Result<(), StoreError> {
        self.claim_run(id, owner, seen)
    }

    fn release(&mut self, id: &str, owner: &Owner) -> Result<(), StoreError> {
        let path = self.path.clone();
        self.conn
            .execute(
                "UPDATE runs SET owner = NULL, lease_until = NULL \
                 WHERE id = ?1 AND owner = ?2 AND status = 'running'",
                params![id, owner.0],
            )
            .map(drop)
            .map_err(|e| io(&path, e))
    }

    fn cancel(&mut self, id: &str, error: &Value) -> Result<bool, StoreError> {
        let path = self.path.clone();
        let tx = self.write()?;
        let status: Option<String> = tx
            .query_row("SELECT status FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(|e| io(&path, e))?;
        match status.as_deref() {
            None => return Err(unknown_run(id)),
            Some("running" | "needs_input") => {}
            Some(_) => return Ok(false),
        }
        tx.execute(
            concat!(
                "UPDATE runs SET status = 'failed', owner = NULL, lease_until = NULL, \
                                 question = NULL, updated_at = ?2, error = ?3, tool_calls = ",
                count_calls!("?1"),
                " WHERE id = ?1"
            ),
            params![id, now_ms(), json(error)],
        )
        .map_err(|e| io(&path, e))?;
        // NB: no commit point of the run's can follow (its holder's is refused): its
        // calls in flight end here.
        tx.execute(
            "INSERT INTO journal (run, seq, at, entry) \
             SELECT ?1, coalesce(max(seq), -1) + 1, ?2, ?3 FROM journal WHERE run = ?1",
            params![id, now_ms(), crate::rows::CANCEL_ENTRY],
        )
        .map_err(|e| io(&path, e))?;
        tx.commit().map_err(|e| io(&path, e))?;
        Ok(true)
    }

    fn journal_head(&self, id: &str) -> Result<Option<i64>, StoreError> {
        journal_head(&self.conn, id).map_err(|e| self.io(e))
    }

    fn renew(&mut self, owners: &[Owner]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let until = now_ms() + crate::lease_ms();
        let tx = self.write()?;
        for owner in owners {
            for sql in [
                "UPDATE runs SET lease_until = ?2 WHERE owner = ?1 AND status = 'running'",
                "UPDATE goals SET lease_until = ?2 WHERE owner = ?1 AND status = 'open'",
            ] {
                tx.prepare_cached(sql)
                    .and_then(|mut st| st.execute(params![owner.0, until]))
                    .map_err(|e| io(&path, e))?;
            }
        }
        tx.commit().map_err(|e| io(&path, e))
    }

    fn commit(&mut self, id: &str, owner: &Owner, point: &CommitPoint) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.write()?;
        commit(&tx, &path, id, owner, point)?;
        tx.commit().map_err(|e| io(&path, e))
    }

    fn write_group(&mut self, writes: &[&StoreWrite]) -> Vec<Result<Wrote, StoreError>> {
        let mut programs = std::mem::take(&mut self.programs);
        let mut new_programs = Vec::new();
        let results = self.write_group_with(writes, &mut programs, &mut new_programs);
        if results.iter().any(Result::is_ok) {
            programs.stored.extend(new_programs);
        }
        self.programs = programs;
        results
    }

    fn run(&self, id: &str) -> Result<RunInfo, StoreError> {
        let now = now_ms();
        self.conn
            .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))
            .and_then(|mut st| st.query_row([id], |r| run_info(r, now)))
            .optional()
            .map_err(|e| io_run(&self.path, id, e))?
            .ok_or_else(|| unknown_run(id))
    }

    fn runs(&self) -> Result<Vec<RunInfo>, StoreError> {
        let now = now_ms();
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at, id"
            ))
            .map_err(|e| self.io(e))?;
        let rows = stmt
            .query_map([], |r| run_info(r, now))
            .map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| {
            let e = self.io(e);
            match self.entry_not_json() {
                Some((id, seq)) if e.kind == StoreErrorKind::Damaged => StoreError::new(
                    StoreErrorKind::Damaged,
                    format!(
                        "{}: run `{id}`: its journal entry {seq} is not JSON: the store is damaged",
                        self.path
                    ),
                ),
                _ => e,
            }
        })
    }

    fn runs_before(
        &self,
        before: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<RunInfo>, StoreError> {
        let now = now_ms();
        let select = format!("SELECT {RUN_COLUMNS} FROM runs");
        self.newest_before(&select, before, limit, |r| run_info(r, now))
    }

    fn program(&self, hash: &str) -> Result<StoredProgram, StoreError> {
        let program = self
            .conn
            .query_row(
                "SELECT hash, source, pbc FROM programs WHERE hash = ?1",
                [hash],
                |r| {
                    Ok(StoredProgram {
                        hash: r.get(0)?,
                        source: r.get(1)?,
                        pbc: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.io(e))?;
        program.ok_or_else(|| {
            StoreError::new(
                StoreErrorKind::Damaged,
                format!(
                    "{}: the program {hash} of a run is missing: the store is damaged",
                    self.path
                ),
            )
        })
    }

    fn steps(&self, id: &str) -> Result<Vec<StepRow>, StoreError> {
        Ok(crate::rows::steps(self.entries(id)?))
    }

    fn calls(&self, id: &str) -> Result<Vec<CallRow>, StoreError> {
        Ok(crate::rows::calls(self.entries(id)?))
    }

    fn fold_journal(&self, id: &str, fold: &mut JournalFold) -> Result<(), StoreError> {
        let after = fold.head().unwrap_or(-1);
        self.entries_after(id, after, |seq, at, points| fold.apply(seq, at, points))
    }

    fn run_journal(&self, id: &str, fold: &mut JournalFold) -> Result<RunInfo, StoreError> {
        // NB: one read transaction: one state of the store, and the WAL's read lock taken
        // once rather than for each statement (an event stream looks often).
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| io_run(&self.path, id, e))?;
        let row = self.run(id)?;
        let after = fold.head().unwrap_or(-1);
        self.journal_rows(id, after, |seq, at, points| fold.apply(seq, at, points))?;
        drop(tx);
        Ok(row)
    }

    fn checkpoint(&self, id: &str) -> Result<Option<(u64, String)>, StoreError> {
        self.exists(id)?;
        self.conn
            .query_row(
                "SELECT steps, state FROM checkpoints WHERE run = ?1",
                [id],
                |r| Ok((u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0), r.get(1)?)),
            )
            .optional()
            .map_err(|e| io_run(&self.path, id, e))
    }

    fn create_goal(&mut self, goal: &NewGoal<'_>, owner: &Owner) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.write()?;
        insert_goal(&tx, &path, goal, Some(owner))?;
        tx.commit().map_err(|e| io(&path, e))
    }

    fn submit_goals(&mut self, goals: &[NewGoal<'_>]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.write()?;
        for goal in goals {
            insert_goal(&tx, &path, goal, None)?;
        }
        tx.commit().map_err(|e| io(&path, e))
    }

    fn reserve_goals(
        &mut self,
        n: usize,
        owner: &mut dyn FnMut() -> Owner,
    ) -> Result<Vec<(String, Owner)>, StoreError> {
        self.reserve_from(READY_GOALS, n, owner)
    }

    fn end_goal(
        &mut self,
        id: &str,
        by: Option<&Owner>,
        outcome: Result<&Value, &Value>,
    ) -> Result<bool, StoreError> {
        let (status, answer, error) = match outcome {
            Ok(answer) => ("answered", Some(json(answer)), None),
            Err(error) => ("failed", None, Some(json(error))),
        };
        let changed = self
            .conn
            .execute(
                "UPDATE goals SET status = ?2, answer = ?3, error = ?4, updated_at = ?5, \
                 owner = NULL, lease_until = NULL \
                 WHERE id = ?1 AND (status = 'open' OR status = 'needs_input') \
                 AND (?6 IS NULL OR owner = ?6)",
                params![id, status, answer, error, now_ms(), by.map(|o| &o.0)],
            )
            .map_err(|e| self.io(e))?;
        if changed == 0 && self.goal(id)?.is_none() {
            return Err(unknown_run(id));
        }
        Ok(changed == 1)
    }

    fn take_goal(&mut self, id: &str, owner: &Owner) -> Result<bool, StoreError> {
        let path = self.path.clone();
        let tx = self.write()?;
        let held: Option<(Option<String>, Option<i64>)> = tx
            .query_row(
                "SELECT owner, lease_until FROM goals WHERE id = ?1 AND status = 'open'",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| io(&path, e))?;
        let Some((held, lease)) = held else {
            return Ok(false);
        };
        let now = now_ms();
        if held.is_some_and(|h| crate::rows::holds_goal(&h, lease, now)) {
            return Ok(false);
        }
        tx.execute(
            "UPDATE goals SET owner = ?2, updated_at = ?3, lease_until = ?4 WHERE id = ?1",
            params![id, owner.0, now, now + crate::lease_ms()],
        )
        .map_err(|e| io(&path, e))?;
        tx.commit().map_err(|e| io(&path, e))?;
        Ok(true)
    }

    fn goal_needs_input(&mut self, id: &str, run: &str) -> Result<bool, StoreError> {
        // NB: one statement: an answer that came between the run's end and this finds the
        // run going on again, and the goal is left to the process that answered it.
        let changed = self
            .conn
            .execute(
                "UPDATE goals SET status = 'needs_input', updated_at = ?2, owner = NULL, \
                 lease_until = NULL WHERE id = ?1 AND status = 'open' \
                 AND EXISTS (SELECT 1 FROM runs WHERE id = ?3 AND status = 'needs_input')",
                params![id, now_ms(), run],
            )
            .map_err(|e| self.io(e))?;
        Ok(changed == 1)
    }

    fn reopen_goal(&mut self, id: &str, owner: &Owner) -> Result<bool, StoreError> {
        let changed = self
            .conn
            .execute(
                "UPDATE goals SET status = 'open', updated_at = ?3, owner = ?2, lease_until = ?4 \
                 WHERE id = ?1 AND (status = 'needs_input' OR status = 'open')",
                params![id, owner.0, now_ms(), now_ms() + crate::lease_ms()],
            )
            .map_err(|e| self.io(e))?;
        Ok(changed == 1)
    }

    fn goal(&self, id: &str) -> Result<Option<GoalInfo>, StoreError> {
        self.conn
            .prepare_cached(&format!("SELECT {GOAL_COLUMNS} FROM goals WHERE id = ?1"))
            .and_then(|mut st| st.query_row([id], goal_info))
            .optional()
            .map_err(|e| io_run(&self.path, id, e))
    }

    fn goals(&self) -> Result<Vec<GoalInfo>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {GOAL_COLUMNS} FROM goals ORDER BY created_at, id"
            ))
            .map_err(|e| self.io(e))?;
        let rows = stmt.query_map([], goal_info).map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }

    fn goals_before(
        &self,
        before: Option<(i64, &str)>,
        limit: usize,
    ) -> Result<Vec<GoalInfo>, StoreError> {
        let select = format!("SELECT {GOAL_COLUMNS} FROM goals");
        self.newest_before(&select, before, limit, goal_info)
    }

    fn session_goals(&self, id: &str) -> Result<Vec<GoalInfo>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {GOAL_COLUMNS} FROM goals WHERE session = ?1 ORDER BY created_at, id"
            ))
            .map_err(|e| self.io(e))?;
        let rows = stmt.query_map([id], goal_info).map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }

    fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT session, count(*), min(created_at), max(created_at) FROM goals \
                 WHERE session IS NOT NULL GROUP BY session ORDER BY min(created_at), session",
            )
            .map_err(|e| self.io(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SessionInfo {
                    id: r.get(0)?,
                    goals: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                    created_at: r.get(2)?,
                    updated_at: r.get(3)?,
                })
            })
            .map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }

    fn summary(&self, id: &str) -> Result<Option<(String, String)>, StoreError> {
        self.conn
            .query_row(
                "SELECT upto, summary FROM summaries WHERE session = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.io(e))
    }

    fn save_summary(&mut self, id: &str, upto: &str, summary: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO summaries (session, upto, summary, updated_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (session) DO UPDATE SET upto = ?2, summary = ?3, updated_at = ?4",
                params![id, upto, summary, now_ms()],
            )
            .map(drop)
            .map_err(|e| self.io(e))
    }

    fn create_eval(&mut self, id: &str, dataset: &str) -> Result<(), StoreError> {
        let inserted = self
            .conn
            .execute(
                "INSERT INTO evals (id, dataset, created_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (id) DO NOTHING",
                params![id, dataset, now_ms()],
            )
            .map_err(|e| self.io(e))?;
        if inserted == 0 {
            return Err(StoreError::new(
                StoreErrorKind::DuplicateRun,
                format!("evaluation `{id}` is already in this store"),
            ));
        }
        Ok(())
    }

    fn save_eval_case(&mut self, eval: &str, case: &EvalCase) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO eval_cases (eval, case_id, goal, verdict, score, reason, report) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (eval, case_id) DO UPDATE SET \
                 goal = ?3, verdict = ?4, score = ?5, reason = ?6, report = ?7",
                params![
                    eval,
                    case.case_id,
                    case.goal,
                    case.verdict,
                    case.score,
                    case.reason,
                    case.report.to_string()
                ],
            )
            .map(drop)
            .map_err(|e| self.io(e))
    }

    fn end_eval(&mut self, id: &str, summary: &Value) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE evals SET summary = ?2 WHERE id = ?1",
                params![id, summary.to_string()],
            )
            .map(drop)
            .map_err(|e| self.io(e))
    }

    fn evals(&self) -> Result<Vec<EvalInfo>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT e.id, e.dataset, e.created_at, e.summary, \
                 (SELECT count(*) FROM eval_cases c WHERE c.eval = e.id), \
                 (SELECT count(*) FROM eval_cases c WHERE c.eval = e.id AND c.verdict = 'pass') \
                 FROM evals e ORDER BY e.created_at, e.id",
            )
            .map_err(|e| self.io(e))?;
        let rows = stmt
            .query_map([], |r| {
                let summary: Option<String> = r.get(3)?;
                Ok(EvalInfo {
                    id: r.get(0)?,
                    dataset: r.get(1)?,
                    created_at: r.get(2)?,
                    summary: summary.and_then(|s| serde_json::from_str(&s).ok()),
                    cases: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
                    passed: u64::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
                })
            })
            .map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }

    fn eval_cases(&self, id: &str) -> Result<Vec<EvalCase>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {EVAL_CASE_COLUMNS} FROM eval_cases WHERE eval = ?1 ORDER BY rowid"
            ))
            .map_err(|e| self.io(e))?;
        let rows = stmt.query_map([id], eval_case).map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }

    fn eval_case_of_goal(&self, goal: &str) -> Result<Option<(String, EvalCase)>, StoreError> {
        self.conn
            .query_row(
                &format!(
                    "SELECT eval, {EVAL_CASE_COLUMNS} FROM eval_cases WHERE goal = ?1 \
                     ORDER BY rowid DESC LIMIT 1"
                ),
                [goal],
                |r| {
                    let eval: String = r.get(0)?;
                    let case = eval_case_at(r, 1)?;
                    Ok((eval, case))
                },
            )
            .optional()
            .map_err(|e| self.io(e))
    }

    fn set_planner_usage(&mut self, run: &str, usage: &plan_llm::Usage) -> Result<(), StoreError> {
        let usage = serde_json::json!(usage).to_string();
        self.conn
            .execute(
                "UPDATE runs SET planner_usage = ?2 WHERE id = ?1",
                params![run, usage],
            )
            .map(drop)
            .map_err(|e| self.io(e))
    }

    fn set_feedback(&mut self, run: &str, feedback: &Feedback) -> Result<(), StoreError> {
        let known: bool = self
            .conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?1)",
                [run],
                |r| r.get(0),
            )
            .map_err(|e| self.io(e))?;
        if !known {
            return Err(StoreError::new(
                StoreErrorKind::UnknownRun,
                format!("no run `{run}` in this store"),
            ));
        }
        self.conn
            .execute(
                "INSERT INTO feedback (run, verdict, note, updated_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (run) DO UPDATE SET verdict = ?2, note = ?3, updated_at = ?4",
                params![run, feedback.verdict, feedback.note, now_ms()],
            )
            .map(drop)
            .map_err(|e| self.io(e))
    }

    fn feedback(&self, run: &str) -> Result<Option<Feedback>, StoreError> {
        self.conn
            .query_row(
                "SELECT verdict, note, updated_at FROM feedback WHERE run = ?1",
                [run],
                |r| {
                    Ok(Feedback {
                        verdict: r.get(0)?,
                        note: r.get(1)?,
                        updated_at: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(|e| self.io(e))
    }

    fn save_goal_round(&mut self, goal: &str, round: &GoalRound) -> Result<(), StoreError> {
        if round.round == 0 {
            self.conn
                .execute("DELETE FROM goal_rounds WHERE goal = ?1", [goal])
                .map_err(|e| self.io(e))?;
        }
        self.conn
            .execute(
                "INSERT INTO goal_rounds (goal, round, kind, reply, diagnostics, planner_error, \
                 run, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT (goal, round) DO UPDATE SET kind = ?3, reply = ?4, \
                 diagnostics = ?5, planner_error = ?6, run = ?7, created_at = ?8",
                params![
                    goal,
                    i64::try_from(round.round).unwrap_or(i64::MAX),
                    round.kind,
                    round.reply,
                    json(&round.diagnostics),
                    round.planner_error,
                    round.run,
                    round.created_at
                ],
            )
            .map(drop)
            .map_err(|e| self.io(e))
    }

    fn goal_rounds(&self, goal: &str) -> Result<Vec<GoalRound>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT round, kind, reply, diagnostics, planner_error, run, created_at \
                 FROM goal_rounds WHERE goal = ?1 ORDER BY round",
            )
            .map_err(|e| self.io(e))?;
        let rows = stmt
            .query_map([goal], |r| {
                let diagnostics: String = r.get(3)?;
                Ok(GoalRound {
                    round: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                    kind: r.get(1)?,
                    reply: r.get(2)?,
                    diagnostics: serde_json::from_str(&diagnostics).unwrap_or(Value::Null),
                    planner_error: r.get(4)?,
                    run: r.get(5)?,
                    created_at: r.get(6)?,
                })
            })
            .map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }

    fn children(&self, id: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT id FROM runs WHERE parent = ?1 ORDER BY created_at, id")
            .map_err(|e| self.io(e))?;
        let rows = stmt.query_map([id], |r| r.get(0)).map_err(|e| self.io(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.io(e))
    }
}

const EVAL_CASE_COLUMNS: &str = "case_id, goal, verdict, score, reason, report";

fn eval_case(r: &rusqlite::Row<'_>) -> rusqlite::Result<EvalCase> {
    eval_case_at(r, 0)
}

/// An `eval_cases` row whose columns ([`EVAL_CASE_COLUMNS`]) start at `at`.
fn eval_case_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<EvalCase> {
    let report: String = r.get(at + 5)?;
    Ok(EvalCase {
        case_id: r.get(at)?,
        goal: r.get(at + 1)?,
        verdict: r.get(at + 2)?,
        score: r.get(at + 3)?,
        reason: r.get(at + 4)?,
        // NB: written by this store from a JSON value; damaged text reads as null.
        report: serde_json::from_str(&report).unwrap_or(Value::Null),
    })
}

const GOAL_COLUMNS: &str = "id, goal, response_format, status, created_at, updated_at, answer, \
                            error, owner, request, session, lease_until";

fn goal_info(r: &rusqlite::Row<'_>) -> rusqlite::Result<GoalInfo> {
    let owner: Option<String> = r.get(8)?;
    let stored: String = r.get(3)?;
    let status = crate::rows::goal_status(&stored, owner.as_deref(), r.get(11)?, now_ms());
    Ok(GoalInfo {
        id: r.get(0)?,
        goal: r.get(1)?,
        response_format: json_column(r, 2, "response format")?,
        status,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
        answer: json_column(r, 6, "answer")?,
        error: json_column(r, 7, "error")?,
        owner,
        request: json_column(r, 9, "request")?.unwrap_or_default(),
        session: r.get(10)?,
    })
}

/// Inserts goal `goal`, held by `owner` under a lease, or queued (held by nobody) when
/// None. A goal's id is its first run's: taken by a run, it is taken.
fn insert_goal(
    tx: &rusqlite::Connection,
    path: &str,
    goal: &NewGoal<'_>,
    owner: Option<&Owner>,
) -> Result<(), StoreError> {
    let now = now_ms();
    let lease = owner.map_or(crate::QUEUED, |_| now + crate::lease_ms());
    let inserted = tx
        .prepare_cached(
            "INSERT INTO goals (id, goal, response_format, request, status, created_at, updated_at, owner, session, lease_until) \
             SELECT ?1, ?2, ?3, ?6, 'open', ?4, ?4, ?5, ?7, ?8 \
             WHERE NOT EXISTS (SELECT 1 FROM runs WHERE id = ?1) \
             ON CONFLICT (id) DO NOTHING",
        )
        .and_then(|mut st| {
            st.execute(params![
                goal.id,
                goal.goal,
                goal.response_format.map(json),
                now,
                owner.map(|o| &o.0),
                json(goal.request),
                goal.session,
                lease
            ])
        })
        .map_err(|e| io(path, e))?;
    if inserted == 0 {
        return Err(StoreError::new(
            StoreErrorKind::DuplicateRun,
            format!("`{}` is already a goal or a run of this store", goal.id),
        ));
    }
    Ok(())
}

/// Stores the program (once per hash) and creates the run, inside `tx`, with its `first`
/// commit point if given (its end, if any, in the run's row); returns its program's hash
/// if the program was not known to be stored (it is now, once `tx` commits), and what the
/// first point wrote. A taken id is
/// refused with nothing written but the program (which is content-addressed, and may be
/// shared by any run).
fn create(
    tx: &rusqlite::Connection,
    path: &str,
    run: &NewRun<'_>,
    owner: Option<&Owner>,
    programs: &mut Programs,
    first: Option<&CommitPoint>,
) -> Result<(Option<String>, Wrote), StoreError> {
    let hash = programs.hash(run.pbc);
    let now = now_ms();
    let new = !programs.stored.contains(&hash);
    if new {
        tx.prepare_cached("INSERT OR IGNORE INTO programs (hash, source, pbc) VALUES (?1, ?2, ?3)")
            .and_then(|mut st| st.execute(params![hash, run.source, run.pbc]))
            .map_err(|e| io(path, e))?;
    }
    // NB: cached statements: a batch creates a run per line, and preparing each
    // statement anew was a third of a creation. A taken id inserts nothing (and only its
    // program, which any run may share, may have been stored above).
    let end = first.and_then(|p| p.end.as_ref());
    let status = end.map_or("running", RunEnd::status);
    // NB: as the point's own write would leave the row (see `write_point`).
    let steps = first
        .filter(|p| p.end.is_some() || p.state.is_some())
        .map_or(0, |p| to_i64(p.total_steps));
    let inserted = tx
        .prepare_cached(
            "INSERT INTO runs (id, program, plan, parent, branch_seq, presets, limits, status, \
                               created_at, updated_at, owner, lease_until, steps, final_answer, \
                               error, tool_calls, question) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16) \
             ON CONFLICT (id) DO NOTHING",
        )
        .and_then(|mut st| {
            st.execute(params![
                run.id,
                hash,
                run.plan,
                run.parent.map(|(p, _)| p),
                run.parent.map(|(_, s)| s),
                json(run.presets),
                json(run.limits),
                status,
                now,
                owner.map(|o| o.0.as_str()),
                match owner {
                    None => Some(crate::QUEUED),
                    Some(_) => end.is_none().then_some(now + crate::lease_ms()),
                },
                steps,
                end.filter(|e| e.ok).map(|e| json(&e.final_answer)),
                end.and_then(|e| e.error.as_ref()).map(json),
                end.and_then(|e| e.tool_calls).map(to_i64),
                end.and_then(|e| e.question.as_ref()).map(json)
            ])
        })
        .map_err(|e| io(path, e))?;
    if inserted == 0 {
        return Err(StoreError::new(
            StoreErrorKind::DuplicateRun,
            format!(
                "run `{}` already exists in this store; `planvm resume {}` continues it",
                run.id, run.id
            ),
        ));
    }
    let wrote = match first {
        Some(point) => write_point(tx, path, run.id, 0, point, false)?,
        None => Wrote::default(),
    };
    Ok((new.then_some(hash), wrote))
}

/// Writes a commit point, inside `tx`. A run this process does not hold is refused
/// before anything is written.
fn commit(
    tx: &rusqlite::Connection,
    path: &str,
    id: &str,
    owner: &Owner,
    point: &CommitPoint,
) -> Result<Wrote, StoreError> {
    // NB: fencing. A process that lost the run (paused past its lease, then resumed
    // elsewhere) must not write into it: checked under the write lock. The number of the
    // run's last journal row comes with it (one statement, not two, per commit).
    let (holds, head): (Option<i64>, Option<i64>) = tx
        .prepare_cached(
            "SELECT (SELECT 1 FROM runs WHERE id = ?1 AND owner = ?2 AND status = 'running'), \
                    (SELECT max(seq) FROM journal WHERE run = ?1)",
        )
        .and_then(|mut st| st.query_row(params![id, owner.0], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(|e| io(path, e))?;
    if holds.is_none() {
        return Err(StoreError::new(
            StoreErrorKind::Busy,
            format!(
                "run `{id}` is no longer held by this process (it was cancelled, another process took it over, or it was not created)"
            ),
        ));
    }
    // NB: the number of the point's journal row is read above: an `INSERT ... SELECT`
    // from the table it inserts into copies the selected rows to a temporary table first.
    write_point(tx, path, id, head.map_or(0, |n| n + 1), point, true)
}

/// Writes a commit point of a run this process holds, inside `tx`: its journal row
/// (numbered `seq`), its state, and (`update_run`) its step count or end in the run's row.
fn write_point(
    tx: &rusqlite::Connection,
    path: &str,
    id: &str,
    seq: i64,
    point: &CommitPoint,
    update_run: bool,
) -> Result<Wrote, StoreError> {
    let mut wrote = Wrote::default();
    if let Some(entry) = point.journal_entry()? {
        // NB: one row per commit point, however many calls and steps it holds.
        let at = now_ms();
        tx.prepare_cached("INSERT INTO journal (run, seq, at, entry) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut st| st.execute(params![id, seq, at, entry]))
            .map_err(|e| io(path, e))?;
        wrote.entry = Some((seq, at));
    }
    if let Some((steps, state)) = &point.state {
        tx.prepare_cached(
            "INSERT OR REPLACE INTO checkpoints (run, steps, state) VALUES (?1, ?2, ?3)",
        )
        .and_then(|mut st| st.execute(params![id, to_i64(*steps), state]))
        .map_err(|e| io(path, e))?;
    }
    if !update_run {
        return Ok(wrote);
    }
    // NB: the run's row only with a saved state or at the end: one page less per
    // commit point (its step count and update time lag by at most a checkpoint).
    let steps = to_i64(point.total_steps);
    if let Some(end) = &point.end {
        let status = end.status();
        // NB: counted here (after this point's journal row) only when the journal could
        // not count them: a resumed run.
        tx.prepare_cached(concat!(
            "UPDATE runs SET steps = ?2, updated_at = ?3, status = ?4, final_answer = ?5, \
                             error = ?6, question = ?8, lease_until = NULL, tool_calls = coalesce(?7, ",
            count_calls!("?1"),
            "), usage = CASE WHEN ?7 IS NULL THEN ",
            sum_usage!("?1"),
            " ELSE ?9 END WHERE id = ?1"
        ))
        .and_then(|mut st| {
            st.execute(params![
                id,
                steps,
                now_ms(),
                status,
                end.ok.then(|| json(&end.final_answer)),
                end.error.as_ref().map(json),
                end.tool_calls.map(to_i64),
                end.question.as_ref().map(json),
                end.usage.as_ref().map(json)
            ])
        })
        .map_err(|e| io(path, e))?;
    } else if point.state.is_some() {
        tx.prepare_cached("UPDATE runs SET steps = ?2, updated_at = ?3 WHERE id = ?1")
            .and_then(|mut st| st.execute(params![id, steps, now_ms()]))
            .map_err(|e| io(path, e))?;
    }
    Ok(wrote)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store read as it is, without locks, says when a process wrote it meanwhile.
    #[test]
    fn a_store_read_without_locks_tells_a_write_since() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        drop(SqliteStore::open(&path, Durability::Normal).unwrap());
        let reader = SqliteStore::open_read_only(&path).unwrap();
        assert!(reader.immutable.is_some(), "no -wal: read as it is");
        assert_eq!(reader.runs().unwrap().len(), 0);
        reader.unchanged().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut writer = SqliteStore::open(&path, Durability::Normal).unwrap();
        let run = crate::OwnedNewRun {
            id: "r".into(),
            plan: "plan.json".into(),
            source: None,
            pbc: vec![1],
            presets: serde_json::Map::new(),
            limits: plan_vm::Limits::default(),
            parent: None,
        };
        writer
            .create_run(&run.borrow(), &crate::Owner::this_process())
            .unwrap();
        drop(writer);
        let e = reader.unchanged().unwrap_err();
        assert!(e.message.contains("run the command again"), "{}", e.message);
    }

    /// A store's path, whatever its characters, names the same file as a URI.
    #[test]
    fn a_path_as_a_uri_names_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a b?c#d%e&f=g");
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join("ü.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (42);")
            .unwrap();
        let uri = file_uri(&path, true);
        assert!(uri.starts_with("file:///"), "{uri}");
        assert!(
            uri.ends_with("/a%20b%3Fc%23d%25e%26f%3Dg/%C3%BC.db?immutable=1"),
            "{uri}"
        );
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&uri, flags).unwrap();
        let x: i64 = conn.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(x, 42);
        let relative = file_uri(Path::new("runs.db"), false);
        assert_eq!(relative, "file:runs.db");
        // Not a host name: `//tmp` is the directory `/tmp`.
        let doubled = format!("/{}", path.display());
        let conn = Connection::open_with_flags(file_uri(Path::new(&doubled), true), flags).unwrap();
        let x: i64 = conn.query_row("SELECT x FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(x, 42);
    }
}
