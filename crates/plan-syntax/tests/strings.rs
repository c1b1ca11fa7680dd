//! Table tests for the string languages: `classify_string` (templates) and `parse_arith`
//! (arithmetic with Python precedence). Expressions are compared through a compact
//! fully-parenthesised rendering so each row reads like the precedence table it checks.

use plan_syntax::{Dialect, Expr, Piece, StringForm, VarRef, classify_string, parse_arith};
use plan_value::Op2;

const CUR: Dialect = Dialect::Current;
const OLD: Dialect = Dialect::Older;

fn show(e: &Expr) -> String {
    match e {
        Expr::Num(n) => n.to_string(),
        Expr::Ref(r) => r.raw.clone(),
        Expr::Unary(op, x) => format!("({}{})", op.symbol(), show(x)),
        Expr::Binary(op, l, r) => format!("({} {} {})", show(l), op.symbol(), show(r)),
    }
}

fn arith(s: &str, d: Dialect) -> Option<String> {
    parse_arith(s, d).as_ref().map(show)
}

#[test]
fn arithmetic_precedence_table() {
    let table: &[(&str, &str)] = &[
        ("-2**2", "(-(2 ** 2))"),
        ("2**-1", "(2 ** (-1))"),
        ("2**3**2", "(2 ** (3 ** 2))"),
        ("-2**-2**2", "(-(2 ** (-(2 ** 2))))"),
        ("(1+2)*3", "((1 + 2) * 3)"),
        ("1+2*3", "(1 + (2 * 3))"),
        ("10 % -3", "(10 % (-3))"),
        ("10 - 2 - 3", "((10 - 2) - 3)"),
        ("8 / 4 / 2", "((8 / 4) / 2)"),
        ("7 % 4 * 2", "((7 % 4) * 2)"),
        ("2 * -3", "(2 * (-3))"),
        ("--5", "(-(-5))"),
        ("+5", "(+5)"),
        ("-5", "(-5)"),
        ("-(5)", "(-5)"),
        ("(2)**(3)", "(2 ** 3)"),
        ("2024-10-05", "((2024 - 10) - 5)"),
        ("007 + 1", "(7 + 1)"),
        ("${a} / 3 + ${b}", "((${a} / 3) + ${b})"),
        ("${num1} + ${num2} / 3", "(${num1} + (${num2} / 3))"),
        ("${a.b.0} * 2", "(${a.b.0} * 2)"),
        (
            "1.5 + .5 + 5. + 1e3 + 1.5E-2",
            "((((1.5 + 0.5) + 5.0) + 1000.0) + 0.015)",
        ),
        ("  1 +\n\t2  ", "(1 + 2)"),
        ("9223372036854775807 - 1", "(9223372036854775807 - 1)"),
    ];
    for (src, want) in table {
        assert_eq!(
            arith(src, CUR).as_deref(),
            Some(*want),
            "parse_arith({src:?})"
        );
    }
}

#[test]
fn not_arithmetic() {
    for src in [
        "hello",
        "5",
        "(5)",
        "1.5",
        "${a}",
        "1 +",
        "+",
        "a - b",
        "1 + x",
        "1 2 + 3",
        "(1 + 2",
        "1 + 2)",
        ")1 + 2(",
        "1 ++",
        "2 ** ** 3",
        "1 // 2",
        "1,000 + 1",
        "1_000 + 1",
        "${a} + ${b",
        "${a}${b} + 1",
        "1e + 1",
        "1.2.3 + 1",
        "99999999999999999999 + 1",
        "1e999 + 1",
        "Today is 2024-10-05",
        "",
        "   ",
        "- ",
        "+-*/%",
    ] {
        assert_eq!(arith(src, CUR), None, "parse_arith({src:?}) should be None");
    }
}

