//! `plan-render`: what the two CLIs (`planc`, `planvm`) print, as text. This is the only
//! place plan diagnostics and runs become bytes for people: the compiler and the engine
//! hand back plain data (`plan_syntax::Diagnostic`, `RunReport`, store rows) and the CLI
//! picks the format and writes it.
//!
//! - [`render_human`]: rustc-like, with the source snippet (codespan-reporting).
//! - [`render_json`]: one JSON object per line, for tools and for feeding back to an LLM.
//! - [`summary`]: the `plan.json: 2 errors, 1 warning` line.
//! - [`runs`]: reports, `ask`'s outcome, runs, goals and sessions, as text or JSON.
//! - [`tools`]: the tools of a tools file, as `planvm tools list` shows them.
//! - [`exit`]: the exit codes of both CLIs, and the one mapping from what went wrong to
//!   them. [`color_stderr`]: when they colour.

pub mod exit;
pub mod runs;
pub mod tools;

/// Whether diagnostics on stderr get colour: only on a terminal, and not when `NO_COLOR`
/// is set to a non-empty value (no-color.org). One rule for both CLIs.
pub fn color_stderr() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label, Severity as CsSeverity};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor};
use plan_syntax::{Diagnostic, LineIndex, Severity, Span};
use std::ops::Range;

/// Diagnostics of one code shown in full by [`render_human`]; the rest are counted.
pub const MAX_SHOWN_PER_CODE: usize = 20;
/// Lines longer than this (bytes) are shown as a window around the span, as rustc does:
/// a minified plan is one line, and printing it whole per diagnostic made the output grow
/// with warnings × plan size.
const MAX_LINE_BYTES: usize = 200;
/// Bytes of context each side of a span in a window, and of a long span shown.
const WINDOW_CONTEXT: usize = 60;
const MAX_SPAN_SHOWN: usize = 120;

/// Renders `diags` about the file `file_name` (whose text is `src`) like rustc does:
/// `error[E0101]: message`, the source snippet with the primary span underlined,
/// secondary labels, and the help line as `= help: ...`.
///
/// Output stays linear in the input: a long line is shown as a window around the span,
/// and after [`MAX_SHOWN_PER_CODE`] diagnostics of one code the rest are counted in one
/// note per code ([`render_json`] keeps them all).
///
/// `color` selects ANSI escapes; the caller decides (terminal and `NO_COLOR`).
pub fn render_human(file_name: &str, src: &str, diags: &[Diagnostic], color: bool) -> String {
    let file = SimpleFile::new(file_name, src);
    let index = LineIndex::new(src);
    let config = term::Config::default();
    let mut buf = if color {
        termcolor::Buffer::ansi()
    } else {
        termcolor::Buffer::no_color()
    };
    // code → (shown, hidden), and the order codes were first hidden in.
    let mut per_code: std::collections::HashMap<&str, (usize, usize)> = Default::default();
    let mut hidden_order: Vec<(&str, Severity)> = Vec::new();
    for d in diags {
        let (shown, hidden) = per_code.entry(d.code).or_default();
        if *shown >= MAX_SHOWN_PER_CODE {
            if *hidden == 0 {
                hidden_order.push((d.code, d.severity));
            }
            *hidden += 1;
            continue;
        }
        *shown += 1;
        if touches_long_line(src, &index, d) {
            buf = append(buf, windowed(file_name, src, &index, d).as_bytes());
            continue;
        }
        let cs = to_codespan(src, d);
        if term::emit(&mut buf, &config, &file, &cs).is_err() {
            // NB: unreachable with clamped spans, but a renderer hiccup must not lose the
            // diagnostic itself: fall back to the one-line form.
            let line = format!("{}[{}]: {}\n\n", d.severity.as_str(), d.code, d.message);
            buf = append(buf, line.as_bytes());
        }
    }
    for (code, severity) in hidden_order {
        let n = per_code.get(code).map_or(0, |c| c.1);
        let s = if n == 1 { "" } else { "s" };
        let note = format!(
            "note: {n} more {}[{code}] diagnostic{s} not shown (`--format json` lists every one)\n\n",
            severity.as_str()
        );
        buf = append(buf, note.as_bytes());
    }
    String::from_utf8_lossy(buf.as_slice()).into_owned()
}

/// Whether a line the diagnostic's spans start or end on is too long to print whole.
fn touches_long_line(src: &str, index: &LineIndex, d: &Diagnostic) -> bool {
    let spans = d.span.iter().chain(d.labels.iter().map(|(s, _)| s));
    spans
        .flat_map(|s| [s.start, s.end])
        .any(|at| index.line_bounds(at.min(src.len() as u32)).len() > MAX_LINE_BYTES)
}

