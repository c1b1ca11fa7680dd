//! `plan-bytecode`: the `.pbc` instruction set, constant pool, encoder, decoder,
//! load-time validator and disassembler.
//!
//! Start at `program.rs` (the data), then `encode.rs`/`decode.rs` (the file format) and
//! `validate.rs` (which turns an untrusted `Program` into a `ValidatedProgram`, the only
//! thing the VM accepts).

mod program;

pub use program::*;

const _: () = assert!(std::mem::size_of::<Instr>() <= 16);

// API CONTRACT (implementation in progress):
// - `encode(&Program) -> Vec<u8>`
// - `decode(&[u8]) -> Result<Program, BytecodeError>` (structure only)
// - `validate(Program) -> Result<ValidatedProgram, BytecodeError>` (every index checked)
// - `load(&[u8]) -> Result<ValidatedProgram, BytecodeError>` = decode + validate
// - `is_pbc(&[u8]) -> bool` (magic check)
// - `disasm(&Program) -> String`

/// A program whose every index, slot, constant and jump target has been checked.
/// The VM accepts only this, so dispatch can index without re-checking.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidatedProgram(Program);

impl ValidatedProgram {
    pub fn program(&self) -> &Program {
        &self.0
    }

    pub fn into_inner(self) -> Program {
        self.0
    }
}

impl std::ops::Deref for ValidatedProgram {
    type Target = Program;
    fn deref(&self) -> &Program {
        &self.0
    }
}

/// A clean error for a malformed `.pbc` file or program (never a panic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BytecodeError(Box<BytecodeErrorInner>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct BytecodeErrorInner {
    /// Byte offset in the file, when the error comes from decoding.
    offset: Option<usize>,
    message: String,
}

impl BytecodeError {
    #[cold]
    pub fn new(offset: Option<usize>, message: impl Into<String>) -> Self {
        BytecodeError(Box::new(BytecodeErrorInner { offset, message: message.into() }))
    }

    pub fn offset(&self) -> Option<usize> {
        self.0.offset
    }

    pub fn message(&self) -> &str {
        &self.0.message
    }
}

impl std::fmt::Display for BytecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.offset {
            Some(o) => write!(f, "invalid bytecode at byte {o}: {}", self.0.message),
            None => write!(f, "invalid bytecode: {}", self.0.message),
        }
    }
}

impl std::error::Error for BytecodeError {}

/// Checks every index of `program`. The only way to build a `ValidatedProgram`.
pub fn validate(program: Program) -> Result<ValidatedProgram, BytecodeError> {
    let _ = &program;
    unimplemented!("validate")
}
