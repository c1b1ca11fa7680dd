//! `planc compile`: a plan to a `.pbc` file, written atomically.

use std::path::{Path, PathBuf};

use clap::Args;
use plan_render::{Counts, exit};

use crate::backend;
use crate::front::{FrontendArgs, err, plan_and_options, report_human, use_color};

#[derive(Args, Debug)]
pub(crate) struct CompileArgs {
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

pub(crate) fn cmd_compile(a: &CompileArgs) -> u8 {
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
    let clobbered = plan_compiler::files::clobbered(&output, &inputs)
        .or_else(|| (output == a.plan).then_some(("the plan", a.plan.as_path())));
    if let Some((what, _)) = clobbered {
        err(&format!(
            "error: the output path `{}` is {what} itself; choose another with -o\n",
            output.display()
        ));
        return exit::OUTPUT_IS_INPUT;
    }
    let (name, src, opts) = match plan_and_options(&a.plan, &a.frontend, a.strip) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let compiled = plan_compiler::compile(&src, &opts);
    let counts = Counts::of(&compiled.diagnostics);
    if !compiled.diagnostics.is_empty() {
        if a.quiet {
            err(&plan_render::render_human(
                &name,
                &src,
                &compiled.diagnostics,
                use_color(),
            ));
        } else {
            report_human(&name, &src, &compiled.diagnostics, false);
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
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
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
