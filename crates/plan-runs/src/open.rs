//! Stores opened from a path: the one place the engine names the SQLite store. A store
//! of another kind (a server database, by URL) joins here.

use std::path::{Path, PathBuf};

use plan_store::{Durability, Owner, SqliteStore};

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

/// The store at `path`.
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
    Lease::start(
        Box::new(move || Ok(Box::new(SqliteStore::open(&path, durability)?) as _)),
        owner,
        warn,
    )
}