/// The largest char boundary of `src` at or below `i`.
fn floor_char(src: &str, mut i: usize) -> usize {
    i = i.min(src.len());
    while !src.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A diagnostic on a long line: the window of the line around the primary span, with
/// the span underlined; secondary labels and help as notes. Work and output are bounded
/// per diagnostic, whatever the line's length.
fn windowed(file_name: &str, src: &str, index: &LineIndex, d: &Diagnostic) -> String {
    let mut out = format!("{}[{}]: {}\n", d.severity.as_str(), d.code, d.message);
    let gutter;
    if let Some(span) = d.span {
        let span = clamp(src, span);
        let (line, col) = index.line_col(span.start as u32);
        let bounds = index.line_bounds(span.start as u32);
        let line_end = floor_char(src, bounds.end);
        let line_end = if src[..line_end].ends_with('\r') {
            line_end - 1
        } else {
            line_end
        };
        let s = span.start.clamp(bounds.start, line_end);
        let e = span.end.clamp(s, line_end);
        let shown_end = floor_char(src, e.min(s + MAX_SPAN_SHOWN));
        let w_start = floor_char(src, s.saturating_sub(WINDOW_CONTEXT).max(bounds.start));
        let w_end = floor_char(src, (shown_end + WINDOW_CONTEXT).min(line_end));
        let before = if w_start > bounds.start { "…" } else { "" };
        let after = if w_end < line_end { "…" } else { "" };
        let text: String = src[w_start..w_end]
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let lead = before.chars().count() + src[w_start..s].chars().count();
        let width = src[s..shown_end].chars().count().max(1);
        let more = if shown_end < e { "…" } else { "" };
        let num = line.to_string();
        gutter = " ".repeat(num.len());
        out.push_str(&format!("{gutter} ┌─ {file_name}:{line}:{col}\n"));
        out.push_str(&format!("{gutter} │\n"));
        out.push_str(&format!("{num} │ {before}{text}{after}\n"));
        out.push_str(&format!(
            "{gutter} │ {}{}{more}\n",
            " ".repeat(lead),
            "^".repeat(width)
        ));
        out.push_str(&format!("{gutter} │\n"));
    } else {
        gutter = String::new();
    }
    for (span, text) in &d.labels {
        let (line, col) = index.line_col(span.start);
        out.push_str(&format!(
            "{gutter} = note: {text} ({file_name}:{line}:{col})\n"
        ));
    }
    if d.span.is_none()
        && let Some(seq) = d.seq_no
    {
        out.push_str(&format!(
            "{gutter} = in the instruction with seq_no {seq}\n"
        ));
    }
    if let Some(help) = &d.help {
        out.push_str(&format!("{gutter} = help: {help}\n"));
    }
    out.push('\n');
    out
}

fn append(mut buf: termcolor::Buffer, bytes: &[u8]) -> termcolor::Buffer {
    use std::io::Write;
    // Writing into an in-memory buffer cannot fail.
    let _ = buf.write_all(bytes);
    buf
}

fn to_codespan(src: &str, d: &Diagnostic) -> CsDiagnostic<()> {
    let severity = match d.severity {
        Severity::Error => CsSeverity::Error,
        Severity::Warning => CsSeverity::Warning,
    };
    let mut labels = Vec::with_capacity(1 + d.labels.len());
    if let Some(span) = d.span {
        labels.push(Label::primary((), clamp(src, span)));
    }
    for (span, text) in &d.labels {
        labels.push(Label::secondary((), clamp(src, *span)).with_message(text));
    }
    let mut notes = Vec::new();
    if d.span.is_none()
        && let Some(seq) = d.seq_no
    {
        // Without a snippet, the seq_no is the only way to find the instruction.
        notes.push(format!("in the instruction with seq_no {seq}"));
    }
    if let Some(help) = &d.help {
        notes.push(format!("help: {help}"));
    }
    CsDiagnostic::new(severity)
        .with_code(d.code)
        .with_message(&d.message)
        .with_labels(labels)
        .with_notes(notes)
}

/// Spans come from the compiler, but the renderer slices the source with them: keep them
/// inside the text and on char boundaries so a wrong span degrades the snippet, not the run.
fn clamp(src: &str, span: Span) -> Range<usize> {
    let start = floor_char(src, span.start as usize);
    let end = floor_char(src, span.end as usize).max(start);
    start..end
}

/// One JSON object per diagnostic and line, fields in this order: `file`, `severity`
/// (`"error"` | `"warning"`), `code`, `message`, `seq_no` (or null), `line`, `column`
/// (1-based; null without a span), `help` (or null).
pub fn render_json(file_name: &str, diags: &[Diagnostic], index: &LineIndex) -> String {
    let mut out = String::new();
    for d in diags {
        out.push_str(&diagnostic_json(file_name, d, index).to_string());
        out.push('\n');
    }
    out
}

/// One diagnostic as [`render_json`] writes it.
pub fn diagnostic_json(file_name: &str, d: &Diagnostic, index: &LineIndex) -> serde_json::Value {
    let (line, column) = match d.line_col(index) {
        Some((l, c)) => (Some(l), Some(c)),
        None => (None, None),
    };
    // NB: the workspace enables serde_json's `preserve_order`, so `json!` keeps the field
    // order written here; consumers may rely on it for readability only.
    serde_json::json!({
        "file": file_name,
        "severity": d.severity.as_str(),
        "code": d.code,
        "message": d.message,
        "seq_no": d.seq_no,
        "line": line,
        "column": column,
        "help": d.help,
    })
}

/// Error and warning counts of one file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub errors: usize,
    pub warnings: usize,
}