#[test]
fn arithmetic_references_follow_the_dialect() {
    assert_eq!(
        arith("{{a}} + 1", CUR),
        None,
        "{{a}} is text in the current dialect"
    );
    assert_eq!(arith("{{a}} + 1", OLD).as_deref(), Some("({{a}} + 1)"));
    assert_eq!(
        arith("{{ a }} * ${b}", OLD).as_deref(),
        Some("({{ a }} * ${b})")
    );
    let e = parse_arith("{{ a }} - 1", OLD).expect("arithmetic");
    let Expr::Binary(Op2::Sub, l, _) = e else {
        panic!("not a subtraction: {e:?}")
    };
    assert_eq!(
        *l,
        Expr::Ref(VarRef {
            name: "a".into(),
            path: vec![],
            raw: "{{ a }}".into()
        })
    );
}

#[test]
fn arithmetic_number_literals() {
    let Some(Expr::Binary(_, l, r)) = parse_arith("3 + 0.5", CUR) else {
        panic!("arith")
    };
    assert_eq!(*l, Expr::Num(3.into()));
    assert!(matches!(*r, Expr::Num(ref n) if n.as_f64() == Some(0.5) && n.is_f64()));
    // An integer literal stays an integer even when written with a leading zero.
    let Some(Expr::Binary(_, _, r)) = parse_arith("1 - 05", CUR) else {
        panic!("arith")
    };
    assert_eq!(*r, Expr::Num(5.into()));
}

#[test]
fn arithmetic_nesting_is_bounded() {
    let ok = format!("{}1{} + 1", "(".repeat(64), ")".repeat(64));
    assert!(
        parse_arith(&ok, CUR).is_some(),
        "64 levels of parentheses are fine"
    );
    let deep = format!("{}1{} + 1", "(".repeat(65), ")".repeat(65));
    assert_eq!(parse_arith(&deep, CUR), None, "65 levels are refused");
    let huge = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
    assert_eq!(parse_arith(&huge, CUR), None);
    let long = vec!["1"; 2000].join(" + ");
    assert_eq!(parse_arith(&long, CUR), None, "more tokens than the cap");
    let unary = format!("{}1", "-".repeat(5000));
    assert_eq!(parse_arith(&unary, CUR), None);
}

fn r(name: &str, path: &[&str], raw: &str) -> VarRef {
    VarRef {
        name: name.into(),
        path: path.iter().map(|s| s.to_string()).collect(),
        raw: raw.into(),
    }
}

fn lit(s: &str) -> Piece {
    Piece::Lit(s.into())
}

