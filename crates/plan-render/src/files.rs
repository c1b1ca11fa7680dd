//! File identity for the CLIs' output checks: an output (`-o`, `--trace`, `--record`,
//! `--output`) must never be one of the command's inputs, however it is spelled
//! (`./plan.json`, a symlink, a hard link).

use std::path::Path;

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

/// The first of `inputs` (flag or role, path) that `output` would overwrite, if any.
pub fn clobbered<'a>(output: &Path, inputs: &[(&'a str, &'a Path)]) -> Option<(&'a str, &'a Path)> {
    let out = FileId::of(output)?;
    inputs
        .iter()
        .copied()
        .find(|(_, p)| FileId::of(p).as_ref() == Some(&out))
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
}
