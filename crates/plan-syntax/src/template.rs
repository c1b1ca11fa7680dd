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
use plan_value::{Op1, Op2};

use crate::ast::Dialect;
use crate::lexer::{TemplateTok, brace_refs};

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

/// Arithmetic over number literals and references.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number literal (integer or float, as Python reads it).
    Num(serde_json::Number),
    Ref(VarRef),
    Unary(Op1, Box<Expr>),
    Binary(Op2, Box<Expr>, Box<Expr>),
}

/// A reference borrowed from the string it was written in: the allocation-free form of
/// [`VarRef`], for callers that only look at the pieces (the compiler interns them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefStr<'a> {
    /// The variable.
    pub name: &'a str,
    /// The dotted keys after the name without the leading `.` (`${a.b.c}` → `"b.c"`), or `""`.
    pub path: &'a str,
    /// The reference exactly as written.
    pub raw: &'a str,
}

impl<'a> RefStr<'a> {
    /// The dotted keys, in order (`${a.b.c}` → `b`, `c`).
    pub fn keys(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        let path = self.path;
        path.split('.').filter(move |_| !path.is_empty())
    }

    pub fn to_var_ref(&self) -> VarRef {
        VarRef {
            name: self.name.to_owned(),
            path: self.keys().map(str::to_owned).collect(),
            raw: self.raw.to_owned(),
        }
    }
}

/// One piece of a template, borrowed from the string (see [`RefStr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceStr<'a> {
    /// Plain text between references (never empty).
    Lit(&'a str),
    Ref(RefStr<'a>),
}

/// [`StringForm`] borrowed from the string: what [`classify_str`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrForm<'a> {
    Literal,
    SingleRef(RefStr<'a>),
    Template(Vec<PieceStr<'a>>),
}

/// What a string value means. See the module docs for the reference syntax.
pub(crate) fn classify_string(s: &str, dialect: Dialect) -> StringForm {
    match classify_str(s, dialect) {
        StrForm::Literal => StringForm::Literal,
        StrForm::SingleRef(r) => StringForm::SingleRef(r.to_var_ref()),
        StrForm::Template(pieces) => StringForm::Template(
            pieces
                .into_iter()
                .map(|p| match p {
                    PieceStr::Lit(t) => Piece::Lit(t.to_owned()),
                    PieceStr::Ref(r) => Piece::Ref(r.to_var_ref()),
                })
                .collect(),
        ),
    }
}

/// [`classify_string`] without copying: the pieces borrow from `s`. Both are this one
/// function, so they cannot disagree.
pub fn classify_str(s: &str, dialect: Dialect) -> StrForm<'_> {
    let mut pieces: Vec<PieceStr<'_>> = Vec::new();
    pieces_into(s, dialect, &mut pieces);
    match pieces.as_slice() {
        [] | [PieceStr::Lit(_)] => StrForm::Literal,
        [PieceStr::Ref(r)] => StrForm::SingleRef(*r),
        _ => StrForm::Template(pieces),
    }
}

/// The pieces of `s` in order (adjacent text merged), into `out` after clearing it: the core
/// of [`classify_str`] for a caller that reuses one buffer. No pieces or one `Lit` is a
/// literal, one `Ref` a single reference, anything else a template.
pub fn pieces_into<'a>(s: &'a str, dialect: Dialect, out: &mut Vec<PieceStr<'a>>) {
    out.clear();
    walk(s, dialect, |p| {
        out.push(p);
        true
    });
}

/// Whether `s` holds at least one reference (is not [`StringForm::Literal`]), without
/// building the pieces: stops at the first reference.
pub fn has_ref(s: &str, dialect: Dialect) -> bool {
    let mut found = false;
    walk(s, dialect, |p| {
        found = matches!(p, PieceStr::Ref(_));
        !found
    });
    found
}

/// Calls `f` with each piece of `s` in order (adjacent text merged into one `Lit`) until it
/// returns `false`.
fn walk<'a>(s: &'a str, dialect: Dialect, mut f: impl FnMut(PieceStr<'a>) -> bool) {
    // Fast path: no reference can start without `$` (or `{{` in the older dialect).
    let braces = brace_refs(dialect);
    let b = s.as_bytes();
    if !b
        .iter()
        .enumerate()
        .any(|(i, &c)| c == b'$' || (braces && c == b'{' && b.get(i + 1) == Some(&b'{')))
    {
        if !s.is_empty() {
            f(PieceStr::Lit(s));
        }
        return;
    }
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
        if let Some(lit) = lit_start.take()
            && !f(PieceStr::Lit(&s[lit..start]))
        {
            return;
        }
        if !f(PieceStr::Ref(ref_str(&s[start..end]))) {
            return;
        }
    }
    if let Some(start) = lit_start
        && start < s.len()
    {
        f(PieceStr::Lit(&s[start..]));
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

/// Builds the `VarRef` of a reference token's text (`${a.b}` or `{{ a }}`).
pub(crate) fn var_ref(raw: &str) -> VarRef {
    ref_str(raw).to_var_ref()
}

/// Splits a reference token's text (`${a.b}` or `{{ a }}`) into name and key path,
/// borrowing from it.
pub(crate) fn ref_str(raw: &str) -> RefStr<'_> {
    let inner = if let Some(s) = raw.strip_prefix("${") {
        s.strip_suffix('}').unwrap_or(s)
    } else {
        let s = raw.strip_prefix("{{").unwrap_or(raw);
        s.strip_suffix("}}").unwrap_or(s).trim_matches([' ', '\t'])
    };
    let (name, path) = inner.split_once('.').unwrap_or((inner, ""));
    RefStr { name, path, raw }
}