#[test]
fn template_forms() {
    use StringForm::*;
    let cases: Vec<(&str, Dialect, StringForm)> = vec![
        ("plain text", CUR, Literal),
        ("", CUR, Literal),
        ("cost: $5 {not a ref}", CUR, Literal),
        ("${x}", CUR, SingleRef(r("x", &[], "${x}"))),
        ("${x-y_z}", CUR, SingleRef(r("x-y_z", &[], "${x-y_z}"))),
        ("${_x}", CUR, SingleRef(r("_x", &[], "${_x}"))),
        ("${a.b.0}", CUR, SingleRef(r("a", &["b", "0"], "${a.b.0}"))),
        (
            " ${x}",
            CUR,
            Template(vec![lit(" "), Piece::Ref(r("x", &[], "${x}"))]),
        ),
        (
            "${x}\n",
            CUR,
            Template(vec![Piece::Ref(r("x", &[], "${x}")), lit("\n")]),
        ),
        (
            "Reason: ${reason}\nSolution: ${solution}",
            CUR,
            Template(vec![
                lit("Reason: "),
                Piece::Ref(r("reason", &[], "${reason}")),
                lit("\nSolution: "),
                Piece::Ref(r("solution", &[], "${solution}")),
            ]),
        ),
        (
            "${a}${b}",
            CUR,
            Template(vec![
                Piece::Ref(r("a", &[], "${a}")),
                Piece::Ref(r("b", &[], "${b}")),
            ]),
        ),
        // Not references: kept as literal text, merged with the text around them.
        ("${", CUR, Literal),
        ("${x", CUR, Literal),
        ("${}", CUR, Literal),
        ("${1x}", CUR, Literal),
        ("${a b}", CUR, Literal),
        ("${a.}", CUR, Literal),
        ("${a..b}", CUR, Literal),
        ("${.a}", CUR, Literal),
        ("$ {x}", CUR, Literal),
        ("${ x }", CUR, Literal),
        ("${café}", CUR, Literal),
        ("{x}", CUR, Literal),
        (
            "a ${ b ${c} d ${",
            CUR,
            Template(vec![
                lit("a ${ b "),
                Piece::Ref(r("c", &[], "${c}")),
                lit(" d ${"),
            ]),
        ),
        (
            "$${x}}",
            CUR,
            Template(vec![lit("$"), Piece::Ref(r("x", &[], "${x}")), lit("}")]),
        ),
        // No escape syntax: a backslash is text, the reference still a reference.
        (
            "\\${x}",
            CUR,
            Template(vec![lit("\\"), Piece::Ref(r("x", &[], "${x}"))]),
        ),
        // `{{x}}` only in the older dialect.
        ("{{x}}", CUR, Literal),
        ("{{x}}", OLD, SingleRef(r("x", &[], "{{x}}"))),
        ("{{ x }}", OLD, SingleRef(r("x", &[], "{{ x }}"))),
        ("{{x.y}}", OLD, Literal),
        ("{{ }}", OLD, Literal),
        ("{x}", OLD, Literal),
        (
            "{{{x}}}",
            OLD,
            Template(vec![lit("{"), Piece::Ref(r("x", &[], "{{x}}")), lit("}")]),
        ),
        (
            "Is {{number}} even?",
            OLD,
            Template(vec![
                lit("Is "),
                Piece::Ref(r("number", &[], "{{number}}")),
                lit(" even?"),
            ]),
        ),
        // The older dialect also reads `${x}` (plans that mix forms mean it as a reference).
        (
            "{{a}} and ${b}",
            OLD,
            Template(vec![
                Piece::Ref(r("a", &[], "{{a}}")),
                lit(" and "),
                Piece::Ref(r("b", &[], "${b}")),
            ]),
        ),
        (
            "{{a}} and ${b}",
            CUR,
            Template(vec![lit("{{a}} and "), Piece::Ref(r("b", &[], "${b}"))]),
        ),
        (
            "日本語 ${x} テキスト",
            CUR,
            Template(vec![
                lit("日本語 "),
                Piece::Ref(r("x", &[], "${x}")),
                lit(" テキスト"),
            ]),
        ),
    ];
    for (src, d, want) in cases {
        assert_eq!(
            classify_string(src, d),
            want,
            "classify_string({src:?}, {d:?})"
        );
    }
}

#[test]
fn template_literals_are_never_empty() {
    for s in [
        "${a}${b}${c}",
        "${a}",
        "x${a}",
        "${a}x",
        "${a}${",
        "$$$${a}{{{{b}}",
    ] {
        for d in [CUR, OLD] {
            if let StringForm::Template(pieces) = classify_string(s, d) {
                for p in &pieces {
                    assert!(
                        !matches!(p, Piece::Lit(t) if t.is_empty()),
                        "{s:?}: empty literal"
                    );
                }
                for w in pieces.windows(2) {
                    assert!(
                        !matches!(w, [Piece::Lit(_), Piece::Lit(_)]),
                        "{s:?}: adjacent literals not merged"
                    );
                }
            }
        }
    }
}

