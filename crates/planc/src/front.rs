//! What the commands share: the front end's options, reading a plan file, printing
//! diagnostics, stdout and stderr.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use plan_compiler::CompileOptions;
use plan_render::{Counts, exit};
use plan_syntax::Diagnostic;

use crate::backend;

/// Options that change what the compiler accepts.
#[derive(Args, Debug)]
pub(crate) struct FrontendArgs {
    /// Treat reader repairs (fences, trailing commas, Python literals, ...) as errors.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Tool manifest adding or overriding tools (the same file planvm uses).
    #[arg(long, value_name = "FILE.toml")]
    pub(crate) tools: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Like rustc, with source snippets, on stderr.
    Human,
    /// One JSON object per diagnostic and line, on stdout.
    Json,
}

/// Diagnostics go to stderr: the CLIs' one colour rule.
pub(crate) fn use_color() -> bool {
    plan_render::color_stderr()
}

/// Writes to stdout. A closed pipe (`planc disasm x.pbc | head`) is not an error worth a
/// panic, which is what `print!` would do.
pub(crate) fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

pub(crate) fn err(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A plan file's text, or the diagnostic saying why there is none.
pub(crate) struct Source {
    pub(crate) name: String,
    pub(crate) text: Result<String, Diagnostic>,
}

pub(crate) fn read_plan(path: &Path) -> Source {
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
pub(crate) fn options(
    frontend: &FrontendArgs,
    strip: bool,
    source_name: &str,
) -> Result<CompileOptions, u8> {
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
pub(crate) fn report_human(name: &str, src: &str, diags: &[Diagnostic], deny_warnings: bool) {
    let mut text = plan_render::render_human(name, src, diags, use_color());
    text.push_str(&plan_render::summary(
        name,
        Counts::of(diags),
        deny_warnings,
    ));
    text.push('\n');
    err(&text);
}

/// The plan at `path`, its text and its compile options (`strip`: without the debug
/// section); else the exit code, once what is wrong is printed (an unusable `--tools`
/// file, or a plan that cannot be read, reported as its `E0000`).
pub(crate) fn plan_and_options(
    path: &Path,
    frontend: &FrontendArgs,
    strip: bool,
) -> Result<(String, String, CompileOptions), u8> {
    let source = read_plan(path);
    let opts = options(frontend, strip, &source.name)?;
    match source.text {
        Ok(src) => Ok((source.name, src, opts)),
        Err(d) => {
            report_human(&source.name, "", &[d], false);
            Err(exit::PLAN_ERRORS)
        }
    }
}
