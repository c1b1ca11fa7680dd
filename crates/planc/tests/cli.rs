//! End-to-end tests of the `planc` binary: each runs it on fixture plans (in a scratch
//! copy of `tests/fixtures/`, so outputs never land in the source tree) and snapshots
//! exit code, stdout and stderr together.
//!
//! Colour is off because stderr is a pipe here and `NO_COLOR=1` is set; the `.snap` files
//! are the expected CLI output, reviewed by hand.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A scratch directory holding a copy of every fixture.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(fixtures()).expect("fixtures dir") {
        let entry = entry.expect("fixture entry");
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy fixture");
    }
    dir
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The snapshot text: everything a user of the command sees.
    fn transcript(&self) -> String {
        format!(
            "exit: {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn planc(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_planc"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("run planc");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `wrote X (N bytes)`: checks N against the file on disk, then hides it so the snapshot
/// does not churn with every change of the bytecode encoding.
fn redact_size(dir: &Path, stderr: &str) -> String {
    stderr
        .lines()
        .map(|line| {
            let Some(rest) = line.strip_prefix("wrote ") else {
                return line.to_owned();
            };
            let (path, size) = rest.rsplit_once(" (").expect("wrote PATH (N bytes)");
            let n: u64 = size
                .trim_end_matches(" bytes)")
                .parse()
                .expect("size is a number");
            let on_disk = std::fs::metadata(dir.join(path))
                .expect("written file exists")
                .len();
            assert_eq!(n, on_disk, "reported size of {path}");
            format!("wrote {path} (N bytes)")
        })
        .map(|l| l + "\n")
        .collect()
}

macro_rules! snap {
    ($name:expr, $run:expr) => {
        insta::assert_snapshot!($name, $run.transcript())
    };
}

// ---------------------------------------------------------------- check

#[test]
fn check_valid_plans_human() {
    let dir = scratch();
    let run = planc(
        dir.path(),
        &["check", "current.json", "older.json", "fenced.md"],
    );
    snap!("check_valid_human", run);
}

#[test]
fn check_errors_human() {
    let dir = scratch();
    let run = planc(dir.path(), &["check", "errors.json"]);
    assert_eq!(run.code, 1);
    snap!("check_errors_human", run);
}

#[test]
fn check_errors_json() {
    let dir = scratch();
    let run = planc(
        dir.path(),
        &[
            "check",
            "--format",
            "json",
            "errors.json",
            "fenced.md",
            "missing.json",
        ],
    );
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr, "", "json mode keeps stderr clean");
    for line in run.stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("each line is JSON");
        let keys: Vec<&str> = v
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "file", "severity", "code", "message", "seq_no", "line", "column", "help"
            ]
        );
    }
    snap!("check_errors_json", run);
}

#[test]
fn check_deny_warnings() {
    let dir = scratch();
    // The fenced plan only has reader-repair warnings: fine by default, an error when denied.
    assert_eq!(planc(dir.path(), &["check", "fenced.md"]).code, 0);
    let run = planc(dir.path(), &["check", "--deny-warnings", "fenced.md"]);
    assert_eq!(run.code, 1);
    snap!("check_deny_warnings", run);
}

#[test]
fn check_strict_turns_repairs_into_errors() {
    let dir = scratch();
    let run = planc(
        dir.path(),
        &["check", "--strict", "--format", "json", "fenced.md"],
    );
    assert_eq!(run.code, 1);
    snap!("check_strict", run);
}

#[test]
fn check_unreadable_path_is_a_diagnostic_not_a_crash() {
    let dir = scratch();
    // The readable plan is still checked: one bad path does not stop the run.
    let run = planc(dir.path(), &["check", "missing.json", "current.json"]);
    assert_eq!(run.code, 1);
    snap!("check_unreadable", run);
}

#[test]
fn check_usage_errors_exit_2() {
    let dir = scratch();
    assert_eq!(planc(dir.path(), &["check"]).code, 2);
    assert_eq!(
        planc(dir.path(), &["check", "--format", "xml", "current.json"]).code,
        2
    );
    assert_eq!(planc(dir.path(), &["frobnicate"]).code, 2);
    assert_eq!(planc(dir.path(), &[]).code, 2);
    assert_eq!(planc(dir.path(), &["--help"]).code, 0);
}

