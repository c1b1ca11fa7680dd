//! Plans compiled once: the cache of compiled plans that every face which takes the same
//! plan many times shares (a service's posted plans, `planvm submit --list`). A plan is
//! known by the SHA-256 of the name its messages give it, its source and the names of the
//! variables its runs preset (they change what the verifier accepts); one cache serves
//! one manifest (an [`crate::engine::Engine`]'s).

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::Digest;

/// Plans kept compiled at most (more clear the cache).
const KEPT: usize = 64;

/// The largest plan kept compiled, in bytes of source: a large plan is seldom posted
/// twice, and 64 of them would hold the memory of 64 large programs.
const KEPT_SOURCE: usize = 256 << 10;

/// What a plan compiled to (`T`: its program, its bytecode, ...), by source and presets.
pub struct CompileCache<T> {
    kept: Mutex<HashMap<[u8; 32], T>>,
}

impl<T> Default for CompileCache<T> {
    fn default() -> Self {
        CompileCache {
            kept: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Clone> CompileCache<T> {
    /// What `source`, named `name`, with `presets` preset compiles to: by `compile`
    /// (given the presets sorted) unless it was compiled lately. A failure is not kept.
    pub fn get<E>(
        &self,
        name: &str,
        source: &[u8],
        mut presets: Vec<String>,
        compile: impl FnOnce(Vec<String>) -> Result<T, E>,
    ) -> Result<T, E> {
        presets.sort();
        if source.len() > KEPT_SOURCE {
            return compile(presets);
        }
        let key = key(name, source, &presets);
        let lock = || self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hit) = lock().get(&key) {
            return Ok(hit.clone());
        }
        let compiled = compile(presets)?;
        let mut kept = lock();
        if kept.len() >= KEPT {
            kept.clear();
        }
        kept.insert(key, compiled.clone());
        Ok(compiled)
    }
}

/// The key of `source` named `name` with `presets` (sorted): lengths first, so that no
/// two different triples hash the same bytes.
fn key(name: &str, source: &[u8], presets: &[String]) -> [u8; 32] {
    let mut digest = sha2::Sha256::new();
    digest.update((name.len() as u64).to_le_bytes());
    digest.update(name);
    digest.update((source.len() as u64).to_le_bytes());
    digest.update(source);
    for p in presets {
        digest.update((p.len() as u64).to_le_bytes());
        digest.update(p);
    }
    digest.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_compiled_once_per_presets_and_failures_are_not_kept() {
        let cache: CompileCache<usize> = CompileCache::default();
        let compiles = std::cell::Cell::new(0);
        let get = |source: &str, presets: &[&str]| {
            let presets = presets.iter().map(|p| (*p).to_owned()).collect();
            cache
                .get("plan", source.as_bytes(), presets, |p| {
                    compiles.set(compiles.get() + 1);
                    if source == "bad" {
                        Err(())
                    } else {
                        Ok(p.len())
                    }
                })
                .ok()
        };
        assert_eq!(get("a", &["x", "y"]), Some(2));
        assert_eq!(get("a", &["y", "x"]), Some(2));
        assert_eq!(get("a", &[]), Some(0));
        assert_eq!(get("bad", &[]), None);
        assert_eq!(get("bad", &[]), None);
        // "a" with x, y (in either order) once, "a" alone once, "bad" each time.
        assert_eq!(compiles.get(), 4);
        // Named otherwise, its messages would differ: compiled again.
        assert_eq!(
            cache.get("other", b"a", Vec::new(), |_| Ok::<_, ()>(9)),
            Ok(9)
        );
        assert_eq!(compiles.get(), 4);
    }
}
