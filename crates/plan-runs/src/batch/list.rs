//! A batch's input: a directory of plans, or a list file of runs (`PLAN [CASSETTE]
//! [NAME=VALUE]...` per line), and the names of its runs.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A list file larger than this is refused (it is read whole).
const MAX_LIST_BYTES: u64 = 256 << 20;

/// Plan files a directory input picks up, by extension.
const PLAN_EXTENSIONS: &[&str] = &["json", "txt", "pbc"];

/// Suffix of the cassette beside a plan.
const CASSETTE_SUFFIX: &str = ".cassette.jsonl";

/// One run to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub plan: PathBuf,
    pub cassette: Option<PathBuf>,
    pub vars: Vec<(String, Value)>,
    /// Line in the list file (1-based), for list input.
    pub line: Option<usize>,
    /// The run's name: its --record and --trace files are named after it.
    pub name: String,
}

/// Names each run after its plan: the file name without its extension (`a.llm.txt` →
/// `a.llm`), the whole file name when two plans of a directory share that stem, and
/// `<stem>.line<N>` for a list (one plan may be listed many times).
pub fn name_runs(jobs: &mut [Job]) {
    let mut stems: HashMap<String, usize> = HashMap::new();
    for j in jobs.iter().filter(|j| j.line.is_none()) {
        *stems.entry(stem(&j.plan)).or_default() += 1;
    }
    let mut taken: HashSet<String> = HashSet::new();
    for j in jobs.iter_mut() {
        let s = stem(&j.plan);
        let name = match j.line {
            Some(n) => format!("{s}.line{n}"),
            None if stems.get(&s).copied().unwrap_or(0) > 1 => j
                .plan
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(s),
            None => s,
        };
        // Names can still meet (`a.json` and `a.txt` are named by their file names, which
        // is the stem of a third plan `a.json.txt`): number the later ones, so no two runs
        // share a file.
        let mut unique = name.clone();
        let mut k = 1;
        while !taken.insert(unique.clone()) {
            k += 1;
            unique = format!("{name}.{k}");
        }
        j.name = unique;
    }
}

/// A plan's file name without its extension.
pub(crate) fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Plan files of `dir`, sorted by name, each with its sibling cassette when `siblings`.
pub fn scan_dir(dir: &Path, siblings: bool) -> Result<Vec<Job>, String> {
    let shown = dir.display();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {shown}: {e}"))?;
        // NB: names that are not UTF-8 cannot be shown faithfully in the JSON output.
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let ext = Path::new(&name).extension().and_then(|e| e.to_str());
        let is_plan = ext.is_some_and(|e| PLAN_EXTENSIONS.contains(&e))
            && !name.starts_with('.')
            && std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file());
        if is_plan {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(format!("no plan files (*.json, *.txt, *.pbc) in {shown}"));
    }
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| Job {
            cassette: if siblings {
                sibling_cassette(dir, &name)
            } else {
                None
            },
            plan: dir.join(name),
            vars: Vec::new(),
            line: None,
            name: String::new(),
        })
        .collect())
}

/// `<stem>.cassette.jsonl` beside `name`, trying the longest stem first (`a.llm.txt`:
/// `a.llm.cassette.jsonl`, then `a.cassette.jsonl`), so variants of one plan can share
/// its cassette.
fn sibling_cassette(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut stem = name;
    while let Some((shorter, _)) = stem.rsplit_once('.') {
        if shorter.is_empty() {
            break;
        }
        let candidate = dir.join(format!("{shorter}{CASSETTE_SUFFIX}"));
        if candidate.is_file() {
            return Some(candidate);
        }
        stem = shorter;
    }
    None
}

