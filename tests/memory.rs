//! Peak memory of checking a large plan (issue 16: the 100k-step plan with a loop, each
//! step setting its own variable, checked in under 100 MB). A test binary of its own: the
//! figure is this process's high-water mark of resident memory (`VmHWM`, what
//! `/usr/bin/time` reports), so nothing else may run in it. Seconds in a debug build:
//! ignored by a plain `cargo test`, run once by `scripts/test` with `--ignored`.

use plan_compiler::{CompileOptions, compile};

/// `[reasoning, v1 = "a", v2 = "${v1}x", ..., v<n-1> = "${v<n-2>}x", jmp back to 1,
/// final_answer = "${v<n-1>}"]`: 7 MB for n = 100,000.
fn looping_chain(n: usize) -> String {
    let mut steps = vec![
        r#"{"seq_no":0,"type":"reasoning","parameters":{}}"#.to_owned(),
        r#"{"seq_no":1,"type":"assign","parameters":{"v1":"a"}}"#.to_owned(),
    ];
    for i in 2..n {
        steps.push(format!(
            r#"{{"seq_no":{i},"type":"assign","parameters":{{"v{i}":"${{v{}}}x"}}}}"#,
            i - 1
        ));
    }
    steps.push(format!(
        r#"{{"seq_no":{n},"type":"jmp","parameters":{{"condition_prompt":"again?","jump_if_true":1,"jump_if_false":{}}}}}"#,
        n + 1
    ));
    steps.push(format!(
        r#"{{"seq_no":{},"type":"assign","parameters":{{"final_answer":"${{v{}}}"}}}}"#,
        n + 1,
        n - 1
    ));
    format!("[{}]", steps.join(",\n"))
}

/// This process's peak resident memory in bytes (Linux only).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[test]
#[ignore = "seconds in a debug build: run by scripts/test with --ignored"]
fn a_100k_step_looping_plan_is_checked_in_under_100_mb() {
    let src = looping_chain(100_000);
    assert!(src.len() > 7_000_000, "{} bytes", src.len());
    let c = compile(&src, &CompileOptions::default());
    // 100k variables are past a compiled plan's 65,536: refused, after the whole analysis
    // (the unset-variable check of a plan with a loop is what once took gigabytes).
    assert!(c.diagnostics.iter().any(|d| d.code == "E0210"));
    let Some(peak) = peak_rss() else {
        eprintln!("no /proc/self/status here: peak memory not checked");
        return;
    };
    eprintln!("peak resident memory: {:.1} MB", peak as f64 / 1e6);
    assert!(
        peak < 100_000_000,
        "checking a 7 MB plan took {:.1} MB",
        peak as f64 / 1e6
    );
}
