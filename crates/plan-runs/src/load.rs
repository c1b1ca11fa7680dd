//! FILE → validated program, by `plan_compiler::load` (bytecode by its magic bytes, else
//! compiled source), with its diagnostics rendered like rustc's; the caller decides where
//! the rendering goes (`run` prints it, `batch` prints it once per distinct plan and only
//! when the plan is invalid).

use std::path::Path;

use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, LoadError as Refused};
use plan_syntax::{Diagnostic, LineIndex};

pub struct Loaded {
    pub program: ValidatedProgram,
    /// Compiler warnings, one line each (for the trace).
    pub warnings: Vec<String>,
    /// The compiler's diagnostics rendered rustc-style (empty when there are none).
    pub rendered: String,
    /// The plan source (None for a `.pbc` file), kept with a stored run.
    pub source: Option<String>,
}

pub enum LoadError {
    /// FILE cannot be read.
    Unreadable(String),
    /// Not a valid program.
    Invalid(Invalid),
}

pub struct Invalid {
    /// One line, printed as `error: ...`.
    pub message: String,
    /// The compiler's errors, one line each (`file:line:col: error[CODE]: ...`).
    pub errors: Vec<String>,
    /// All diagnostics rendered rustc-style (empty when there are none).
    pub rendered: String,
}

impl Invalid {
    /// The message, then each compiler error on a line of its own.
    pub fn summary(&self) -> String {
        let mut s = self.message.clone();
        for e in &self.errors {
            s.push('\n');
            s.push_str(e);
        }
        s
    }
}

/// `entry`: verify the plan as run from that instruction with those variables set (a
/// branch), not from its start.
pub fn load_program(path: &Path, opts: CompileOptions, color: bool) -> Result<Loaded, LoadError> {
    let shown = path.display().to_string();
    let bytes = plan_compiler::read_capped(path)
        .map_err(|e| LoadError::Unreadable(format!("cannot read {shown}: {e}")))?;
    load_bytes(&shown, bytes, opts, color)
}

/// [`load_program`] of bytes already read; `shown` names them in messages.
pub fn load_bytes(
    shown: &str,
    bytes: Vec<u8>,
    opts: CompileOptions,
    color: bool,
) -> Result<Loaded, LoadError> {
    let opts = CompileOptions {
        source_name: Some(shown.to_owned()),
        ..opts
    };
    let render = |src: &str, diags: &[Diagnostic]| {
        if diags.is_empty() {
            String::new()
        } else {
            plan_render::render_human(shown, src, diags, color)
        }
    };
    let one_lines = |diags: &[Diagnostic], index: &LineIndex, errors: bool| -> Vec<String> {
        diags
            .iter()
            .filter(|d| d.is_error() == errors)
            .map(|d| one_line(shown, d, index))
            .collect()
    };
    match plan_compiler::load(bytes, &opts) {
        Ok(l) => Ok(Loaded {
            warnings: one_lines(&l.diagnostics, &l.line_index, false),
            rendered: l
                .source
                .as_deref()
                .map_or_else(String::new, |src| render(src, &l.diagnostics)),
            program: l.program,
            source: l.source,
        }),
        Err(e) => Err(LoadError::Invalid(match &e {
            Refused::Invalid {
                source,
                diagnostics,
                line_index,
            } => Invalid {
                message: format!("{shown}: {e}; the plan was not run"),
                errors: one_lines(diagnostics, line_index, true),
                rendered: render(source, diagnostics),
            },
            _ => Invalid {
                message: format!("{shown}: {e}"),
                errors: Vec::new(),
                rendered: String::new(),
            },
        })),
    }
}

fn one_line(file: &str, d: &Diagnostic, index: &LineIndex) -> String {
    let loc = match d.line_col(index) {
        Some((l, c)) => format!("{file}:{l}:{c}"),
        None => file.to_owned(),
    };
    format!("{loc}: {}[{}]: {}", d.severity.as_str(), d.code, d.message)
}
