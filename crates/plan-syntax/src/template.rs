//! Templates (`"a ${x} b"`, `"{{x}}"`) and arithmetic (`"${n} * 2 + 1"`): the types, and
//! `classify_string`. Lexing is logos (`lexer.rs`); arithmetic parsing (`arith.rs`) is the
//! lalrpop grammar in `grammar/arith.lalrpop`.
//!
//! Reference syntax: `${name}` and `${name.key.sub}` in both dialects (name and keys are
//! ASCII letters, digits, `_` and `-`; the name does not start with a digit, keys may, for
//! array indices); `{{name}}` / `{{ name }}` only in the older dialect. Anything that is not
//! a well-formed reference (`${`, `${}`, `${1x}`, `${a b}`) is literal text. There is no
//! escape syntax: `\${x}` is a backslash followed by a reference, as in the reference VM.

use logos::Logos;

use crate::ast::Dialect;
use crate::lexer::{TemplateTok, brace_refs, var_ref};

/// A variable reference `${name.key.sub}` / `{{name}}` / `{"var": "name"}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VarRef {
    /// The variable.
    pub name: String,
    /// Dotted keys after the variable name (`${a.b.c}` → `["b", "c"]`).
    pub path: Vec<String>,
    /// The reference exactly as written (`${a.b.c}`), inserted when it is unset at run time.
    pub raw: String,
}

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Plain text between references (never empty).
    Lit(String),
    Ref(VarRef),
}

/// What a string value means, as decided by `classify_string`.
#[derive(Clone, Debug, PartialEq)]
pub enum StringForm {
    /// No references: a plain string.
    Literal,
    /// Exactly one reference and nothing else: passes the referenced value with its type.
    SingleRef(VarRef),
    /// Text with references, interpolated in one pass.
    Template(Vec<Piece>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Mod,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Pos,
}

/// Arithmetic over number literals and references.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number literal (integer or float, as Python reads it).
    Num(serde_json::Number),
    Ref(VarRef),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

/// What a string value means. See the module docs for the reference syntax.
pub(crate) fn classify_string(s: &str, dialect: Dialect) -> StringForm {
    // Fast path: no reference can start without `$` (or `{{` in the older dialect).
    let braces = brace_refs(dialect);
    let b = s.as_bytes();
    if !b
        .iter()
        .enumerate()
        .any(|(i, &c)| c == b'$' || (braces && c == b'{' && b.get(i + 1) == Some(&b'{')))
    {
        return StringForm::Literal;
    }
    let mut pieces: Vec<Piece> = Vec::new();
    // Start of the pending literal text (not yet pushed), so adjacent text merges for free.
    let mut lit_start: Option<usize> = None;
    // `base` is where the current lexer started: logos spans are relative to it.
    let mut base = 0usize;
    let mut lex = TemplateTok::lexer(s);
    while let Some(t) = lex.next() {
        let (start, end) = (base + lex.span().start, base + lex.span().end);
        let is_ref = match t {
            Ok(TemplateTok::DollarRef) => true,
            Ok(TemplateTok::BraceRef) => braces,
            Ok(TemplateTok::Text) => false,
            Err(()) => {
                // A longer pattern failed part-way (see `TemplateTok`): the first character
                // is text; lex again right after it so a reference starting there is found.
                lit_start.get_or_insert(start);
                let next = start + s[start..].chars().next().map_or(1, char::len_utf8);
                base = next;
                lex = TemplateTok::lexer(&s[next..]);
                continue;
            }
        };
        if !is_ref {
            lit_start.get_or_insert(start);
            continue;
        }
        if let Some(lit) = lit_start.take() {
            pieces.push(Piece::Lit(s[lit..start].to_owned()));
        }
        pieces.push(Piece::Ref(var_ref(&s[start..end])));
    }
    if let Some(start) = lit_start
        && start < s.len()
    {
        pieces.push(Piece::Lit(s[start..].to_owned()));
    }
    match pieces.as_slice() {
        [] | [Piece::Lit(_)] => StringForm::Literal,
        [Piece::Ref(_)] => match pieces.pop() {
            Some(Piece::Ref(r)) => StringForm::SingleRef(r),
            _ => StringForm::Literal,
        },
        _ => StringForm::Template(pieces),
    }
}

/// The older dialect's object reference `{"var": "name"}` (exactly one member, a string
/// name). `raw` is the reference as compact JSON, for messages.
pub fn object_ref(node: &crate::json::Node) -> Option<VarRef> {
    match node.as_object()? {
        [m] if m.key == "var" => {
            let name = m.value.as_str()?;
            let raw = serde_json::to_string(&node.to_value()).unwrap_or_default();
            Some(VarRef {
                name: name.to_owned(),
                path: Vec::new(),
                raw,
            })
        }
        _ => None,
    }
}