// ---------------------------------------------------------------- compile

#[test]
fn compile_default_output_path() {
    let dir = scratch();
    let mut run = planc(dir.path(), &["compile", "current.json"]);
    run.stderr = redact_size(dir.path(), &run.stderr);
    assert!(dir.path().join("current.pbc").is_file());
    snap!("compile_default_output", run);
}

#[test]
fn compile_to_named_output_and_strip_makes_it_smaller() {
    let dir = scratch();
    let full = planc(dir.path(), &["compile", "older.json", "-o", "full.pbc"]);
    assert_eq!(full.code, 0, "{}", full.stderr);
    let stripped = planc(
        dir.path(),
        &[
            "compile",
            "older.json",
            "-o",
            "stripped.pbc",
            "--strip",
            "--quiet",
        ],
    );
    assert_eq!(
        stripped.transcript(),
        "exit: 0\n--- stdout\n--- stderr\n",
        "--quiet says nothing"
    );
    let size = |name: &str| std::fs::metadata(dir.path().join(name)).expect(name).len();
    assert!(
        size("stripped.pbc") < size("full.pbc"),
        "--strip drops the debug section"
    );
    let mut full = full;
    full.stderr = redact_size(dir.path(), &full.stderr);
    snap!("compile_named_output", full);
}

#[test]
fn compile_with_errors_writes_nothing() {
    let dir = scratch();
    let run = planc(dir.path(), &["compile", "errors.json"]);
    assert_eq!(run.code, 1);
    assert!(!dir.path().join("errors.pbc").exists());
    snap!("compile_errors", run);
}

