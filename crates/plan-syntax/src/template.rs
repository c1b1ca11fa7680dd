//! Templates (`"a ${x} b"`, `"{{x}}"`) and arithmetic (`"${n} * 2 + 1"`): the types.
//! Lexing is logos (`lexer.rs`), arithmetic parsing is the lalrpop grammar in
//! `grammar/arith.lalrpop`.

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
