//! File identity for the CLIs' output checks: an output (`-o`, `--trace`, `--record`,
//! `--output`) must never be one of the command's inputs, however it is spelled
//! (`./plan.json`, a symlink, a hard link), and whether or not the input exists yet (the
//! files SQLite creates beside a store appear only once it is open).

use std::path::{Path, PathBuf};

/// What makes a file itself: device and inode on Unix, the canonical path elsewhere.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileId(Inner);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Inner {
    #[cfg(unix)]
    Inode(u64, u64),
    #[cfg(not(unix))]
    Path(std::path::PathBuf),
}

impl FileId {
    /// The identity of the existing file at `path` (`None` if there is none).
    pub fn of(path: &Path) -> Option<FileId> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(path).ok()?;
            Some(FileId(Inner::Inode(m.dev(), m.ino())))
        }
        #[cfg(not(unix))]
        {
            std::fs::canonicalize(path)
                .ok()
                .map(|p| FileId(Inner::Path(p)))
        }
    }
}

/// Whether `a` and `b` are the same existing file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (FileId::of(a), FileId::of(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Symbolic links followed from one name before giving up (as the kernel's 40).
const MAX_LINKS: usize = 40;

/// Where a file at `path` is (or would be created): its directory made absolute and free
/// of symbolic links, then its own name, itself followed while it is a symbolic link
/// (dangling ones included: creating the file would create their target). `None` when
/// the directory does not exist.
pub fn resolved(path: &Path) -> Option<PathBuf> {
    let mut path = path.to_owned();
    for _ in 0..MAX_LINKS {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            break;
        };
        if !meta.file_type().is_symlink() {
            break;
        }
        let target = std::fs::read_link(&path).ok()?;
        path = match path.parent() {
            Some(dir) => dir.join(target),
            None => target,
        };
    }
    let name = match path.file_name() {
        Some(name) => name.to_owned(),
        // `..`, `/`: a directory, which has no other spelling to worry about.
        None => return std::fs::canonicalize(&path).ok(),
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(dir).ok()?.join(name))
}

/// The first of `inputs` (flag or role, path) that `output` would overwrite, if any: the
/// same existing file, or the same name once resolved (see [`resolved`]), so an input
/// that does not exist yet is protected too.
pub fn clobbered<'a>(output: &Path, inputs: &[(&'a str, &'a Path)]) -> Option<(&'a str, &'a Path)> {
    let id = FileId::of(output);
    let name = resolved(output);
    inputs.iter().copied().find(|(_, p)| {
        (id.is_some() && FileId::of(p) == id) || (name.is_some() && resolved(p) == name)
    })
}

/// Refuses outputs that are inputs (by file identity, or by resolved name for files that
/// do not exist yet) or each other.
pub fn check_outputs(outputs: &[(&str, &Path)], inputs: &[(&str, &Path)]) -> Result<(), String> {
    for (i, &(flag, out)) in outputs.iter().enumerate() {
        let others: Vec<(&str, &Path)> = inputs
            .iter()
            .copied()
            .chain(outputs[..i].iter().copied())
            .collect();
        let same_name = outputs[..i].iter().find(|(_, o)| *o == out).copied();
        if let Some((what, p)) = clobbered(out, &others).or(same_name) {
            return Err(format!(
                "{flag} {} is the same file as {what} ({}): it would be overwritten; choose another path",
                out.display(),
                p.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_not_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        std::fs::write(&a, "[]").unwrap();
        let b = dir.path().join("b.json");
        std::fs::write(&b, "[]").unwrap();
        let dotted = dir.path().join(".").join("a.json");
        assert!(same_file(&a, &dotted));
        assert!(!same_file(&a, &b));
        assert!(!same_file(&a, &dir.path().join("missing")));
        #[cfg(unix)]
        {
            let linked = dir.path().join("hard.json");
            std::fs::hard_link(&a, &linked).unwrap();
            assert!(same_file(&a, &linked));
        }
        assert_eq!(
            clobbered(&dotted, &[("--tools", &b), ("FILE", &a)]),
            Some(("FILE", a.as_path()))
        );
        assert_eq!(
            clobbered(&dir.path().join("new.jsonl"), &[("FILE", &a)]),
            None
        );
    }

    #[test]
    fn names_that_do_not_exist_yet_are_compared_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("s.db-wal");
        let spelled = dir.path().join(".").join("s.db-wal");
        assert_eq!(
            clobbered(&spelled, &[("the store", &wal)]),
            Some(("the store", wal.as_path()))
        );
        assert_eq!(
            clobbered(&dir.path().join("s.db-shm"), &[("the store", &wal)]),
            None
        );
        #[cfg(unix)]
        {
            // A dangling link names the file it would create.
            let link = dir.path().join("trace.jsonl");
            std::os::unix::fs::symlink("s.db-wal", &link).unwrap();
            assert!(clobbered(&link, &[("the store", &wal)]).is_some());
            // A linked directory is the same directory.
            let sub = dir.path().join("sub");
            std::fs::create_dir(&sub).unwrap();
            let alias = dir.path().join("alias");
            std::os::unix::fs::symlink(&sub, &alias).unwrap();
            let inside = sub.join("x-journal");
            assert!(clobbered(&alias.join("x-journal"), &[("the store", &inside)]).is_some());
        }
        assert_eq!(resolved(&dir.path().join("missing").join("f")), None);
    }
}
