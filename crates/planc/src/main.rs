//! `planc`: the plan compiler's command line.
//!
//! ```text
//! planc compile PLAN [-o OUT.pbc] [--strip] [--strict] [--tools FILE.toml] [--quiet]
//! planc check PLAN... [--format human|json] [--deny-warnings] [--strict] [--tools FILE.toml]
//! planc disasm FILE.pbc
//! planc explain PLAN [--dot] [--strict] [--tools FILE.toml]
//! ```
//!
//! Exit codes: `plan_render::exit::PLANC` (printed by `planc --help`). A plan that cannot
//! be read is not 66: it is an `E0000` diagnostic like any other plan error, so `check a b
//! c` checks them all.
//!
//! Module map: this file parses arguments and runs the subcommands; `render` turns
//! diagnostics into human or JSON text; `explain` renders the dataflow list and graph;
//! `backend` is the thin seam to the bytecode and manifest crates. Only this crate prints:
//! the compiler returns diagnostics as data.

mod backend;
mod explain;

use clap::{Args, Parser, Subcommand, ValueEnum};
use plan_compiler::{CompileOptions, Compiled};
use plan_render::Counts;
use plan_syntax::{Diagnostic, LineIndex};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use plan_render::exit;

#[derive(Parser, Debug)]
#[command(
    name = "planc",
    version,
    about = "Compile LLM-written JSON plans to verified .pbc bytecode",
    after_help = exit::help(exit::PLANC)
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compile a plan to bytecode (written only when there are no errors).
    Compile(CompileArgs),
    /// Check plans and report every diagnostic.
    Check(CheckArgs),
    /// Print the listing of a .pbc file (after validating it).
    Disasm(DisasmArgs),
    /// Show the plan's steps and their dataflow dependencies.
    Explain(ExplainArgs),
    /// List the diagnostic and run error codes, or explain one (`planc codes E0202`,
    /// `planc codes R0005`).
    Codes(CodesArgs),
}

