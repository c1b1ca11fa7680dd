//! `planc check` and `planc disasm`.

use std::path::PathBuf;

use clap::Args;
use plan_compiler::{CompileOptions, Compiled};
use plan_render::{Counts, exit};
use plan_syntax::LineIndex;

use crate::backend;
use crate::front::{Format, FrontendArgs, err, options, out, read_plan, report_human};

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
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

pub(crate) fn cmd_check(a: &CheckArgs) -> u8 {
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

#[derive(Args, Debug)]
pub(crate) struct DisasmArgs {
    /// A compiled plan.
    #[arg(value_name = "FILE.pbc")]
    file: PathBuf,
}

pub(crate) fn cmd_disasm(a: &DisasmArgs) -> u8 {
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
