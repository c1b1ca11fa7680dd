//! Cassettes: recorded tool calls, one JSON object per line,
//! `{"tool": NAME, "args": {...}, "output": VALUE, "latency_ms": N, "step": S}`.
//!
//! A call is keyed by its tool name and args compared as JSON values (object key order does
//! not matter, `1` and `1.0` differ). `step` (written by the recorder, optional in
//! hand-written cassettes) is the call's place in the sequential run: the number of
//! instructions executed before it ([`plan_vm::ToolRequest::instance`]), the same at any
//! concurrency. A call is served the unused entry with its key and its step; failing that
//! (no step recorded, or the plan changed), the first unused entry with its key in
//! recorded order; once all are used, the last one repeats. So two identical calls that
//! got different answers (as LLM calls do) replay exactly even when the look-ahead issues
//! the later one first, and a loop that asks the same question three times can get three
//! different answers and then a stable one.
//!
//! Entries are recorded when the VM commits the call, in program order, and only for
//! calls the sequential run makes (not for calls issued ahead of a failure), so a cassette
//! recorded at any concurrency equals the sequential one up to latencies.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use plan_llm::Usage;
use plan_value::json::write_canonical_object;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::backend::Backend;
use crate::error::{HostError, HostErrorKind, ToolError, ToolErrorKind};
use plan_vm::{Args, ToolRequest};

/// A `latency_ms` above this is surely a typo, and would make a replay look hung.
const MAX_LATENCY_MS: u64 = 24 * 60 * 60 * 1000;
/// Cap on a cassette's size: it is read whole into memory.
const MAX_CASSETTE_BYTES: u64 = 1 << 30;
/// How much of the args an error message shows.
const PREVIEW_CHARS: usize = 400;

/// One recorded call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CassetteEntry {
    pub tool: String,
    pub args: Map<String, Value>,
    pub output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// The call's place in the sequential run (see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// The tokens the recorded call cost (an LLM's), when its server said; kept for the
    /// record, not replayed: a replayed call costs none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A parsed cassette file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cassette {
    pub entries: Vec<CassetteEntry>,
    /// What was tolerated: a last line cut short (a recording killed mid-write), dropped.
    pub warnings: Vec<String>,
}

impl Cassette {
    /// Reads and parses `path`; malformed lines are reported as `file:line: message`.
    pub fn load(path: &Path) -> Result<Cassette, HostError> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| {
            HostError::new(
                HostErrorKind::Io,
                format!("cannot read cassette {shown}: {e}"),
            )
        })?;
        if meta.len() > MAX_CASSETTE_BYTES {
            return Err(HostError::new(
                HostErrorKind::InvalidInput,
                format!(
                    "cassette {shown} is {} bytes, more than the {MAX_CASSETTE_BYTES} allowed",
                    meta.len()
                ),
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| {
            HostError::new(
                HostErrorKind::Io,
                format!("cannot read cassette {shown}: {e}"),
            )
        })?;
        let text = String::from_utf8(bytes).map_err(|e| {
            HostError::new(
                HostErrorKind::InvalidInput,
                format!(
                    "{shown}: cassette is not UTF-8 text (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            )
        })?;
        Cassette::parse(&text, &shown.to_string())
    }

    /// Parses cassette text; `name` prefixes error locations. A malformed line is an
    /// error, except a last line without its newline: the recorder writes each entry
    /// with its newline, so that is a recording killed mid-write, and the line is dropped
    /// with a warning instead of refusing everything recorded before it.
    pub fn parse(text: &str, name: &str) -> Result<Cassette, HostError> {
        let mut entries = Vec::new();
        let mut warnings = Vec::new();
        let cut_short = !text.is_empty() && !text.ends_with('\n');
        let last = text.lines().count();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match parse_entry(line) {
                Ok(entry) => entries.push(entry),
                Err(msg) if cut_short && i + 1 == last => warnings.push(format!(
                    "{name}:{}: the last line is cut short (a recording interrupted while writing?) and was dropped: {msg}",
                    i + 1
                )),
                Err(msg) => {
                    return Err(HostError::new(
                        HostErrorKind::InvalidInput,
                        format!("{name}:{}: {msg}", i + 1),
                    ));
                }
            }
        }
        Ok(Cassette { entries, warnings })
    }
}

fn parse_entry(line: &str) -> Result<CassetteEntry, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| {
        // serde_json names a lone UTF-16 surrogate (`"\ud800"` not followed by its pair)
        // by what it then tripped over.
        let e = e.to_string();
        let hint = if e.contains("hex escape") || e.contains("surrogate") {
            " (a \\uD800-\\uDFFF escape must be a surrogate pair: a lone surrogate is not text)"
        } else {
            ""
        };
        format!("not a JSON object: {e}{hint}")
    })?;
    let Value::Object(mut obj) = v else {
        return Err("expected a JSON object {\"tool\", \"args\", \"output\"}".into());
    };
    let tool = match obj.remove("tool") {
        Some(Value::String(s)) if !s.is_empty() => s,
        Some(_) => return Err("`tool` must be a non-empty string".into()),
        None => return Err("missing `tool`".into()),
    };
    let args = match obj.remove("args") {
        Some(Value::Object(m)) => m,
        Some(_) => return Err("`args` must be a JSON object".into()),
        None => return Err("missing `args`".into()),
    };
    let Some(output) = obj.remove("output") else {
        return Err("missing `output`".into());
    };
    let latency_ms = match obj.remove("latency_ms") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(ms) if ms <= MAX_LATENCY_MS => Some(ms),
            _ => {
                return Err(format!(
                    "`latency_ms` must be an integer from 0 to {MAX_LATENCY_MS}"
                ));
            }
        },
        Some(_) => return Err("`latency_ms` must be an integer".into()),
    };
    let step = match obj.remove("step") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.is_u64() => n.as_u64(),
        Some(_) => return Err("`step` must be a non-negative integer".into()),
    };
    Ok(CassetteEntry {
        tool,
        args,
        output,
        latency_ms,
        step,
        usage: obj
            .remove("usage")
            .and_then(|u| serde_json::from_value(u).ok()),
    })
}