#[test]
fn compile_refuses_to_overwrite_its_input() {
    let dir = scratch();
    let before = std::fs::read(dir.path().join("current.json")).expect("plan");
    assert_eq!(
        planc(
            dir.path(),
            &["compile", "current.json", "-o", "./current.json"]
        )
        .code,
        64
    );
    let run = planc(
        dir.path(),
        &["compile", "current.json", "-o", "current.json"],
    );
    assert_eq!(run.code, 64);
    assert_eq!(
        std::fs::read(dir.path().join("current.json")).expect("plan"),
        before
    );
    snap!("compile_output_is_input", run);
    // The tools file is an input too, also through a hard link.
    std::fs::write(dir.path().join("empty.toml"), "").expect("tools file");
    std::fs::hard_link(dir.path().join("empty.toml"), dir.path().join("linked.pbc"))
        .expect("hard link");
    let run = planc(
        dir.path(),
        &[
            "compile",
            "current.json",
            "--tools",
            "empty.toml",
            "-o",
            "linked.pbc",
        ],
    );
    assert_eq!(run.code, 64, "{}", run.stderr);
    assert!(
        run.stderr.contains("is the --tools file itself"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read(dir.path().join("empty.toml")).expect("tools"),
        b""
    );
}

// ---------------------------------------------------------------- disasm

#[test]
fn disasm_valid() {
    let dir = scratch();
    assert_eq!(
        planc(dir.path(), &["compile", "-q", "current.json"]).code,
        0
    );
    let run = planc(dir.path(), &["disasm", "current.pbc"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    snap!("disasm_current", run);
}

#[test]
fn disasm_corrupted_is_65() {
    let dir = scratch();
    assert_eq!(
        planc(dir.path(), &["compile", "-q", "current.json"]).code,
        0
    );
    let good = std::fs::read(dir.path().join("current.pbc")).expect("pbc");
    // Flip one byte in the middle (the checksum or a section catches it) and truncate.
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x5a;
    std::fs::write(dir.path().join("flipped.pbc"), &flipped).expect("write");
    std::fs::write(dir.path().join("truncated.pbc"), &good[..good.len() / 3]).expect("write");
    let mut transcripts = String::new();
    for file in ["flipped.pbc", "truncated.pbc", "current.json"] {
        let run = planc(dir.path(), &["disasm", file]);
        assert_eq!(run.code, 65, "{file}: {}", run.stderr);
        assert_eq!(run.stdout, "", "{file}: nothing on stdout");
        transcripts.push_str(&format!("$ planc disasm {file}\n{}\n", run.transcript()));
    }
    insta::assert_snapshot!("disasm_corrupted", transcripts);
}

#[test]
fn disasm_missing_file_is_66() {
    let dir = scratch();
    let run = planc(dir.path(), &["disasm", "missing.pbc"]);
    assert_eq!(run.code, 66);
    snap!("disasm_missing", run);
}

// ---------------------------------------------------------------- explain

#[test]
fn explain_list() {
    let dir = scratch();
    let mut transcripts = String::new();
    for plan in ["current.json", "older.json", "fenced.md"] {
        let run = planc(dir.path(), &["explain", plan]);
        assert_eq!(run.code, 0, "{plan}: {}", run.stderr);
        transcripts.push_str(&format!("$ planc explain {plan}\n{}\n", run.transcript()));
    }
    insta::assert_snapshot!("explain_list", transcripts);
}

#[test]
fn explain_dot() {
    let dir = scratch();
    let mut transcripts = String::new();
    for plan in ["current.json", "older.json"] {
        let run = planc(dir.path(), &["explain", "--dot", plan]);
        assert_eq!(run.code, 0, "{plan}: {}", run.stderr);
        transcripts.push_str(&format!(
            "$ planc explain --dot {plan}\n{}\n",
            run.transcript()
        ));
    }
    insta::assert_snapshot!("explain_dot", transcripts);
}

#[test]
fn explain_errors_are_rendered_like_check() {
    let dir = scratch();
    let run = planc(dir.path(), &["explain", "errors.json"]);
    assert_eq!(run.code, 1);
    let check = planc(dir.path(), &["check", "errors.json"]);
    assert_eq!(run.stderr, check.stderr);
    assert_eq!(run.stdout, "");
}

// ---------------------------------------------------------------- --tools

#[test]
fn tools_manifest_adds_tools() {
    let dir = scratch();
    // Unknown without the manifest, fine with it (for check, compile and explain alike).
    assert_eq!(planc(dir.path(), &["check", "web.json"]).code, 1);
    let mut transcripts = String::new();
    for args in [
        &["check", "--tools", "tools.toml", "web.json"][..],
        &["compile", "--tools", "tools.toml", "web.json"],
        &["explain", "--tools", "tools.toml", "web.json"],
    ] {
        let mut run = planc(dir.path(), args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run.stderr = redact_size(dir.path(), &run.stderr);
        transcripts.push_str(&format!(
            "$ planc {}\n{}\n",
            args.join(" "),
            run.transcript()
        ));
    }
    insta::assert_snapshot!("tools_manifest", transcripts);
}

#[test]
fn bad_tools_manifest_is_a_usage_error() {
    let dir = scratch();
    let mut transcripts = String::new();
    for args in [
        &["check", "--tools", "bad_tools.toml", "web.json"][..],
        &["compile", "--tools", "missing.toml", "web.json"],
    ] {
        let run = planc(dir.path(), args);
        assert_eq!(run.code, 2, "{args:?}");
        transcripts.push_str(&format!(
            "$ planc {}\n{}\n",
            args.join(" "),
            run.transcript()
        ));
    }
    assert!(!dir.path().join("web.pbc").exists());
    insta::assert_snapshot!("tools_manifest_bad", transcripts);
}

// ---------------------------------------------------------------- odd inputs

#[test]
fn unreadable_inputs_are_e0000_diagnostics() {
    let dir = scratch();
    std::fs::write(
        dir.path().join("latin1.json"),
        b"[{\"seq_no\": 0, \"type\": \"caf\xe9\"}]",
    )
    .expect("write");
    std::fs::create_dir(dir.path().join("plans.json")).expect("mkdir");
    let run = planc(
        dir.path(),
        &["check", "--format", "json", "latin1.json", "plans.json"],
    );
    assert_eq!(run.code, 1);
    snap!("unreadable_inputs_json", run);
    // compile and explain report it the same way, and write nothing.
    for cmd in ["compile", "explain"] {
        let run = planc(dir.path(), &[cmd, "missing.json"]);
        assert_eq!(run.code, 1, "{cmd}");
        assert_eq!(
            run.stderr,
            "error[E0000]: cannot read `missing.json`: No such file or directory (os error 2)\n\n\
             missing.json: 1 error, 0 warnings\n",
            "{cmd}"
        );
    }
    assert!(!dir.path().join("missing.pbc").exists());
}

#[test]
fn compile_unwritable_output_is_73() {
    let dir = scratch();
    let run = planc(
        dir.path(),
        &["compile", "current.json", "-o", "no/such/dir/out.pbc"],
    );
    assert_eq!(run.code, 73);
    assert_eq!(
        run.stderr,
        "error: cannot write `no/such/dir/out.pbc`: No such file or directory (os error 2)\n"
    );
    // Nothing left behind, not even the temporary file.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("scratch")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pbc") || n.ends_with(".tmp"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
}

/// A minified plan (one line) with thousands of warnings: the human output shows a window
/// of the line per diagnostic and 20 per code, so it stays small; JSON keeps every one.
#[test]
fn thousands_of_warnings_on_one_line_stay_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 5000;
    let params: Vec<String> = (0..n).map(|i| format!("\"a{i}\":\"${{u{i}}}\"")).collect();
    let plan = format!(
        "[{{\"seq_no\":0,\"type\":\"assign\",\"parameters\":{{{},\"final_answer\":\"x\"}}}}]",
        params.join(",")
    );
    std::fs::write(dir.path().join("min.json"), &plan).expect("plan");
    let human = planc(dir.path(), &["check", "min.json"]);
    assert_eq!(
        human.code,
        0,
        "{}",
        &human.stderr[..human.stderr.len().min(2000)]
    );
    assert!(
        human.stderr.len() < 40_000,
        "{} bytes of diagnostics for a {} byte plan",
        human.stderr.len(),
        plan.len()
    );
    assert!(
        human.stderr.contains(&format!(
            "note: {} more warning[W0201] diagnostics not shown",
            n - 20
        )),
        "{}",
        human.stderr
    );
    let json = planc(dir.path(), &["check", "--format", "json", "min.json"]);
    let w0201 = json
        .stdout
        .lines()
        .filter(|l| l.contains("\"W0201\""))
        .count();
    assert_eq!(w0201, n);
}

/// `planc codes` lists one table of every code; each code any snapshot of the workspace
/// shows is in it, every run error too, and `planc codes CODE` explains one.
#[test]
fn codes_lists_every_code_the_front_ends_emit() {
    let dir = scratch();
    let listed = planc(dir.path(), &["codes", "--format", "json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let codes: Vec<serde_json::Value> = listed
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let known: std::collections::HashSet<String> = codes
        .iter()
        .map(|c| c["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(known.len(), codes.len(), "a code is listed twice");
    for c in &codes {
        assert!(c["doc"].as_str().unwrap().len() > 10, "{c}");
    }
    // Every diagnostic code in the workspace's snapshots is in the table.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut seen = 0;
    for snaps in [
        root.join("tests/snapshots"),
        root.join("crates/planc/tests/snapshots"),
    ] {
        for entry in std::fs::read_dir(&snaps).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
                let b = word.as_bytes();
                if b.len() == 5
                    && (b[0] == b'E' || b[0] == b'W')
                    && b[1..].iter().all(u8::is_ascii_digit)
                {
                    seen += 1;
                    assert!(known.contains(word), "{word} is not in `planc codes`");
                }
            }
        }
    }
    assert!(seen > 100, "{seen}");
    let one = planc(dir.path(), &["codes", "w0003"]);
    assert_eq!(one.code, 0);
    assert!(
        one.stdout.starts_with("W0003 (warning, a reader repair)\n"),
        "{}",
        one.stdout
    );
    let run_errors: Vec<&serde_json::Value> = codes.iter().filter(|c| c["run"] == true).collect();
    assert_eq!(run_errors.len(), 14, "R0001 to R0013 and R0099");
    assert!(run_errors.iter().all(|c| c["severity"] == "error"));
    let one = planc(dir.path(), &["codes", "R0005"]);
    assert_eq!(one.code, 0);
    assert!(
        one.stdout.starts_with("R0005 (error, a run error)\n"),
        "{}",
        one.stdout
    );
    let none = planc(dir.path(), &["codes", "E9999"]);
    assert_eq!(none.code, 2);
    assert!(none.stderr.contains("no code `E9999`"), "{}", none.stderr);
}
