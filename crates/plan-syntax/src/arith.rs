//! `parse_arith`: is a string arithmetic, and if so, what expression?
//!
//! logos lexes the whole string into [`ArithTok`]s (any other character: not arithmetic),
//! the tokens are checked against the caps in `limits` and converted to [`Tok`]s carrying
//! their values, and the lalrpop grammar (`grammar/arith.lalrpop`) parses them with
//! Python's precedence. The LR parser keeps its own stack, so nesting never recurses; the
//! caps bound the depth of the resulting tree for whoever walks (or drops) it.

use logos::Logos;
use smallvec::SmallVec;

use crate::ast::Dialect;
use crate::lexer::{ArithTok, brace_refs};
use crate::limits;
use crate::template::var_ref;
use crate::template::{Expr, VarRef};

lalrpop_util::lalrpop_mod!(
    #[allow(unreachable_pub, unused_qualifications, clippy::all, clippy::pedantic)]
    arith_grammar,
    "/arith.rs"
);

/// A token as the grammar sees it.
#[derive(Clone, Debug)]
pub(crate) enum Tok {
    Num(serde_json::Number),
    Ref(VarRef),
    Plus,
    Minus,
    Star,
    StarStar,
    Slash,
    Percent,
    LParen,
    RParen,
}

pub(crate) fn parse_arith(s: &str, dialect: Dialect) -> Option<Expr> {
    // Fast reject: most strings have no operator at all.
    if !s
        .bytes()
        .any(|b| matches!(b, b'+' | b'-' | b'*' | b'/' | b'%'))
    {
        return None;
    }
    // NB: on the stack for the usual short expression (`${n} * 2 + 1` is 5 tokens).
    let mut toks: SmallVec<[(usize, Tok, usize); 16]> = SmallVec::new();
    let mut operators = 0usize;
    let mut depth = 0usize;
    let mut lex = ArithTok::lexer(s);
    while let Some(t) = lex.next() {
        let t = t.ok()?;
        if toks.len() >= limits::MAX_ARITH_TOKENS {
            return None;
        }
        let text = lex.slice();
        let tok = match t {
            ArithTok::Int => Tok::Num(text.parse::<i64>().ok()?.into()),
            ArithTok::Float => Tok::Num(serde_json::Number::from_f64(text.parse::<f64>().ok()?)?),
            ArithTok::DollarRef => Tok::Ref(var_ref(text)),
            ArithTok::BraceRef if brace_refs(dialect) => Tok::Ref(var_ref(text)),
            ArithTok::BraceRef => return None,
            ArithTok::Plus => Tok::Plus,
            ArithTok::Minus => Tok::Minus,
            ArithTok::Star => Tok::Star,
            ArithTok::StarStar => Tok::StarStar,
            ArithTok::Slash => Tok::Slash,
            ArithTok::Percent => Tok::Percent,
            ArithTok::LParen => {
                depth += 1;
                if depth > limits::MAX_ARITH_PARENS {
                    return None;
                }
                Tok::LParen
            }
            ArithTok::RParen => {
                depth = depth.checked_sub(1)?;
                Tok::RParen
            }
        };
        if matches!(
            tok,
            Tok::Plus | Tok::Minus | Tok::Star | Tok::StarStar | Tok::Slash | Tok::Percent
        ) {
            operators += 1;
        }
        let span = lex.span();
        toks.push((span.start, tok, span.end));
    }
    if operators == 0 {
        return None;
    }
    arith_grammar::ExprParser::new()
        .parse(toks.into_iter().map(Ok::<_, ()>))
        .ok()
}