/// The args as a canonical string: object keys sorted at every level, compact. Written
/// directly from the values (no sorted copy of them is built).
pub(crate) fn canonical_args<'a, K: AsRef<str>>(
    args: impl IntoIterator<Item = (K, &'a Value)>,
) -> String {
    let mut out = Vec::new();
    write_canonical_object(&mut out, args);
    // Only JSON text was written: valid UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Serves calls from a cassette, with no network.
#[derive(Debug)]
pub struct ReplayBackend {
    /// The parsed cassette, shared by every [`ReplayBackend::fresh`] copy.
    index: Arc<ReplayIndex>,
    /// Which entries this backend has served (its own, per run).
    cursors: Mutex<Cursors>,
}

#[derive(Debug)]
struct ReplayIndex {
    source: String,
    warnings: Vec<String>,
    entries: Vec<CassetteEntry>,
    /// Tool → canonical args → key number. NB: two levels, not a (tool, args) pair, so
    /// that a lookup borrows the tool's name instead of copying it into a key.
    by_key: HashMap<String, HashMap<Box<[u8]>, usize>>,
    /// Key number → indices into `entries`, in recorded order.
    keys: Vec<Vec<usize>>,
    /// (key number, step) → the first entry recorded for that call.
    by_step: HashMap<(usize, u64), usize>,
}

#[derive(Debug, Default)]
struct Cursors {
    /// Entries served so far, by index (grown on first use).
    used: Vec<bool>,
    /// Per key number: position in `keys[k]` before which every entry is used (grown on
    /// first use).
    next: Vec<usize>,
    /// The canonical args of the call being looked up, in a buffer kept from one call to
    /// the next.
    canon: Vec<u8>,
}

impl ReplayBackend {
    /// `source` names the cassette in error messages.
    pub fn new(cassette: Cassette, source: impl Into<String>) -> Self {
        let mut by_key: HashMap<String, HashMap<Box<[u8]>, usize>> = HashMap::new();
        let mut keys: Vec<Vec<usize>> = Vec::new();
        let mut by_step = HashMap::new();
        for (i, e) in cassette.entries.iter().enumerate() {
            let n = keys.len();
            let k = *by_key
                .entry(e.tool.clone())
                .or_default()
                .entry(canonical_args(&e.args).into_bytes().into_boxed_slice())
                .or_insert(n);
            if k == n {
                keys.push(Vec::new());
            }
            keys[k].push(i);
            if let Some(step) = e.step {
                by_step.entry((k, step)).or_insert(i);
            }
        }
        ReplayBackend {
            index: Arc::new(ReplayIndex {
                source: source.into(),
                warnings: cassette.warnings,
                entries: cassette.entries,
                by_key,
                keys,
                by_step,
            }),
            cursors: Mutex::new(Cursors::default()),
        }
    }

    /// The same parsed cassette with cursors of its own, as if just loaded: a batch shares
    /// one parse among many runs while each run's answers stay independent of the others'.
    pub fn fresh(&self) -> ReplayBackend {
        ReplayBackend {
            index: self.index.clone(),
            cursors: Mutex::new(Cursors::default()),
        }
    }

    /// What loading the cassette tolerated (see [`Cassette::parse`]).
    pub fn warnings(&self) -> &[String] {
        &self.index.warnings
    }

    pub fn load(path: &Path) -> Result<Self, HostError> {
        Ok(ReplayBackend::new(
            Cassette::load(path)?,
            path.display().to_string(),
        ))
    }

    /// The entry for this call (`step`: its [`plan_vm::ToolRequest::instance`], if known),
    /// marking it used. See the module docs for the order.
    pub fn lookup(
        &self,
        tool: &str,
        args: &Args,
        step: Option<u64>,
    ) -> Result<&CassetteEntry, ToolError> {
        self.find(tool, args, step)
            .map_err(|canon| self.miss(tool, args, &canon))
    }

    /// [`ReplayBackend::lookup`], or the call's canonical args when the cassette has no
    /// entry for it.
    fn find(&self, tool: &str, args: &Args, step: Option<u64>) -> Result<&CassetteEntry, String> {
        // NB: a poisoned lock only means another call panicked mid-update; the flags are
        // still valid, so keep serving.
        let mut c = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
        let Cursors { used, next, canon } = &mut *c;
        canon.clear();
        write_canonical_object(canon, args.iter());
        let found = self.index.by_key.get(tool).and_then(|m| m.get(&canon[..]));
        let Some(&k) = found else {
            // Only JSON text was written: valid UTF-8.
            return Err(String::from_utf8_lossy(canon).into_owned());
        };
        let list = &self.index.keys[k];
        let i = {
            if used.is_empty() {
                used.resize(self.index.entries.len(), false);
                next.resize(self.index.keys.len(), 0);
            }
            let exact = step
                .and_then(|s| self.index.by_step.get(&(k, s)).copied())
                .filter(|&i| !used[i]);
            let i = exact.or_else(|| {
                let cur = &mut next[k];
                while list.get(*cur).is_some_and(|&i| used[i]) {
                    *cur += 1;
                }
                list.get(*cur).copied()
            });
            match i {
                Some(i) => {
                    used[i] = true;
                    i
                }
                // All used: the last recorded answer repeats. NB: every key has an entry.
                None => *list.last().ok_or_else(String::new)?,
            }
        };
        Ok(&self.index.entries[i])
    }

    #[cold]
    fn miss(&self, tool: &str, args: &Args, canon: &str) -> ToolError {
        let wanted = preview(&serde_json::to_string(args).unwrap_or_default());
        let mut msg = format!(
            "no entry in cassette {} for tool `{tool}` with args {wanted}",
            self.index.source
        );
        match self.closest(tool, args, canon) {
            Some(c) => {
                msg.push_str(&format!(
                    "; closest recorded args for `{tool}`: {}",
                    preview(&Value::Object(c.clone()).to_string())
                ));
            }
            None => {
                let mut tools: Vec<&str> =
                    self.index.entries.iter().map(|e| e.tool.as_str()).collect();
                tools.sort_unstable();
                tools.dedup();
                if tools.is_empty() {
                    msg.push_str("; the cassette is empty");
                } else {
                    msg.push_str(&format!(
                        "; the cassette has no entries for `{tool}` (it has: {})",
                        tools.join(", ")
                    ));
                }
            }
        }
        ToolError::new(ToolErrorKind::Replay, msg)
    }

    /// The recorded args of `tool` most like `args`: most equal top-level (key, value) pairs,
    /// then smallest edit distance between the canonical JSON texts.
    fn closest(&self, tool: &str, args: &Args, canon: &str) -> Option<&Map<String, Value>> {
        let mut best: Option<(usize, usize, &Map<String, Value>)> = None;
        let mut seen = std::collections::HashSet::new();
        for e in self.index.entries.iter().filter(|e| e.tool == tool) {
            let c = canonical_args(&e.args);
            if !seen.insert(c.clone()) {
                continue;
            }
            let same = args
                .iter()
                .filter(|&(k, v)| e.args.get(k) == Some(v))
                .count();
            let dist = plan_value::edit_distance(canon, &c);
            let better = match best {
                None => true,
                Some((bs, bd, _)) => same > bs || (same == bs && dist < bd),
            };
            if better {
                best = Some((same, dist, &e.args));
            }
        }
        best.map(|(_, _, a)| a)
    }
}

/// The start of `s` for an error message.
pub(crate) fn preview(s: &str) -> String {
    plan_llm::preview(s, PREVIEW_CHARS)
}

impl ReplayBackend {
    /// The recorded output of a call, after its recorded latency: a replay takes the time
    /// the recording took.
    pub async fn answer(
        &self,
        tool: &str,
        args: &Args,
        step: Option<u64>,
    ) -> Result<Value, ToolError> {
        let entry = self.lookup(tool, args, step)?;
        if let Some(ms) = entry.latency_ms.filter(|&ms| ms > 0) {
            // NB: a timer, not a blocking sleep: other calls of the same yield proceed.
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Ok(entry.output.clone())
    }
}

impl ReplayBackend {
    /// A call's answer from the cassette, noted as replayed.
    async fn replay(&self, req: &ToolRequest) -> Result<Value, ToolError> {
        let answer = self.answer(&req.tool, &req.args, Some(req.instance)).await;
        if answer.is_ok() {
            plan_llm::note_replayed();
        }
        answer
    }
}

impl Backend for ReplayBackend {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(self.replay(req))
    }

    /// NB: one box, not the default's two (a box of [`Backend::call`]'s box), in each of
    /// the many calls a batch of replayed runs has out.
    fn call_with_usage<'a>(
        &'a self,
        req: &'a ToolRequest,
    ) -> BoxFuture<'a, Result<(Value, Option<plan_llm::Usage>), ToolError>> {
        use futures::FutureExt;
        Box::pin(self.replay(req).map(|answer| answer.map(|v| (v, None))))
    }

    fn describe(&self) -> String {
        format!("replay from {}", self.index.source)
    }
}