impl Counts {
    pub fn of(diags: &[Diagnostic]) -> Self {
        let errors = diags.iter().filter(|d| d.is_error()).count();
        Counts {
            errors,
            warnings: diags.len() - errors,
        }
    }
}

/// `plan.json: 2 errors, 1 warning`. Under `--deny-warnings` the line says so when there
/// are warnings, so that exit code 1 next to "0 errors" is not a puzzle.
pub fn summary(file_name: &str, counts: Counts, deny_warnings: bool) -> String {
    fn plural(n: usize, word: &str) -> String {
        if n == 1 {
            format!("{n} {word}")
        } else {
            format!("{n} {word}s")
        }
    }
    let denied = if deny_warnings && counts.warnings > 0 {
        " (warnings denied)"
    } else {
        ""
    };
    format!(
        "{file_name}: {}, {}{denied}",
        plural(counts.errors, "error"),
        plural(counts.warnings, "warning")
    )
}

/// Characters of a value shown in a command's text output (`runs show`, `runs list`).
pub const SHOW_PREVIEW: usize = 100;

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_441_543_000), "2026-11-23T13:45:43Z");
    }

    const SRC: &str = "[\n  {\"seq_no\": 0, \"type\": \"calling\",\n   \"parameters\": {\"tool_name\": \"nope\"}}\n]\n";

    fn span_of(needle: &str) -> Span {
        let start = SRC.find(needle).expect("needle in SRC");
        Span::new(start, start + needle.len())
    }

    fn sample() -> Vec<Diagnostic> {
        vec![
            Diagnostic::error("E0301", "unknown tool `nope`")
                .with_span(span_of("\"nope\""))
                .with_seq(Some(0))
                .with_help("use one of: llm_generate, vector_search")
                .with_label(span_of("\"calling\""), "in this `calling` instruction"),
            Diagnostic::warning("W0101", "no path sets `final_answer`"),
            Diagnostic::warning("W0102", "instruction never runs").with_seq(Some(7)),
        ]
    }

    #[test]
    fn human_has_code_snippet_labels_and_help() {
        let out = render_human("plan.json", SRC, &sample(), false);
        let expected = r#"error[E0301]: unknown tool `nope`
  ┌─ plan.json:3:32
  │
2 │   {"seq_no": 0, "type": "calling",
  │                         --------- in this `calling` instruction
3 │    "parameters": {"tool_name": "nope"}}
  │                                ^^^^^^
  │
  = help: use one of: llm_generate, vector_search

warning[W0101]: no path sets `final_answer`

warning[W0102]: instruction never runs
 = in the instruction with seq_no 7

"#;
        assert_eq!(out, expected);
    }

    #[test]
    fn long_lines_are_windowed_and_codes_capped() {
        // One 40 KB line with 100 diagnostics of one code: each shows a window, 20 are
        // shown, the rest counted.
        let cell = r#""k": "v", "#;
        let src = format!("{{{}\"end\": \"ünï\"}}", cell.repeat(4000));
        let at = src.find("ünï").unwrap();
        let mut diags: Vec<Diagnostic> = (0..100)
            .map(|i| {
                let s = i * cell.len() + 1;
                Diagnostic::warning("W1", format!("cell {i}")).with_span(Span::new(s, s + 3))
            })
            .collect();
        diags.push(
            Diagnostic::error("E1", "near the end")
                .with_span(Span::new(at, at + "ünï".len()))
                .with_help("fix it"),
        );
        let out = render_human("min.json", &src, &diags, false);
        assert!(out.len() < 20_000, "{} bytes", out.len());
        assert_eq!(out.matches("warning[W1]: ").count(), 20);
        assert!(
            out.contains("note: 80 more warning[W1] diagnostics not shown"),
            "{out}"
        );
        let tail = &out[out.find("error[E1]").unwrap()..];
        let expected_col = src[..at].chars().count() + 1;
        assert!(
            tail.contains(&format!("min.json:1:{expected_col}")),
            "{tail}"
        );
        // The underline sits under the span, counted in chars.
        let lines: Vec<&str> = tail.lines().collect();
        let code_line = lines[3];
        let caret_line = lines[4];
        let caret = caret_line.find('^').unwrap();
        assert_eq!(&caret_line[caret..], "^^^");
        let prefix = caret_line[..caret].chars().count();
        let under: String = code_line.chars().skip(prefix).take(3).collect();
        assert_eq!(under, "ünï", "{code_line}\n{caret_line}");
        assert!(tail.contains("= help: fix it"), "{tail}");
    }

    #[test]
    fn human_color_only_when_asked() {
        let plain = render_human("plan.json", SRC, &sample(), false);
        let colored = render_human("plan.json", SRC, &sample(), true);
        assert!(!plain.contains('\x1b'));
        assert!(colored.contains("\x1b["));
    }

    #[test]
    fn human_survives_bad_spans() {
        // Past the end, reversed, and inside a multi-byte char: clamped, never a panic.
        let src = "[\"é\"]";
        let diags = vec![
            Diagnostic::error("E1", "past end").with_span(Span { start: 90, end: 99 }),
            Diagnostic::error("E2", "reversed").with_span(Span { start: 3, end: 1 }),
            Diagnostic::error("E3", "mid char").with_span(Span { start: 3, end: 3 }),
        ];
        let out = render_human("x.json", src, &diags, false);
        for code in ["error[E1]", "error[E2]", "error[E3]"] {
            assert!(out.contains(code), "{code} missing in {out}");
        }
    }

    #[test]
    fn json_lines_have_exact_fields() {
        let index = LineIndex::new(SRC);
        let out = render_json("plan.json", &sample(), &index);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                r#"{"file":"plan.json","severity":"error","code":"E0301","message":"unknown tool `nope`","seq_no":0,"line":3,"column":32,"help":"use one of: llm_generate, vector_search"}"#,
                r#"{"file":"plan.json","severity":"warning","code":"W0101","message":"no path sets `final_answer`","seq_no":null,"line":null,"column":null,"help":null}"#,
                r#"{"file":"plan.json","severity":"warning","code":"W0102","message":"instruction never runs","seq_no":7,"line":null,"column":null,"help":null}"#,
            ]
        );
    }

    #[test]
    fn json_escapes_and_counts_columns_in_chars() {
        let src = "[\"é\", \"x\"]";
        let start = src.find("\"x\"").expect("x");
        let d =
            Diagnostic::error("E9", "quote \" and\nnewline").with_span(Span::new(start, start + 3));
        let out = render_json("dir/ü.json", &[d], &LineIndex::new(src));
        let v: serde_json::Value = serde_json::from_str(out.trim_end()).expect("valid JSON");
        assert_eq!(v["message"], "quote \" and\nnewline");
        assert_eq!(v["file"], "dir/ü.json");
        // `é` is two bytes but one column.
        assert_eq!(
            (v["line"].as_u64(), v["column"].as_u64()),
            (Some(1), Some(7))
        );
        assert_eq!(out.matches('\n').count(), 1, "one line per diagnostic");
    }

    #[test]
    fn summary_pluralises() {
        let c = Counts::of(&sample());
        assert_eq!(
            c,
            Counts {
                errors: 1,
                warnings: 2
            }
        );
        assert_eq!(
            summary("plan.json", c, false),
            "plan.json: 1 error, 2 warnings"
        );
        assert_eq!(
            summary("plan.json", c, true),
            "plan.json: 1 error, 2 warnings (warnings denied)"
        );
        assert_eq!(
            summary("a", Counts::default(), false),
            "a: 0 errors, 0 warnings"
        );
        assert_eq!(
            summary("a", Counts::default(), true),
            "a: 0 errors, 0 warnings"
        );
    }
}
