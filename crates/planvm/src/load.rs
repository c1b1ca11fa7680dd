//! FILE → validated program. Bytecode is recognised by its magic bytes (never by the file
//! name); anything else is plan source and is compiled on the fly, with warnings and
//! errors rendered like rustc's; the caller decides where the rendering goes (`run`
//! prints it, `batch` prints it once per distinct plan and only when the plan is invalid).

use std::path::Path;

use plan_bytecode::ValidatedProgram;
use plan_compiler::CompileOptions;
use plan_manifest::Manifest;
use plan_syntax::{Diagnostic, LineIndex};

pub(crate) struct Loaded {
    pub(crate) program: ValidatedProgram,
    /// Compiler warnings, one line each (for the trace).
    pub(crate) warnings: Vec<String>,
    /// The compiler's diagnostics rendered rustc-style (empty when there are none).
    pub(crate) rendered: String,
    /// The plan source (None for a `.pbc` file), kept with a stored run.
    pub(crate) source: Option<String>,
}

pub(crate) enum LoadError {
    /// FILE cannot be read.
    Unreadable(String),
    /// Not a valid program.
    Invalid(Invalid),
}

pub(crate) struct Invalid {
    /// One line, printed as `error: ...`.
    pub(crate) message: String,
    /// The compiler's errors, one line each (`file:line:col: error[CODE]: ...`).
    pub(crate) errors: Vec<String>,
    /// All diagnostics rendered rustc-style (empty when there are none).
    pub(crate) rendered: String,
}

impl Invalid {
    fn plain(message: String) -> LoadError {
        LoadError::Invalid(Invalid {
            message,
            errors: Vec::new(),
            rendered: String::new(),
        })
    }

    /// The message, then each compiler error on a line of its own.
    pub(crate) fn summary(&self) -> String {
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
pub(crate) fn load_program(
    path: &Path,
    manifest: &Manifest,
    color: bool,
    entry: Option<&plan_compiler::Entry>,
) -> Result<Loaded, LoadError> {
    let shown = path.display().to_string();
    let bytes = plan_render::files::read_capped(path)
        .map_err(|e| LoadError::Unreadable(format!("cannot read {shown}: {e}")))?;
    load_bytes(&shown, bytes, manifest, color, entry)
}

/// [`load_program`] of bytes already read; `shown` names them in messages.
pub(crate) fn load_bytes(
    shown: &str,
    bytes: Vec<u8>,
    manifest: &Manifest,
    color: bool,
    entry: Option<&plan_compiler::Entry>,
) -> Result<Loaded, LoadError> {
    let shown = shown.to_owned();
    if plan_bytecode::is_pbc(&bytes) {
        let program =
            plan_bytecode::load(&bytes).map_err(|e| Invalid::plain(format!("{shown}: {e}")))?;
        return Ok(Loaded {
            program,
            warnings: Vec::new(),
            rendered: String::new(),
            source: None,
        });
    }
    if bytes.len() as u64 > plan_syntax::limits::MAX_SOURCE_BYTES as u64 {
        return Err(Invalid::plain(format!(
            "{shown}: the plan is larger than {} bytes",
            plan_syntax::limits::MAX_SOURCE_BYTES
        )));
    }
    let src = String::from_utf8(bytes).map_err(|e| {
        Invalid::plain(format!(
            "{shown}: neither .pbc bytecode (no magic bytes) nor UTF-8 plan text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let opts = CompileOptions {
        manifest: manifest.clone(),
        source_name: Some(shown.clone()),
        entry: entry.cloned(),
        ..CompileOptions::default()
    };
    let compiled = plan_compiler::compile(&src, &opts);
    let rendered = if compiled.diagnostics.is_empty() {
        String::new()
    } else {
        plan_render::render_human(&shown, &src, &compiled.diagnostics, color)
    };
    let one_lines = |errors: bool| -> Vec<String> {
        compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error() == errors)
            .map(|d| one_line(&shown, d, &compiled.line_index))
            .collect()
    };
    let warnings = one_lines(false);
    let errors = one_lines(true);
    let program = match compiled.program {
        Some(p) if errors.is_empty() => p,
        _ => {
            let what = if errors.len() == 1 {
                "1 error".to_owned()
            } else {
                format!("{} errors", errors.len())
            };
            return Err(LoadError::Invalid(Invalid {
                message: format!("{shown}: {what}; the plan was not run"),
                errors,
                rendered,
            }));
        }
    };
    // NB: the compiler's output is validated like any file's, so the VM sees one kind of
    // program whatever its origin.
    let program = plan_bytecode::validate(program).map_err(|e| {
        Invalid::plain(format!(
            "{shown}: the compiler produced an invalid program: {e}"
        ))
    })?;
    Ok(Loaded {
        program,
        warnings,
        rendered,
        source: Some(src),
    })
}

fn one_line(file: &str, d: &Diagnostic, index: &LineIndex) -> String {
    let loc = match d.line_col(index) {
        Some((l, c)) => format!("{file}:{l}:{c}"),
        None => file.to_owned(),
    };
    format!("{loc}: {}[{}]: {}", d.severity.as_str(), d.code, d.message)
}
