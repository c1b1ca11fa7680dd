//! Helpers of the tests that run the planvm binary against loopback servers.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

#[path = "../../../plan-serve/tests/common/loopback.rs"]
mod loopback;
#[path = "../../../plan-runs/tests/common/pg.rs"]
mod pg;
#[allow(unused_imports)]
pub use loopback::*;
#[allow(unused_imports)]
pub use pg::{PgSchema, until};

pub const BIN: &str = env!("CARGO_BIN_EXE_planvm");

pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs planvm with `args` and the environment `env`, off the async runtime (the
/// loopback servers keep answering meanwhile). Never a panic, whatever the input.
pub fn planvm<S: AsRef<str>>(
    args: impl IntoIterator<Item = S>,
    env: &[(&str, &str)],
) -> futures::future::BoxFuture<'static, Out> {
    // NB: read now, so that the future borrows nothing of its caller's.
    let args: Vec<String> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Box::pin(async move {
        let out = tokio::task::spawn_blocking(move || command(&args, env).output().unwrap())
            .await
            .unwrap();
        Out::of(out)
    })
}

/// Runs planvm with `args` in this thread, as `planvm` does with no environment of its own:
/// for the tests that need no server answering meanwhile. Never a panic, whatever the input.
#[allow(dead_code)]
pub fn run<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> Out {
    let args: Vec<String> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let out = Out::of(command(&args, Vec::new()).output().unwrap());
    // NB: 101 is the exit code of a panic, whatever its message.
    assert_ne!(out.code, Some(101), "{args:?}: {}", out.stderr);
    out
}

/// planvm with `args`, none of the caller's settings that would reach it (a key, a store,
/// a telemetry endpoint), and the environment `env`.
fn command(args: &[String], env: Vec<(String, String)>) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("PLANVM_STORE")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .envs(env);
    c
}

impl Out {
    /// A finished planvm's exit code and output. Never a panic, whatever the input.
    pub fn of(out: std::process::Output) -> Out {
        let out = Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
        out
    }
}

pub fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The JSON lines of a file.
pub fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The JSON lines of a text, each said when it is not JSON.
#[allow(dead_code)]
pub fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The keys of a JSON object, in order.
#[allow(dead_code)]
pub fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect()
}

/// The keys of the object `planvm run --format json` prints, in order.
#[allow(dead_code)]
pub const RESULT_KEYS: [&str; 6] = [
    "status",
    "final_answer",
    "error",
    "steps",
    "tool_calls",
    "elapsed_ms",
];

/// The repository's root.
#[allow(dead_code)]
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The names of the files in `dir`, sorted.
#[allow(dead_code)]
pub fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The directory of the shipped examples.
#[allow(dead_code)]
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The path of the shipped example `name`.
#[allow(dead_code)]
pub fn ex(name: &str) -> String {
    s(&examples().join(name))
}

/// The expected answer `name` (in `tests/expected`).
#[allow(dead_code)]
pub fn expected(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expected")
        .join(name);
    std::fs::read_to_string(p).expect("expected answer file")
}

/// A child process killed when dropped: a test that fails leaves none running.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// A running service: its process and its address.
pub struct Served {
    pub child: Child,
    pub base: String,
    /// What the service has said on stderr since it listens.
    pub said: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `planvm serve` over store `db` on a free loopback port, with `extra` arguments
/// and these environment variables, and waits until it listens.
pub fn serve_with(db: &Path, extra: &[&str], env: &[(&str, &str)]) -> Served {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--store",
            db.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .envs(env.iter().copied())
        .env_remove("PLANVM_STORE")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("the service says where it listens")
            .unwrap();
        if let Some(addr) = line.strip_prefix("listening on ") {
            break addr.to_owned();
        }
    };
    // NB: the rest of stderr is drained, so the service never blocks writing to it.
    let said: std::sync::Arc<std::sync::Mutex<String>> = std::sync::Arc::default();
    let kept = std::sync::Arc::clone(&said);
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut kept = kept.lock().unwrap();
            kept.push_str(&line);
            kept.push('\n');
        }
    });
    Served { child, base, said }
}