/// Serves a call from a cassette when it has it (at once: the point is not to wait for
/// the tools again), else from the tool's live backend, appending the live answer to the
/// cassette so the next pass has it (`--tools-from`). Only answers are kept: a failed
/// call is asked again next time.
pub(crate) struct ReplayFirst {
    pub(crate) cassette: Arc<ReplayBackend>,
    pub(crate) live: Arc<dyn Backend>,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) redactor: Arc<plan_llm::Redactor>,
}

impl Backend for ReplayFirst {
    fn call<'a>(&'a self, req: &'a ToolRequest) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move { self.call_with_usage(req).await.map(|(v, _)| v) })
    }

    fn call_with_usage<'a>(
        &'a self,
        req: &'a ToolRequest,
    ) -> BoxFuture<'a, Result<(Value, Option<Usage>), ToolError>> {
        Box::pin(async move {
            if let Ok(entry) = self.cassette.find(&req.tool, &req.args, Some(req.instance)) {
                // NB: an answer kept costs nothing now.
                plan_llm::note_replayed();
                return Ok((entry.output.clone(), None));
            }
            let started = std::time::Instant::now();
            let (output, usage) = self.live.call_with_usage(req).await?;
            let output = self.redactor.value(output);
            self.recorder.record(&CassetteEntry {
                tool: req.tool.to_string(),
                args: req.args.to_map(),
                output: output.clone(),
                latency_ms: Some(crate::report::millis(started.elapsed())),
                step: Some(req.instance),
                usage,
            })?;
            Ok((output, usage))
        })
    }

    fn describe(&self) -> String {
        format!(
            "{}, else {} (recorded)",
            self.cassette.describe(),
            self.live.describe()
        )
    }
}