#[test]
fn object_reference() {
    let node = plan_syntax::read(r#"{"var": "user_question"}"#)
        .value
        .expect("json");
    let r = plan_syntax::object_ref(&node).expect("reference");
    assert_eq!(r.name, "user_question");
    assert_eq!(r.raw, r#"{"var":"user_question"}"#);
    for src in [
        r#"{"var": 1}"#,
        r#"{"var": "a", "x": 1}"#,
        r#"{"vars": "a"}"#,
        r#"["var"]"#,
    ] {
        let node = plan_syntax::read(src).value.expect("json");
        assert_eq!(plan_syntax::object_ref(&node), None, "{src}");
    }
}

/// A deliberately naive classifier written from the reference syntax, to cross-check the
/// logos-based one on random strings.
fn naive(s: &str, d: Dialect) -> StringForm {
    fn name_char(c: u8) -> bool {
        c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
    }
    fn dollar(b: &[u8]) -> Option<usize> {
        let rest = b.strip_prefix(b"${")?;
        let first = *rest.first()?;
        if !name_char(first) || first.is_ascii_digit() {
            return None;
        }
        let mut i = 0;
        loop {
            let seg = rest[i..].iter().take_while(|&&c| name_char(c)).count();
            if seg == 0 {
                return None;
            }
            i += seg;
            match rest.get(i) {
                Some(b'.') => i += 1,
                Some(b'}') => return Some(2 + i + 1),
                _ => return None,
            }
        }
    }
    fn brace(b: &[u8]) -> Option<usize> {
        let rest = b.strip_prefix(b"{{")?;
        let sp = |r: &[u8]| r.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
        let mut i = sp(rest);
        let first = *rest.get(i)?;
        if !name_char(first) || first.is_ascii_digit() {
            return None;
        }
        i += rest[i..].iter().take_while(|&&c| name_char(c)).count();
        i += sp(&rest[i..]);
        rest[i..].starts_with(b"}}").then_some(2 + i + 2)
    }
    let b = s.as_bytes();
    let mut pieces: Vec<Piece> = Vec::new();
    let mut lit = String::new();
    let mut i = 0;
    while i < b.len() {
        let m = dollar(&b[i..]).or_else(|| if d == OLD { brace(&b[i..]) } else { None });
        match m {
            Some(n) => {
                if !lit.is_empty() {
                    pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                let raw = &s[i..i + n];
                let inner = raw.trim_start_matches("${").trim_start_matches("{{");
                let inner = inner.trim_end_matches('}').trim();
                let mut parts = inner.split('.');
                let name = parts.next().unwrap_or_default();
                let path: Vec<&str> = parts.collect();
                pieces.push(Piece::Ref(r(name, &path, raw)));
                i += n;
            }
            None => {
                let c = s[i..].chars().next().expect("in bounds");
                lit.push(c);
                i += c.len_utf8();
            }
        }
    }
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    match pieces.len() {
        0 => StringForm::Literal,
        1 if matches!(pieces[0], Piece::Lit(_)) => StringForm::Literal,
        1 => match pieces.pop() {
            Some(Piece::Ref(r)) => StringForm::SingleRef(r),
            _ => unreachable!(),
        },
        _ => StringForm::Template(pieces),
    }
}

mod cross_check {
    use super::*;
    use proptest::prelude::*;

    fn templ() -> impl Strategy<Value = String> {
        let atoms = prop::sample::select(vec![
            "$", "{", "}", "{{", "}}", "${", ".", "a", "b1", "_", "-", "0", " ", "\t", "é", "x y",
            "\\",
        ]);
        prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 5000, ..ProptestConfig::default() })]
        #[test]
        fn logos_classifier_matches_naive(s in templ()) {
            for d in [CUR, OLD] {
                prop_assert_eq!(classify_string(&s, d), naive(&s, d), "{:?} {:?}", s, d);
            }
        }

        /// The borrowed forms the compiler uses say exactly what `classify_string` says.
        #[test]
        fn borrowed_forms_match_owned(s in templ()) {
            for d in [CUR, OLD] {
                let owned = classify_string(&s, d);
                let borrowed = match plan_syntax::classify_str(&s, d) {
                    plan_syntax::StrForm::Literal => StringForm::Literal,
                    plan_syntax::StrForm::SingleRef(r) => StringForm::SingleRef(r.to_var_ref()),
                    plan_syntax::StrForm::Template(p) => StringForm::Template(
                        p.iter()
                            .map(|p| match p {
                                plan_syntax::PieceStr::Lit(t) => Piece::Lit((*t).to_owned()),
                                plan_syntax::PieceStr::Ref(r) => Piece::Ref(r.to_var_ref()),
                            })
                            .collect(),
                    ),
                };
                prop_assert_eq!(&borrowed, &owned, "{:?} {:?}", s, d);
                prop_assert_eq!(
                    plan_syntax::has_ref(&s, d),
                    !matches!(owned, StringForm::Literal),
                    "{:?} {:?}", s, d
                );
            }
        }
    }
}