pub fn read_list(path: &Path) -> Result<Vec<Job>, String> {
    let shown = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut bytes = Vec::new();
    f.take(MAX_LIST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_LIST_BYTES {
        return Err(format!("{shown} is larger than {MAX_LIST_BYTES} bytes"));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{shown}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    let base = path.parent().unwrap_or(Path::new(""));
    parse_list(&text, base, &shown).map_err(|errs| errs.join("\n"))
}

/// Parses a list file; every malformed line is reported (`name:line: message`).
fn parse_list(text: &str, base: &Path, name: &str) -> Result<Vec<Job>, Vec<String>> {
    let mut jobs = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        match parse_line(line, base) {
            Ok(Some(mut job)) => {
                job.line = Some(n);
                jobs.push(job);
            }
            Ok(None) => {}
            Err(msg) => errors.push(format!("{name}:{n}: {msg}")),
        }
    }
    if errors.is_empty() {
        Ok(jobs)
    } else {
        Err(errors)
    }
}

fn parse_line(line: &str, base: &Path) -> Result<Option<Job>, String> {
    let fields = split_fields(line)?;
    let mut fields = fields.into_iter();
    let Some(plan) = fields.next() else {
        return Ok(None);
    };
    if is_var(&plan) {
        return Err(format!(
            "expected the plan's path first, got the variable `{plan}`"
        ));
    }
    let resolve = |field: &str| -> Result<PathBuf, String> {
        let p = PathBuf::from(unquote(field)?);
        Ok(if p.is_absolute() { p } else { base.join(p) })
    };
    let mut job = Job {
        plan: resolve(&plan)?,
        cassette: None,
        vars: Vec::new(),
        line: None,
        name: String::new(),
    };
    for (k, field) in fields.enumerate() {
        if is_var(&field) {
            job.vars.push(parse_var(&field)?);
        } else if field.starts_with('=') {
            return Err(format!("`{field}`: the variable name before `=` is empty"));
        } else if k == 0 {
            job.cassette = Some(resolve(&field)?);
        } else {
            return Err(format!(
                "unexpected `{field}`: expected NAME=VALUE (a cassette comes right after the plan)"
            ));
        }
    }
    Ok(Some(job))
}

/// `NAME=...` with NAME made of ASCII letters, digits and `_` (a path has `/` or `.`).
fn is_var(field: &str) -> bool {
    field.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A path field: a JSON string when quoted, else as written.
fn unquote(field: &str) -> Result<String, String> {
    if field.starts_with('"') {
        serde_json::from_str::<String>(field).map_err(|e| format!("bad quoted path {field}: {e}"))
    } else {
        Ok(field.to_owned())
    }
}

/// Splits on whitespace outside double quotes (kept, with their backslash escapes, for
/// the field's own parser); a field starting with `#` ends the line.
fn split_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if in_quotes {
            cur.push(c);
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        cur.push(next);
                    }
                }
                '"' => in_quotes = false,
                _ => {}
            }
        } else if c.is_whitespace() {
            if !cur.is_empty() {
                fields.push(std::mem::take(&mut cur));
            }
        } else if c == '#' && cur.is_empty() {
            return Ok(fields);
        } else {
            if c == '"' {
                in_quotes = true;
            }
            cur.push(c);
        }
    }
    if in_quotes {
        return Err("unterminated double quote".into());
    }
    if !cur.is_empty() {
        fields.push(cur);
    }
    Ok(fields)
}

