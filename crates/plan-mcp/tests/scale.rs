//! A server listing 100,000 tools, imported from the server and from the cache: once
//! quadratic in the tools (36 s in a debug build), now linear. Seconds in a debug build:
//! ignored by a plain `cargo test`, run by `scripts/test` with `--ignored` (as the root
//! package's `tests/scale.rs`).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fake, manifest};
use plan_llm::Redactor;
use plan_manifest::Manifest;
use plan_mcp::{Listing, Servers, import};

/// The imported manifest of a server listing `n` tools (besides its own two), listed
/// where `listing` says, and how long the import took.
async fn imported(
    n: usize,
    cache: &std::path::Path,
    starts: &str,
    listing: Listing,
) -> (Manifest, Duration) {
    let mut m = manifest(&fake(
        "many",
        &["--tools", &n.to_string(), "--starts", starts],
        "",
    ));
    let servers = Servers::new(&m.mcp, plan_llm::process_env(), Arc::new(Redactor::new()));
    let t = Instant::now();
    import(&mut m, &servers, Some(cache), listing)
        .await
        .unwrap();
    let took = t.elapsed();
    servers.shutdown().await;
    (m, took)
}

#[tokio::test]
#[ignore = "seconds in a debug build: run by scripts/test with --ignored"]
async fn a_hundred_thousand_tools_import_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let starts = |n: usize| dir.path().join(format!("starts-{n}")).display().to_string();
    let builtins = Manifest::builtin().tools.len();
    // The cached import of each size, the faster of two: the listing is read, mapped and
    // merged, and no server is started.
    let mut cached = Vec::new();
    for n in [25_000, 100_000] {
        let (m, fresh) = imported(n, &cache, &starts(n), Listing::Fresh).await;
        assert_eq!(m.tools.len(), builtins + n + 2);
        assert!(m.get(&format!("t{}", n - 1)).is_some());
        eprintln!("{n} tools listed by the server and imported: {fresh:?}");
        let mut best = Duration::MAX;
        for _ in 0..2 {
            let (m, took) = imported(n, &cache, &starts(n), Listing::Cached).await;
            assert_eq!(m.tools.len(), builtins + n + 2);
            best = best.min(took);
        }
        eprintln!("{n} tools imported from the cache: {best:?}");
        let started = std::fs::read_to_string(starts(n)).unwrap();
        assert_eq!(
            started.lines().count(),
            1,
            "the cached imports started no server"
        );
        cached.push(best);
    }
    // NB: four times the tools: linear takes about four times as long, quadratic sixteen
    // (more, with its fixed costs beside): a ratio, not a time, so a slow or loaded
    // machine does not fail it.
    let ratio = cached[1].as_secs_f64() / cached[0].as_secs_f64();
    assert!(
        ratio < 10.0,
        "4x the tools took {ratio:.1}x as long: {cached:?}"
    );
}