#[derive(Args, Debug)]
struct CodesArgs {
    /// One code to explain (`E0202`); all of them when left out.
    #[arg(value_name = "CODE")]
    code: Option<String>,
    /// Output format: a table for people, or one JSON object per code.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

/// Options that change what the compiler accepts.
#[derive(Args, Debug)]
struct FrontendArgs {
    /// Treat reader repairs (fences, trailing commas, Python literals, ...) as errors.
    #[arg(long)]
    strict: bool,
    /// Tool manifest adding or overriding tools (the same file planvm uses).
    #[arg(long, value_name = "FILE.toml")]
    tools: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct CompileArgs {
    /// The plan (JSON, or LLM output containing it).
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// Output file [default: PLAN with the extension replaced by .pbc].
    #[arg(short, long, value_name = "OUT.pbc")]
    output: Option<PathBuf>,
    /// Drop the debug section (seq_no/line map, reasoning text).
    #[arg(long)]
    strip: bool,
    /// Do not report what was written.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    frontend: FrontendArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    /// Like rustc, with source snippets, on stderr.
    Human,
    /// One JSON object per diagnostic and line, on stdout.
    Json,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// Plans to check.
    #[arg(value_name = "PLAN", required = true)]
    plans: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Exit with 1 when there are warnings, too.
    #[arg(long)]
    deny_warnings: bool,
    #[command(flatten)]
    frontend: FrontendArgs,
}

#[derive(Args, Debug)]
struct DisasmArgs {
    /// A compiled plan.
    #[arg(value_name = "FILE.pbc")]
    file: PathBuf,
}

#[derive(Args, Debug)]
struct ExplainArgs {
    /// The plan.
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// Print a Graphviz digraph of the dataflow instead of the list.
    #[arg(long)]
    dot: bool,
    #[command(flatten)]
    frontend: FrontendArgs,
}

/// Every code: each diagnostic any front end emits (the reader's with the unreadable
/// file, the plan structure's, the verifier's, the `--strict` forms of the reader's
/// repairs) and each run error.
fn all_codes() -> Vec<plan_syntax::codes::CodeDoc> {
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
fn cmd_codes(a: &CodesArgs) -> u8 {
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

fn main() -> ExitCode {
    // NB: `Cli::parse()` would exit by itself; going through `try_parse` keeps every exit
    // in one place. clap prints help/version with code 0 and usage errors with code 2.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            });
        }
    };
    let code = match cli.command {
        Command::Compile(a) => cmd_compile(&a),
        Command::Check(a) => cmd_check(&a),
        Command::Disasm(a) => cmd_disasm(&a),
        Command::Explain(a) => cmd_explain(&a),
        Command::Codes(a) => cmd_codes(&a),
    };
    ExitCode::from(code)
}

/// Diagnostics go to stderr: the CLIs' one colour rule.
fn use_color() -> bool {
    plan_render::color_stderr()
}

/// Writes to stdout. A closed pipe (`planc disasm x.pbc | head`) is not an error worth a
/// panic, which is what `print!` would do.
fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

fn err(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A plan file's text, or the diagnostic saying why there is none.
struct Source {
    name: String,
    text: Result<String, Diagnostic>,
}

fn read_plan(path: &Path) -> Source {
    let name = path.display().to_string();
    // NB: capped as planvm reads it: a larger file is never slurped whole, and is refused
    // by its size before anything looks at its bytes (a cut may split a character).
    let max = plan_syntax::limits::MAX_SOURCE_BYTES;
    let text = match plan_compiler::read_capped(path) {
        Err(e) => Err(Diagnostic::error(
            plan_syntax::codes::UNREADABLE,
            format!("cannot read `{name}`: {e}"),
        )),
        Ok(bytes) if bytes.len() > max => Err(Diagnostic::error(
            plan_syntax::codes::TOO_LARGE,
            format!("`{name}` is larger than {max} bytes (16 MiB), the most a plan may be"),
        )
        .with_help("a plan is a few kilobytes of JSON: send only the instruction array")),
        Ok(bytes) => String::from_utf8(bytes).map_err(|e| {
            Diagnostic::error(
                plan_syntax::codes::UNREADABLE,
                format!(
                    "`{name}` is not UTF-8 text (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            )
            .with_help("plans are JSON text; save the file as UTF-8")
        }),
    };
    Source { name, text }
}

/// Compile options from the command line, or the usage error already printed.
fn options(frontend: &FrontendArgs, strip: bool, source_name: &str) -> Result<CompileOptions, u8> {
    let mut opts = CompileOptions {
        strict: frontend.strict,
        strip,
        source_name: Some(source_name.to_owned()),
        ..CompileOptions::default()
    };
    if let Some(path) = &frontend.tools {
        match backend::load_manifest(path) {
            Ok(m) => opts.manifest = m,
            Err(e) => {
                err(&format!("error: {e}\n"));
                return Err(exit::USAGE);
            }
        }
    }
    Ok(opts)
}

/// Prints diagnostics and the summary line on stderr (human format).
fn report_human(name: &str, src: &str, diags: &[Diagnostic], deny_warnings: bool) {
    let mut text = plan_render::render_human(name, src, diags, use_color());
    text.push_str(&plan_render::summary(
        name,
        Counts::of(diags),
        deny_warnings,
    ));
    text.push('\n');
    err(&text);
}

fn cmd_check(a: &CheckArgs) -> u8 {
    // The manifest does not depend on the plan: load it once, and fail before any output.
    let base = match options(&a.frontend, false, "") {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut failed = false;
    for path in &a.plans {
        let source = read_plan(path);
        let (src, diags, index) = match source.text {
            Ok(src) => {
                let opts = CompileOptions {
                    source_name: Some(source.name.clone()),
                    ..base.clone()
                };
                let Compiled {
                    diagnostics,
                    line_index,
                    ..
                } = plan_compiler::compile(&src, &opts);
                (src, diagnostics, line_index)
            }
            Err(d) => (String::new(), vec![d], LineIndex::new("")),
        };
        let counts = Counts::of(&diags);
        failed |= counts.errors > 0 || (a.deny_warnings && counts.warnings > 0);
        match a.format {
            Format::Human => report_human(&source.name, &src, &diags, a.deny_warnings),
            Format::Json => out(&plan_render::render_json(&source.name, &diags, &index)),
        }
    }
    if failed { exit::PLAN_ERRORS } else { exit::OK }
}

fn cmd_compile(a: &CompileArgs) -> u8 {
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| a.plan.with_extension("pbc"));
    // NB: by file identity (`./plan.json`, links); the literal comparison covers a plan
    // that does not exist (which then fails to read anyway).
    let mut inputs: Vec<(&str, &Path)> = vec![("the plan", &a.plan)];
    if let Some(t) = &a.frontend.tools {
        inputs.push(("the --tools file", t));
    }
    let clobbered = plan_render::files::clobbered(&output, &inputs)
        .or_else(|| (output == a.plan).then_some(("the plan", a.plan.as_path())));
    if let Some((what, _)) = clobbered {
        err(&format!(
            "error: the output path `{}` is {what} itself; choose another with -o\n",
            output.display()
        ));
        return exit::OUTPUT_IS_INPUT;
    }
    let source = read_plan(&a.plan);
    let opts = match options(&a.frontend, a.strip, &source.name) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let src = match source.text {
        Ok(src) => src,
        Err(d) => {
            report_human(&source.name, "", &[d], false);
            return exit::PLAN_ERRORS;
        }
    };
    let compiled = plan_compiler::compile(&src, &opts);
    let counts = Counts::of(&compiled.diagnostics);
    if !compiled.diagnostics.is_empty() {
        if a.quiet {
            err(&plan_render::render_human(
                &source.name,
                &src,
                &compiled.diagnostics,
                use_color(),
            ));
        } else {
            report_human(&source.name, &src, &compiled.diagnostics, false);
        }
    }
    if counts.errors > 0 {
        return exit::PLAN_ERRORS;
    }
    let Some(program) = compiled.program else {
        err("error: internal compiler error: no program and no error diagnostic\n");
        return exit::SOFTWARE;
    };
    let bytes = backend::encode(&program);
    if let Err(e) = write_atomically(&output, &bytes) {
        err(&format!(
            "error: cannot write `{}`: {e}\n",
            output.display()
        ));
        return exit::CANT_CREATE;
    }
    if !a.quiet {
        err(&format!(
            "wrote {} ({} bytes)\n",
            output.display(),
            bytes.len()
        ));
    }
    exit::OK
}

/// Writes via a temporary file in the same directory and a rename, so an interrupted run
/// never leaves a truncated `.pbc` where a good one was.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let file_name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the output path names no file",
        )
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn cmd_disasm(a: &DisasmArgs) -> u8 {
    let name = a.file.display();
    // NB: capped like every plan input: a larger file is refused by the decoder's own
    // limits without being read whole.
    let bytes = match plan_compiler::read_capped(&a.file) {
        Ok(b) => b,
        Err(e) => {
            err(&format!("error: cannot read `{name}`: {e}\n"));
            return exit::NO_INPUT;
        }
    };
    match backend::load(&bytes) {
        Ok(listing) => {
            out(&listing);
            exit::OK
        }
        Err(e) => {
            let mut msg = format!("error: `{name}`: {e}\n");
            if !backend::is_pbc(&bytes) {
                msg.push_str("help: this is not a .pbc file; compile a plan with `planc compile PLAN` first\n");
            }
            err(&msg);
            exit::DATA_ERR
        }
    }
}

fn cmd_explain(a: &ExplainArgs) -> u8 {
    let source = read_plan(&a.plan);
    let opts = match options(&a.frontend, false, &source.name) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let src = match source.text {
        Ok(src) => src,
        Err(d) => {
            report_human(&source.name, "", &[d], false);
            return exit::PLAN_ERRORS;
        }
    };
    match plan_compiler::explain(&src, &opts) {
        Ok(steps) => {
            out(&if a.dot {
                explain::render_dot(&steps)
            } else {
                explain::render_list(&steps)
            });
            exit::OK
        }
        Err(compiled) => {
            report_human(&source.name, &src, &compiled.diagnostics, false);
            exit::PLAN_ERRORS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