/// `NAME=VALUE`: VALUE parsed as JSON when it parses, else taken as a string.
pub fn parse_var(s: &str) -> Result<(String, Value), String> {
    let Some((name, value)) = s.split_once('=') else {
        return Err(format!("expected NAME=VALUE, got `{s}`"));
    };
    let name = name.trim();
    if name.is_empty() {
        return Err("the variable name before `=` is empty".into());
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((name.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_lines_table() {
        let base = Path::new("/lists");
        // (line, plan, cassette, vars) or the error's start
        let ok: &[(&str, &str, Option<&str>, Value)] = &[
            ("a.json", "/lists/a.json", None, json!([])),
            ("  a.json   # note", "/lists/a.json", None, json!([])),
            (
                "sub/a.json c.jsonl n=3 s=hi",
                "/lists/sub/a.json",
                Some("/lists/c.jsonl"),
                json!([["n", 3], ["s", "hi"]]),
            ),
            (
                "/abs/a.json q=\"two words\" o={\"k\":[1,2]}",
                "/abs/a.json",
                None,
                json!([["q", "two words"], ["o", {"k": [1, 2]}]]),
            ),
            (
                "\"my plan.json\" \"my cassette.jsonl\" t=\"say \\\"hi\\\"\"",
                "/lists/my plan.json",
                Some("/lists/my cassette.jsonl"),
                json!([["t", "say \"hi\""]]),
            ),
            (
                "a.json tag=#1",
                "/lists/a.json",
                None,
                json!([["tag", "#1"]]),
            ),
        ];
        for (line, plan, cassette, vars) in ok {
            let job = parse_line(line, base)
                .unwrap_or_else(|e| panic!("{line}: {e}"))
                .unwrap_or_else(|| panic!("{line}: no job"));
            assert_eq!(job.plan, PathBuf::from(plan), "{line}");
            assert_eq!(job.cassette, cassette.map(PathBuf::from), "{line}");
            let got: Vec<Value> = job.vars.iter().map(|(n, v)| json!([n, v])).collect();
            assert_eq!(Value::Array(got), *vars, "{line}");
        }
        for blank in ["", "   ", "# comment", "  #x y z"] {
            assert_eq!(parse_line(blank, base), Ok(None), "{blank:?}");
        }
        let bad = [
            ("a.json c.jsonl d.jsonl", "unexpected `d.jsonl`"),
            ("n=3 a.json", "expected the plan's path first"),
            ("a.json q=\"open", "unterminated double quote"),
            ("a.json =3", "`=3`: the variable name before `=` is empty"),
        ];
        for (line, want) in bad {
            let err = parse_line(line, base).expect_err(line);
            assert!(err.starts_with(want), "{line}: {err}");
        }
    }

    #[test]
    fn list_errors_name_every_bad_line() {
        let text = "a.json\nb.json x y\n\nc.json \"\n";
        let errs = parse_list(text, Path::new(""), "runs.txt").expect_err("two bad lines");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("runs.txt:2: "), "{errs:?}");
        assert!(errs[1].starts_with("runs.txt:4: "), "{errs:?}");
        let jobs = parse_list("# runs\na.json\n\nb.json\n", Path::new("d"), "l").unwrap();
        let lines: Vec<_> = jobs.iter().map(|j| (j.plan.clone(), j.line)).collect();
        assert_eq!(
            lines,
            vec![
                (PathBuf::from("d/a.json"), Some(2)),
                (PathBuf::from("d/b.json"), Some(4))
            ]
        );
    }

    #[test]
    fn run_names_never_meet() {
        let job = |plan: &str, line: Option<usize>| Job {
            plan: PathBuf::from(plan),
            cassette: None,
            vars: Vec::new(),
            line,
            name: String::new(),
        };
        let mut jobs = vec![
            job("d/a.json", None),
            job("d/a.txt", None),
            job("d/a.json.txt", None),
            job("d/b.llm.txt", None),
            job("d/a.json", Some(3)),
        ];
        name_runs(&mut jobs);
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["a.json", "a.txt", "a.json.2", "b.llm", "a.line3"]);
    }

    #[test]
    fn sibling_cassettes_prefer_the_longest_stem() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "a.json",
            "a.llm.txt",
            "a.cassette.jsonl",
            "b.v2.json",
            "b.v2.cassette.jsonl",
        ] {
            std::fs::write(d.join(f), "").unwrap();
        }
        assert_eq!(
            sibling_cassette(d, "a.json"),
            Some(d.join("a.cassette.jsonl"))
        );
        assert_eq!(
            sibling_cassette(d, "a.llm.txt"),
            Some(d.join("a.cassette.jsonl"))
        );
        assert_eq!(
            sibling_cassette(d, "b.v2.json"),
            Some(d.join("b.v2.cassette.jsonl"))
        );
        assert_eq!(sibling_cassette(d, "c.json"), None);
        assert_eq!(sibling_cassette(d, ".json"), None);
    }
}