/// Appends completed calls to a cassette file, one flushed line per call, so a run that
/// is killed midway still leaves a valid cassette of what it did.
#[derive(Debug)]
pub struct Recorder {
    path: PathBuf,
    file: Mutex<File>,
}

impl Recorder {
    /// Opens `path` for appending (created if missing).
    pub fn create(path: &Path) -> Result<Recorder, HostError> {
        Recorder::open(path, true)
    }

    /// Creates `path`, emptying it if it exists (one file per run of a batch).
    pub fn overwrite(path: &Path) -> Result<Recorder, HostError> {
        Recorder::open(path, false)
    }

    fn open(path: &Path, append: bool) -> Result<Recorder, HostError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .read(append)
            .truncate(!append)
            .open(path)
            .map_err(|e| {
                HostError::new(
                    HostErrorKind::Create,
                    format!("cannot open cassette {} for recording: {e}", path.display()),
                )
            })?;
        if append {
            drop_cut_line(&file).map_err(|e| {
                HostError::new(
                    HostErrorKind::Create,
                    format!("cannot open cassette {} for recording: {e}", path.display()),
                )
            })?;
        }
        Ok(Recorder {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Appends one entry. Only tool name, args and output are written: the args are the
    /// plan's own resolved params and never carry the host's secrets.
    pub fn record(&self, entry: &CassetteEntry) -> Result<(), ToolError> {
        let mut line = serde_json::to_string(entry).map_err(|e| {
            ToolError::new(
                ToolErrorKind::Config,
                format!("cannot encode cassette entry: {e}"),
            )
        })?;
        line.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(line.as_bytes())
            .and_then(|()| f.flush())
            .map_err(|e| {
                ToolError::new(
                    ToolErrorKind::Config,
                    format!("cannot append to cassette {}: {e}", self.path.display()),
                )
            })
    }
}

/// A recording killed mid-write ends in a line without its newline: appending after it
/// would bury that cut line inside the file, where replay refuses it. Cut it off first
/// (replay drops it anyway), so recording can resume.
fn drop_cut_line(file: &File) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut f = file;
    let mut end = len;
    let mut buf = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(chunk)?;
        if end == len && chunk.last() == Some(&b'\n') {
            return Ok(());
        }
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return finish_last_line(file, start + i as u64 + 1, len);
        }
        end = start;
    }
    finish_last_line(file, 0, len)
}

