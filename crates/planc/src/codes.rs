//! `planc codes`: every code, listed or explained.

use std::io::Write;

use clap::Args;
use plan_render::exit;

use crate::front::Format;

#[derive(Args, Debug)]
pub(crate) struct CodesArgs {
    /// One code to explain (`E0202`); all of them when left out.
    #[arg(value_name = "CODE")]
    code: Option<String>,
    /// Output format: a table for people, or one JSON object per code.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Every code: each diagnostic any front end emits (the reader's with the unreadable
/// file, the plan structure's, the verifier's, the `--strict` forms of the reader's
/// repairs) and each run error.
pub(crate) fn all_codes() -> Vec<plan_syntax::codes::CodeDoc> {
    use plan_syntax::codes::{self, CodeDoc};
    let mut all = codes::ALL.to_vec();
    all.extend_from_slice(plan_compiler::ALL);
    all.extend_from_slice(plan_vm::codes::ALL);
    for &(repair, strict) in codes::STRICT_REPAIRS {
        if let Some(r) = codes::ALL.iter().find(|c| c.code == repair) {
            all.push(CodeDoc {
                code: strict,
                name: r.name,
                doc: r.doc,
            });
        }
    }
    all.sort_by_key(|c| c.code);
    all
}

/// `planc codes [CODE]`.
pub(crate) fn cmd_codes(a: &CodesArgs) -> u8 {
    let all = all_codes();
    let chosen: Vec<_> = match &a.code {
        None => all.iter().collect(),
        Some(want) => {
            let want = want.trim().to_ascii_uppercase();
            match all.iter().find(|c| c.code == want) {
                Some(c) => vec![c],
                None => {
                    eprintln!("error: no code `{want}` (`planc codes` lists them)");
                    return exit::USAGE;
                }
            }
        }
    };
    let mut out = std::io::stdout().lock();
    for c in chosen {
        let doc: Vec<&str> = c.doc.lines().map(str::trim).collect();
        let severity = c.severity().as_str();
        let kind = if c.is_run_error() {
            "a run error"
        } else if c.is_repair() {
            if c.code.starts_with('E') {
                "a reader repair refused by --strict"
            } else {
                "a reader repair"
            }
        } else {
            ""
        };
        let line = match a.format {
            Format::Json => serde_json::json!({
                "code": c.code,
                "severity": severity,
                "repair": c.is_repair(),
                "run": c.is_run_error(),
                "doc": doc.join(" "),
            })
            .to_string(),
            Format::Human if a.code.is_some() => {
                let mut text = format!("{} ({severity}", c.code);
                if !kind.is_empty() {
                    text.push_str(&format!(", {kind}"));
                }
                text.push_str(&format!(")\n{}", doc.join("\n")));
                text
            }
            Format::Human => format!("{}  {severity:<7}  {}", c.code, doc.join(" ")),
        };
        if writeln!(out, "{line}").is_err() {
            break;
        }
    }
    exit::OK
}
