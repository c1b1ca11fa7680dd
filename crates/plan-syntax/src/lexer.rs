//! logos lexers for the two small languages inside string values:
//! - [`TemplateTok`]: text with references (`${name.key}`, `{{ name }}`), used by
//!   `classify_string`;
//! - [`ArithTok`]: arithmetic over number literals and references, whose tokens feed the
//!   lalrpop grammar in `grammar/arith.lalrpop`.
//!
//! Both lexers accept both reference spellings; the dialect filter is applied by the
//! callers (`{{x}}` is plain text in the current dialect).

use logos::Logos;

use crate::ast::Dialect;

/// Tokens of a template. Any text that is not a well-formed reference is `Text` (a `$` or
/// `{` that does not start a reference lexes as a one-byte `Text`).
///
/// NB: logos does not back off to a shorter match when a longer pattern fails part-way:
/// `{{{x}}}` yields an error for the first `{{` instead of `Text("{")`. The caller treats an
/// error as one character of text and lexes again after it (see `classify_string`).
#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TemplateTok {
    /// `${name}` / `${name.key.0}`: name must not start with a digit; keys may.
    #[regex(r"\$\{[A-Za-z_\-][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*\}")]
    DollarRef,
    /// `{{name}}` / `{{ name }}` (older dialect).
    #[regex(r"\{\{[ \t]*[A-Za-z_\-][A-Za-z0-9_\-]*[ \t]*\}\}")]
    BraceRef,
    #[regex(r"[^${]+")]
    #[token("$")]
    #[token("{")]
    Text,
}

/// Tokens of an arithmetic expression; whitespace is skipped.
#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n]+")]
pub(crate) enum ArithTok {
    /// `12`, `007` (leading zeros allowed: `2024-10-05` is a subtraction).
    #[regex(r"[0-9]+")]
    Int,
    /// `1.5`, `.5`, `5.`, `1e3`, `1.5E-2`.
    #[regex(r"[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?")]
    #[regex(r"\.[0-9]+([eE][+-]?[0-9]+)?")]
    #[regex(r"[0-9]+[eE][+-]?[0-9]+")]
    Float,
    #[regex(r"\$\{[A-Za-z_\-][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*\}")]
    DollarRef,
    #[regex(r"\{\{[ \t]*[A-Za-z_\-][A-Za-z0-9_\-]*[ \t]*\}\}")]
    BraceRef,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("**")]
    StarStar,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
}

/// Whether a `{{name}}` reference counts as a reference in `dialect`.
pub(crate) fn brace_refs(dialect: Dialect) -> bool {
    dialect == Dialect::Older
}
