//! `plan-syntax`: source text → JSON tree with spans → plan AST, plus the template and
//! arithmetic language used inside string values.
//!
//! API CONTRACT (stable; implementation in progress):
//! - `read(src)`: lenient JSON reader. Strict JSON plus what LLMs emit (prose around a
//!   ```json fence, `<think>`/`<answer>` wrappers, trailing commas, comments, Python
//!   literals). Every repair is a warning with its location.
//! - `parse_plan(&node)`: detects the dialect and builds the `Plan` AST, reporting
//!   structural errors (missing seq_no/type/parameters, ...).
//! - `parse(src)`: both.
//! - `classify_string(s, dialect)`: literal / single reference / template.
//! - `parse_arith(s, dialect)`: arithmetic expression (needs ≥ 1 operator) or `None`.

pub mod ast;
pub mod diag;
pub mod json;
pub mod span;
pub mod template;

pub use ast::*;
pub use diag::{Diagnostic, Parsed, Severity};
pub use json::{Member, Node, NodeKind};
pub use span::{LineIndex, Span};
pub use template::{BinOp, Expr, Piece, StringForm, UnOp, VarRef};

/// Lenient JSON reader (see crate docs). `value` is `None` when nothing could be read.
pub fn read(src: &str) -> Parsed<Option<Node>> {
    let _ = src;
    unimplemented!("reader")
}

/// Builds the plan AST from a reader node.
pub fn parse_plan(root: &Node) -> Parsed<Option<Plan>> {
    let _ = root;
    unimplemented!("parse_plan")
}

/// `read` then `parse_plan`, diagnostics concatenated.
pub fn parse(src: &str) -> Parsed<Option<Plan>> {
    let mut r = read(src);
    let Some(node) = r.value.take() else { return Parsed { value: None, diagnostics: r.diagnostics } };
    let p = parse_plan(&node);
    r.diagnostics.extend(p.diagnostics);
    Parsed { value: p.value, diagnostics: r.diagnostics }
}

/// What a string value means: literal, exactly one reference, or a template.
pub fn classify_string(s: &str, dialect: Dialect) -> StringForm {
    let _ = (s, dialect);
    unimplemented!("classify_string")
}

/// Parses `s` as arithmetic over number literals and references with at least one
/// operator; `None` if it is not arithmetic.
pub fn parse_arith(s: &str, dialect: Dialect) -> Option<Expr> {
    let _ = (s, dialect);
    unimplemented!("parse_arith")
}
