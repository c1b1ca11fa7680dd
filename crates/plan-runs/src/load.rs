//! FILE → validated program, by `plan_compiler::load` (bytecode by its magic bytes, else
//! compiled source), with its diagnostics as data: the caller renders them where it wants
//! (`run` prints them, `batch` once per distinct plan and only when the plan is invalid).
//! Also the tools file every plan is checked against ([`load_tools`]).

use std::path::Path;

use plan_bytecode::ValidatedProgram;
use plan_compiler::{CompileOptions, LoadError as Refused};
use plan_syntax::{Diagnostic, LineIndex};

pub struct Loaded {
    pub program: ValidatedProgram,
    /// Compiler warnings, one line each (for the trace).
    pub warnings: Vec<String>,
    /// The plan source (None for a `.pbc` file), kept with a stored run.
    pub source: Option<String>,
    /// The compiler's diagnostics (warnings) of `source`.
    pub found: Found,
}

/// What the compiler found in a plan whose messages name it `shown`: its diagnostics,
/// which the CLIs render over its source (`plan_render::render_human`).
#[derive(Default)]
pub struct Found {
    pub shown: String,
    pub diagnostics: Vec<Diagnostic>,
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
    /// All its diagnostics (none when it was not read as source).
    pub found: Found,
    /// Its source, when it was read as source.
    pub source: Option<String>,
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
pub fn load_program(path: &Path, opts: CompileOptions) -> Result<Loaded, LoadError> {
    load_bytes(&path.display().to_string(), read(path)?, opts)
}

/// The bytes of the plan file at `path` (at most the size limit of a plan), or why not.
pub fn read(path: &Path) -> Result<Vec<u8>, LoadError> {
    plan_compiler::read_capped(path)
        .map_err(|e| LoadError::Unreadable(format!("cannot read {}: {e}", path.display())))
}

/// [`load_program`] of bytes already read; `shown` names them in messages.
pub fn load_bytes(shown: &str, bytes: Vec<u8>, opts: CompileOptions) -> Result<Loaded, LoadError> {
    let opts = CompileOptions {
        source_name: Some(shown.to_owned()),
        ..opts
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
            program: l.program,
            found: Found {
                shown: shown.to_owned(),
                diagnostics: l.diagnostics,
            },
            source: l.source,
        }),
        Err(e) => {
            let message = format!("{shown}: {e}");
            Err(LoadError::Invalid(match e {
                Refused::Invalid {
                    source,
                    diagnostics,
                    line_index,
                } => Invalid {
                    message: format!("{message}; the plan was not run"),
                    errors: one_lines(&diagnostics, &line_index, true),
                    found: Found {
                        shown: shown.to_owned(),
                        diagnostics,
                    },
                    source: Some(source),
                },
                _ => Invalid {
                    message,
                    errors: Vec::new(),
                    found: Found::default(),
                    source: None,
                },
            }))
        }
    }
}

fn one_line(file: &str, d: &Diagnostic, index: &LineIndex) -> String {
    let loc = match d.line_col(index) {
        Some((l, c)) => format!("{file}:{l}:{c}"),
        None => file.to_owned(),
    };
    format!("{loc}: {}[{}]: {}", d.severity.as_str(), d.code, d.message)
}

/// The tools file at `path` (its MCP servers' tools as last listed), or the built-in
/// tools: refused (`bad_input`) when it cannot be read or is not a tools file.
pub fn load_tools(path: Option<&Path>) -> Result<plan_manifest::Manifest, crate::Error> {
    match path {
        None => Ok(plan_manifest::Manifest::builtin()),
        Some(path) => load_listed(path, plan_mcp::Listing::Cached),
    }
}

/// The tools file at `path` with its MCP servers started and their tools listed again
/// (the listings kept for the next loads): refused (`bad_input`) as [`load_tools`], and
/// when the file has no MCP server to list.
pub fn refresh_tools(path: &Path) -> Result<plan_manifest::Manifest, crate::Error> {
    let manifest = load_listed(path, plan_mcp::Listing::Fresh)?;
    if manifest.mcp.is_empty() {
        let message = format!("{} has no [[mcp]] server to list", path.display());
        return Err(crate::Error::new(crate::ErrorKind::BadInput, message));
    }
    Ok(manifest)
}

fn load_listed(
    path: &Path,
    listing: plan_mcp::Listing,
) -> Result<plan_manifest::Manifest, crate::Error> {
    plan_mcp::load(path, plan_host::process_env(), listing).map_err(|e| {
        let message = format!("cannot load tools file: {e}");
        crate::Error::new(crate::ErrorKind::BadInput, message)
    })
}