/// The last line, `from..len`, has no newline: a whole entry (hand-written) gets one, a
/// cut one is removed.
fn finish_last_line(file: &File, from: u64, len: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file;
    let mut tail = Vec::new();
    f.seek(SeekFrom::Start(from))?;
    f.take(len - from).read_to_end(&mut tail)?;
    let tail = std::str::from_utf8(&tail).ok().map(str::trim);
    match tail {
        // Blank: nothing to end.
        Some("") => Ok(()),
        // NB: the file is in append mode: this lands at its end.
        Some(t) if parse_entry(t).is_ok() => f.write_all(b"\n"),
        _ => file.set_len(from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Args {
        match v {
            Value::Object(m) => m.into(),
            _ => Args::default(),
        }
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let cases = [
            (
                "{\"tool\":\"t\",\"args\":{},\"output\":1}\nnot json",
                "c.jsonl:2: not a JSON object",
            ),
            ("[1]", "c.jsonl:1: expected a JSON object"),
            ("{\"args\":{},\"output\":1}", "c.jsonl:1: missing `tool`"),
            (
                "{\"tool\":\"t\",\"args\":[],\"output\":1}",
                "c.jsonl:1: `args` must be a JSON object",
            ),
            (
                "{\"tool\":\"t\",\"args\":{}}",
                "c.jsonl:1: missing `output`",
            ),
            (
                "\n\n{\"tool\":\"t\",\"args\":{},\"output\":1,\"latency_ms\":-3}",
                "c.jsonl:3: `latency_ms` must be an integer",
            ),
            (
                "{\"tool\":\"t\",\"args\":{},\"output\":1,\"step\":\"2\"}",
                "c.jsonl:1: `step` must be a non-negative integer",
            ),
        ];
        for (text, want) in cases {
            // NB: with its newline, so no line is a cut-short last line.
            let err = Cassette::parse(&format!("{text}\n"), "c.jsonl").unwrap_err();
            assert_eq!(err.kind, HostErrorKind::InvalidInput);
            assert!(
                err.message.starts_with(want),
                "{text:?}: got {}",
                err.message
            );
        }
    }

    #[test]
    fn a_cut_last_line_is_dropped_with_a_warning() {
        let good = r#"{"tool":"t","args":{},"output":1}"#;
        let c =
            Cassette::parse(&format!("{good}\n{good}\n{{\"tool\":\"t\",\"ar"), "c.jsonl").unwrap();
        assert_eq!(c.entries.len(), 2);
        assert_eq!(c.warnings.len(), 1);
        assert!(
            c.warnings[0].starts_with("c.jsonl:3: the last line is cut short"),
            "{:?}",
            c.warnings
        );
        // The same line with its newline, or anywhere but last, is still an error.
        for text in [
            format!("{good}\n{{\"tool\":\"t\",\"ar\n"),
            format!("{{\"tool\":\"t\",\"ar\n{good}"),
        ] {
            assert!(Cassette::parse(&text, "c.jsonl").is_err(), "{text}");
        }
        let e = Cassette::parse(
            "{\"tool\":\"t\",\"args\":{},\"output\":\"\\ud800\"}\n",
            "c.jsonl",
        )
        .unwrap_err();
        assert!(e.message.contains("lone surrogate"), "{}", e.message);
    }

    #[test]
    fn key_ignores_object_key_order() {
        let a = obj(json!({"a": 1, "b": {"x": 1, "y": 2}}));
        let b = obj(json!({"b": {"y": 2, "x": 1}, "a": 1}));
        assert_eq!(canonical_args(&a), canonical_args(&b));
        let c = obj(json!({"a": 1.0, "b": {"x": 1, "y": 2}}));
        assert_ne!(canonical_args(&a), canonical_args(&c));
    }

    #[test]
    fn same_key_served_in_order_then_last_repeats() {
        let text = [
            r#"{"tool":"t","args":{"q":"x"},"output":"first"}"#,
            r#"{"tool":"t","args":{"q":"y"},"output":"other"}"#,
            r#"{"tool":"t","args":{"q":"x"},"output":"second"}"#,
        ]
        .join("\n");
        let r = ReplayBackend::new(Cassette::parse(&text, "c").unwrap(), "c");
        let args = obj(json!({"q": "x"}));
        let got: Vec<Value> = (0..4)
            .map(|_| r.lookup("t", &args, None).unwrap().output.clone())
            .collect();
        assert_eq!(
            got,
            vec![
                json!("first"),
                json!("second"),
                json!("second"),
                json!("second")
            ]
        );
        assert_eq!(
            r.lookup("t", &obj(json!({"q": "y"})), None).unwrap().output,
            json!("other")
        );
    }

    #[test]
    fn identical_calls_are_told_apart_by_step() {
        // Recorded sequentially: the call at step 2 got "a", the one at step 3 got "b".
        let text = [
            r#"{"tool":"t","args":{"q":"x"},"output":"a","step":2}"#,
            r#"{"tool":"t","args":{"q":"x"},"output":"b","step":3}"#,
        ]
        .join("\n");
        let r = ReplayBackend::new(Cassette::parse(&text, "c").unwrap(), "c");
        let args = obj(json!({"q": "x"}));
        // The look-ahead asks for step 3 first: it still gets its own answer.
        assert_eq!(r.lookup("t", &args, Some(3)).unwrap().output, json!("b"));
        assert_eq!(r.lookup("t", &args, Some(2)).unwrap().output, json!("a"));
        // A step the cassette does not know (the plan changed): first unused, then the last.
        let r = r.fresh();
        assert_eq!(r.lookup("t", &args, Some(3)).unwrap().output, json!("b"));
        assert_eq!(r.lookup("t", &args, Some(9)).unwrap().output, json!("a"));
        assert_eq!(r.lookup("t", &args, Some(2)).unwrap().output, json!("b"));
        // Without steps in the call, recorded order as before.
        let r = r.fresh();
        assert_eq!(r.lookup("t", &args, None).unwrap().output, json!("a"));
        assert_eq!(r.lookup("t", &args, None).unwrap().output, json!("b"));
    }

    #[test]
    fn fresh_copies_share_the_cassette_but_not_the_cursors() {
        let text = [
            r#"{"tool":"t","args":{},"output":1}"#,
            r#"{"tool":"t","args":{},"output":2}"#,
        ]
        .join("\n");
        let a = ReplayBackend::new(Cassette::parse(&text, "c").unwrap(), "c");
        let args = Args::default();
        assert_eq!(a.lookup("t", &args, None).unwrap().output, json!(1));
        let b = a.fresh();
        assert_eq!(b.lookup("t", &args, None).unwrap().output, json!(1));
        assert_eq!(a.lookup("t", &args, None).unwrap().output, json!(2));
        assert_eq!(b.lookup("t", &args, None).unwrap().output, json!(2));
        assert_eq!(b.fresh().lookup("t", &args, None).unwrap().output, json!(1));
        assert!(Arc::ptr_eq(&a.index, &b.index));
    }

    #[test]
    fn miss_shows_closest_args() {
        let text = [
            r#"{"tool":"vector_search","args":{"query":"TiDB features","top_k":3},"output":"a"}"#,
            r#"{"tool":"vector_search","args":{"query":"TiKV storage","top_k":5},"output":"b"}"#,
            r#"{"tool":"llm_generate","args":{"prompt":"p","context":null},"output":"c"}"#,
        ]
        .join("\n");
        let r = ReplayBackend::new(Cassette::parse(&text, "c").unwrap(), "c.jsonl");
        let err = r
            .lookup(
                "vector_search",
                &obj(json!({"query": "TiDB feature", "top_k": 3})),
                None,
            )
            .unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::Replay);
        assert_eq!(
            err.message,
            "no entry in cassette c.jsonl for tool `vector_search` with args {\"query\":\"TiDB feature\",\"top_k\":3}; \
             closest recorded args for `vector_search`: {\"query\":\"TiDB features\",\"top_k\":3}"
        );
        let err = r
            .lookup(
                "retrieve_knowledge_graph",
                &obj(json!({"query": "x"})),
                None,
            )
            .unwrap_err();
        assert!(
            err.message.ends_with("the cassette has no entries for `retrieve_knowledge_graph` (it has: llm_generate, vector_search)"),
            "{}",
            err.message
        );
    }

    #[test]
    fn recording_resumes_after_a_cut_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let good = r#"{"tool":"t","args":{},"output":1}"#;
        std::fs::write(&path, format!("{good}\n{{\"tool\":\"t\",\"ar")).unwrap();
        let rec = Recorder::create(&path).unwrap();
        let e = CassetteEntry {
            tool: "u".into(),
            args: Map::new(),
            output: json!(2),
            latency_ms: None,
            step: Some(1),
            usage: None,
        };
        rec.record(&e).unwrap();
        let back = Cassette::load(&path).unwrap();
        assert_eq!(back.entries.len(), 2);
        assert_eq!(back.entries[1], e);
        assert!(back.warnings.is_empty());
        // A cut first (and only) line goes too; a whole file is left alone.
        std::fs::write(&path, "{\"tool\":").unwrap();
        drop(Recorder::create(&path).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"");
        std::fs::write(&path, format!("{good}\n")).unwrap();
        drop(Recorder::create(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{good}\n"));
        // A whole last entry without its newline (hand-written) is kept and ended.
        std::fs::write(&path, good).unwrap();
        drop(Recorder::create(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{good}\n"));
    }

    #[test]
    fn recorder_appends_lines_that_parse_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.jsonl");
        let rec = Recorder::create(&path).unwrap();
        let e = CassetteEntry {
            tool: "t".into(),
            args: obj(json!({"b": 1, "a": null})).to_map(),
            output: json!({"k": "v"}),
            latency_ms: Some(12),
            step: Some(4),
            usage: None,
        };
        rec.record(&e).unwrap();
        rec.record(&e).unwrap();
        let back = Cassette::load(&path).unwrap();
        assert_eq!(back.entries, vec![e.clone(), e]);
    }
}
