//! Every cap the front end enforces, in one place. Inputs come from an LLM (or worse):
//! each limit turns a pathological input into a clean diagnostic or `None` instead of a
//! stack overflow, a hang or an allocation the machine cannot serve.

/// Largest source the reader accepts (16 MiB). Also keeps every byte offset below
/// `u32::MAX`, which `Span` relies on.
pub const MAX_SOURCE_BYTES: usize = 16 * 1024 * 1024;

/// Deepest `[`/`{` nesting the reader accepts. The reader recurses once per level, so this
/// bounds its stack use; real plans nest about 6 deep.
pub const MAX_NESTING: usize = 128;

/// The reader stops after this many errors: past that point they are noise.
pub const MAX_READ_ERRORS: usize = 100;

/// In prose (no leading `[`/`{`), how many candidate fences / brackets the reader tries
/// before giving up. Bounds the work on inputs full of stray brackets.
pub const MAX_CANDIDATES: usize = 64;

/// Deepest nesting of older-dialect `condition` branches `parse_plan` follows.
pub const MAX_PLAN_DEPTH: usize = 32;

/// Deepest parenthesis nesting an arithmetic expression may have.
pub const MAX_ARITH_PARENS: usize = 64;

/// Most tokens an arithmetic expression may have. Bounds the depth of the `Expr` tree
/// (and so the recursion of anyone walking or dropping it).
pub const MAX_ARITH_TOKENS: usize = 1024;
