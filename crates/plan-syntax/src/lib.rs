//! `plan-syntax`: source text → JSON tree with spans → plan AST, plus the template and
//! arithmetic language used inside string values. The front end never fails: every entry
//! point returns what it could build together with all diagnostics ([`Parsed`]).
//!
//! API CONTRACT (stable):
//! - [`read`]`(src)`: lenient JSON reader. Strict JSON plus what LLMs emit (prose around a
//!   ```json or `~~~` fence, `<think>`/`<answer>` wrappers, trailing commas, comments,
//!   unquoted keys, Python literals). Every repair is a warning (`W00xx`) with its location.
//! - [`parse_plan`]`(&node)`: detects the dialect and builds the [`Plan`] AST, reporting
//!   structural errors (missing seq_no/type/parameters, ...) as `E01xx`/`W01xx`.
//! - [`parse`]`(src)`: both.
//! - [`classify_string`]`(s, dialect)`: literal / single reference / template.
//!   [`classify_str`] is the same with pieces borrowed from `s`, and [`has_ref`] only
//!   says whether there is a reference (both allocate nothing per piece: the compiler's).
//! - [`parse_arith`]`(s, dialect)`: arithmetic expression (needs ≥ 1 operator) or `None`.
//!
//! Module map, in pipeline order (start reading at `reader.rs`):
//! - `reader` — finds the JSON in the input and parses it into [`Node`]s ([`json`]).
//!   Spans are byte offsets into the original source, always.
//! - `plan` — [`Node`] → [`Plan`] ([`ast`]): dialect detection and structural checks.
//! - [`template`] — string forms and expression types; `lexer` (logos) and `arith`
//!   (lalrpop grammar `grammar/arith.lalrpop`, compiled by `build.rs`).
//! - [`diag`], [`span`] — diagnostics as data, byte spans and line/column lookup.
//! - [`codes`] — every stable diagnostic code with an example input; [`limits`] — caps.
//!
//! Properties: no input panics, hangs or overflows the stack (nesting is capped at
//! [`limits::MAX_NESTING`], sources at [`limits::MAX_SOURCE_BYTES`]); the reader scans bytes
//! and allocates per value, never per character.

pub mod ast;
pub mod codes;
pub mod diag;
pub mod json;
pub mod limits;
pub mod span;
pub mod template;

mod arith;
mod lexer;
mod plan;
mod reader;

pub use ast::*;
pub use diag::{Diagnostic, Parsed, Severity};
pub use json::{Member, Node, NodeKind};
pub use span::{LineIndex, Span};
pub use template::{
    Expr, Piece, PieceStr, RefStr, StrForm, StringForm, VarRef, classify_str, has_ref, object_ref,
    pieces_into,
};

/// Lenient JSON reader (see crate docs). `value` is `None` when nothing could be read.
pub fn read(src: &str) -> Parsed<Option<Node>> {
    reader::read(src)
}

/// Builds the plan AST from a reader node.
pub fn parse_plan(root: &Node) -> Parsed<Option<Plan>> {
    // NB: the builder moves values out of the tree it is given (see `plan.rs`); from a
    // borrowed tree it works on a copy. `parse` builds the plan as it reads instead.
    plan::parse_plan(root.clone(), plan::Streamed::default())
}

/// `read` then `parse_plan`, diagnostics concatenated; each instruction is built as soon
/// as it is read.
pub fn parse(src: &str) -> Parsed<Option<Plan>> {
    let (mut r, streamed) = reader::read_with::<plan::Streamed>(src);
    let Some(node) = r.value.take() else {
        return Parsed {
            value: None,
            diagnostics: r.diagnostics,
        };
    };
    let p = plan::parse_plan(node, streamed);
    r.diagnostics.extend(p.diagnostics);
    Parsed {
        value: p.value,
        diagnostics: r.diagnostics,
    }
}

/// What a string value means: literal, exactly one reference, or a template.
pub fn classify_string(s: &str, dialect: Dialect) -> StringForm {
    template::classify_string(s, dialect)
}

/// Parses `s` as arithmetic over number literals and references with at least one
/// operator; `None` if it is not arithmetic.
pub fn parse_arith(s: &str, dialect: Dialect) -> Option<Expr> {
    arith::parse_arith(s, dialect)
}
