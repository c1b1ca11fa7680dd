//! Where a store is, and opening it: the one place the engine names a store's kind, an
//! SQLite file by its path or a PostgreSQL database by its URL (`postgres://...`).

use std::path::{Path, PathBuf};

use plan_store::{Durability, Owner, PgStore, RunStore, SqliteStore};

use crate::{Error, Lease};

/// What opening a store is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// To write runs: created when missing.
    Create,
    /// To read or continue runs: a missing store is [`crate::ErrorKind::NoStore`].
    Existing,
    /// Only to read: read-only where this process may not write it.
    Read,
}

/// What a store's files are called when an output would be written onto one of them.
pub const STORE_FILE: &str = "the --store database or a file SQLite keeps beside it";

/// Where a store is: what the engine opens connections to (a run's own, its lease's).
#[derive(Clone, Debug)]
pub struct StoreAt {
    path: PathBuf,
    durability: Durability,
}

impl StoreAt {
    pub fn new(path: impl Into<PathBuf>, durability: Durability) -> StoreAt {
        StoreAt {
            path: path.into(),
            durability,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The PostgreSQL URL it names, if it is one rather than a file.
    pub fn url(&self) -> Option<&str> {
        self.path
            .to_str()
            .filter(|p| plan_store::is_postgres_url(p))
    }

    /// Where it is, for messages: the path, or the URL without its password.
    pub fn shown(&self) -> String {
        match self.url() {
            Some(url) => plan_sql::without_password(url),
            None => self.path.display().to_string(),
        }
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// A connection to the store. NB: a database is brought up to date whatever the
    /// access: it has no file whose absence would say that there is no store.
    pub fn open(&self, access: Access) -> Result<Box<dyn RunStore>, Error> {
        match self.url() {
            Some(url) => Ok(Box::new(PgStore::open(url, self.durability)?)),
            None => Ok(Box::new(open(&self.path, self.durability, access)?)),
        }
    }

    /// `owner`'s lease on the runs it holds here, renewed on a connection of its own (see
    /// [`Lease::start`]).
    pub fn lease(&self, owner: Owner, warn: fn(&Error)) -> Lease {
        match self.url() {
            Some(url) => {
                let (url, durability) = (url.to_owned(), self.durability);
                Lease::start(
                    plan_sql::without_password(&url),
                    // NB: outside the process's pool: a renewal never waits for calls
                    // that hold every pooled connection (claims waiting for a lock).
                    Box::new(move || Ok(Box::new(PgStore::open_own(&url, durability)?) as _)),
                    owner,
                    warn,
                )
            }
            None => lease(&self.path, self.durability, owner, warn),
        }
    }

    /// The files the store is made of, whether they exist yet or not: no output may be
    /// written onto one of them. NB: SQLite keeps its `-wal` and `-shm` beside the file a
    /// symbolic link leads to, so a link's target's files count too.
    pub fn files(&self) -> Vec<PathBuf> {
        match self.url() {
            Some(_) => Vec::new(),
            None => files(&self.path),
        }
    }
}

/// What a command reads, which nothing it writes may be (see [`Inputs::check`]).
#[derive(Default)]
pub struct Inputs<'a> {
    /// Its own inputs, named for messages (`("the dataset", path)`).
    pub named: Vec<(&'a str, &'a Path)>,
    /// The tools file (`--tools`).
    pub tools: Option<&'a Path>,
    /// The cassette every call is answered from (`--replay`).
    pub replay: Option<&'a Path>,
    /// The store, with the files SQLite keeps beside it.
    pub store: Option<&'a Path>,
}

impl Inputs<'_> {
    /// Refuses (`output_is_input`) `outputs` that are one of the inputs or one another;
    /// they are named for messages (`("--trace", path)`).
    pub fn check(&self, outputs: &[(&str, &Path)]) -> Result<(), Error> {
        let store_files = self.store.map(files).unwrap_or_default();
        let mut all = self.named.clone();
        all.extend(self.tools.map(|p| ("the --tools file", p)));
        all.extend(self.replay.map(|p| ("the --replay cassette", p)));
        all.extend(store_files.iter().map(|p| (STORE_FILE, p.as_path())));
        plan_compiler::files::check_outputs(outputs, &all)
            .map_err(|msg| Error::new(crate::ErrorKind::OutputIsInput, msg))
    }
}

/// See [`StoreAt::files`] (a link to a store not created yet included).
pub fn files(path: &Path) -> Vec<PathBuf> {
    let mut files = SqliteStore::files(path).to_vec();
    if let Some(real) = plan_compiler::files::resolved(path) {
        files.extend(SqliteStore::files(&real));
    }
    files
}

/// The SQLite store at `path`.
pub fn open(path: &Path, durability: Durability, access: Access) -> Result<SqliteStore, Error> {
    Ok(match access {
        Access::Create => SqliteStore::open(path, durability)?,
        Access::Existing => SqliteStore::open_existing(path, durability)?,
        Access::Read => SqliteStore::open_to_read(path)?,
    })
}

/// `owner`'s lease on the runs it holds in the store at `path`, renewed on a connection of
/// its own (see [`Lease::start`]).
pub fn lease(path: &Path, durability: Durability, owner: Owner, warn: fn(&Error)) -> Lease {
    let path: PathBuf = path.to_owned();
    // NB: one renewer per file, however it is named.
    let key = std::fs::canonicalize(&path)
        .unwrap_or_else(|_| path.clone())
        .display()
        .to_string();
    Lease::start(
        key,
        Box::new(move || Ok(Box::new(SqliteStore::open(&path, durability)?) as _)),
        owner,
        warn,
    )
}
