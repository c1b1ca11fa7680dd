//! Plan bytes → the program the VM accepts, whatever their form: the one loader of the
//! front ends that run plans (`planvm run`, `batch`, `branch`, the Python package; the
//! planner, which has only source, uses [`Compiled::validate`]). Bytecode is
//! recognised by its magic bytes (never by a file name) and loaded (decoded, validated);
//! anything else is plan source, compiled and then validated like a `.pbc` file, so the
//! VM sees one kind of program whatever its origin. Rendering is the caller's business:
//! everything here is data.

use std::fmt;
use std::io::Read;
use std::path::Path;

use plan_bytecode::{BytecodeError, ValidatedProgram};
use plan_syntax::limits::MAX_SOURCE_BYTES;
use plan_syntax::{Diagnostic, LineIndex};

use crate::{CompileOptions, Compiled, codes};

/// Front ends read at most this much of an input file (a plan or a `.pbc`): more than any
/// the decoders accept, so their own limits report the problem, but a multi-gigabyte file
/// is never slurped.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The first [`MAX_INPUT_BYTES`] + 1 bytes of `path` (one more than allowed, so a caller
/// can tell "too large" from "exactly at the limit"). Every input file of both CLIs is read
/// with it.
pub fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    // NB: sized from the file's length when it has one (a pipe has none): growing by
    // doubling left up to half the buffer unused, and it lives as long as the plan.
    let hint = f.metadata().map_or(0, |m| m.len().min(MAX_INPUT_BYTES + 1));
    let mut buf = Vec::with_capacity(usize::try_from(hint).unwrap_or(0) + 1);
    f.take(MAX_INPUT_BYTES + 1).read_to_end(&mut buf)?;
    Ok(buf)
}

/// A program ready to run.
#[derive(Debug)]
pub struct Loaded {
    pub program: ValidatedProgram,
    /// The plan source (`None` for bytecode), kept by a stored run.
    pub source: Option<String>,
    /// The compiler's warnings (none for bytecode).
    pub diagnostics: Vec<Diagnostic>,
    /// Line starts of `source`, to place `diagnostics` (empty for bytecode).
    pub line_index: LineIndex,
}

/// Why plan bytes are not a program.
#[derive(Debug)]
pub enum LoadError {
    /// Bytecode that does not decode or validate.
    Bytecode(BytecodeError),
    /// Not bytecode, and larger than any plan source may be.
    TooLarge { len: usize },
    /// Neither bytecode nor UTF-8 text: the first invalid byte is at `offset`.
    NotText { offset: usize },
    /// Plan source with at least one error. `diagnostics` holds every one, warnings too.
    Invalid {
        source: String,
        diagnostics: Vec<Diagnostic>,
        line_index: LineIndex,
    },
}

impl LoadError {
    /// How many errors the plan has (1 for anything but `Invalid`).
    pub fn error_count(&self) -> usize {
        match self {
            LoadError::Invalid { diagnostics, .. } => {
                diagnostics.iter().filter(|d| d.is_error()).count()
            }
            _ => 1,
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Bytecode(e) => e.fmt(f),
            LoadError::TooLarge { .. } => {
                write!(f, "the plan is larger than {MAX_SOURCE_BYTES} bytes")
            }
            LoadError::NotText { offset } => write!(
                f,
                "neither .pbc bytecode (no magic bytes) nor UTF-8 plan text (invalid byte at offset {offset})"
            ),
            LoadError::Invalid { .. } => match self.error_count() {
                1 => f.write_str("1 error"),
                n => write!(f, "{n} errors"),
            },
        }
    }
}

impl std::error::Error for LoadError {}

/// Bytecode or plan source → a validated program. `opts` applies to source (the manifest
/// its tool calls are checked against, `strict`, `entry`); bytecode was checked when it
/// was compiled.
pub fn load(bytes: Vec<u8>, opts: &CompileOptions) -> Result<Loaded, LoadError> {
    if plan_bytecode::is_pbc(&bytes) {
        let program = plan_bytecode::load(&bytes).map_err(LoadError::Bytecode)?;
        return Ok(Loaded {
            program,
            source: None,
            diagnostics: Vec::new(),
            line_index: LineIndex::new(""),
        });
    }
    // NB: before the UTF-8 check, which would read all of an over-large input.
    if bytes.len() > MAX_SOURCE_BYTES {
        return Err(LoadError::TooLarge { len: bytes.len() });
    }
    let source = String::from_utf8(bytes).map_err(|e| LoadError::NotText {
        offset: e.utf8_error().valid_up_to(),
    })?;
    let mut compiled = crate::compile(&source, opts);
    match compiled.validate() {
        Some(program) => Ok(Loaded {
            program,
            source: Some(source),
            diagnostics: compiled.diagnostics,
            line_index: compiled.line_index,
        }),
        None => Err(LoadError::Invalid {
            source,
            diagnostics: compiled.diagnostics,
            line_index: compiled.line_index,
        }),
    }
}

impl Compiled {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Takes the program out, validated like any `.pbc` file; `None` when the plan has
    /// errors. A program the validator refuses is a bug of this compiler, reported as
    /// the error [`codes::INVALID_PROGRAM`] among the diagnostics rather than a panic.
    pub fn validate(&mut self) -> Option<ValidatedProgram> {
        let program = self.program.take()?;
        if self.has_errors() {
            return None;
        }
        match plan_bytecode::validate(program) {
            Ok(p) => Some(p),
            Err(e) => {
                // NB: first, where the sorted diagnostics keep those without a place.
                self.diagnostics.insert(
                    0,
                    Diagnostic::error(
                        codes::INVALID_PROGRAM,
                        format!("the compiler produced an invalid program: {e}"),
                    )
                    .with_help("this is a bug in planc: please report it with the plan"),
                );
                None
            }
        }
    }
}
