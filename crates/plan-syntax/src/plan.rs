//! Reader `Node` → plan AST: the structural checks (`E01xx`, `W01xx`) and dialect detection.
//!
//! Both dialects are read by one builder; the dialect only matters for how references are
//! written inside strings, so it is decided at the end from the forms that were seen.
//! Duplicate keys resolve as in Python's `json.loads` (and `Node::to_value`): the last value
//! wins, at the position of the first (the reader already warned about them).
//!
//! The builder consumes the reader's tree: values and names are moved into the AST
//! ([`take`]), not copied, since copying every parameter value (and freeing the original)
//! was a large share of compile time. Each value is taken at most once, after every check
//! that reads it; what is left behind is `null`.

use std::borrow::Cow;

use crate::ast::{
    Call, CallForm, Condition, Dialect, InstrKind, Instruction, Jmp, Name, Plan, Reasoning, SeqRef,
    TypeName,
};
use crate::codes;
use crate::diag::{Diagnostic, Parsed};
use crate::json::{Member, Node, NodeKind};
use crate::limits;
use crate::reader::Elements;
use crate::span::Span;
use smallvec::SmallVec;

/// Older-dialect types that are tool calls named by their type.
const TOOL_TYPES: &[&str] = &[
    "llm_generate",
    "retrieve_knowledge_graph",
    "retrieve_embedded_chunks",
    "vector_search",
];
/// Every type the builder knows, for "did you mean" suggestions.
const ALL_TYPES: &[&str] = &[
    "reasoning",
    "assign",
    "jmp",
    "calling",
    "llm_generate",
    "retrieve_knowledge_graph",
    "retrieve_embedded_chunks",
    "vector_search",
    "condition",
];

/// The instructions of a top-level array, each built as soon as the reader has read it
/// (see `reader::Elements`), and the builder that built them.
#[derive(Default)]
pub(crate) struct Streamed {
    b: Builder,
    instructions: Vec<Instruction>,
}

impl Elements for Streamed {
    fn element(&mut self, mut node: Node) -> Option<Node> {
        self.instructions.push(self.b.instruction(&mut node, 0));
        None
    }
}

/// The plan of the reader's `root`, whose top-level array's elements, if any, were given
/// to `streamed` as they were read.
pub(crate) fn parse_plan(mut root: Node, streamed: Streamed) -> Parsed<Option<Plan>> {
    let Streamed {
        mut b,
        mut instructions,
    } = streamed;
    let Some(array) = b.instruction_array(&mut root) else {
        return Parsed {
            value: None,
            diagnostics: b.diags,
        };
    };
    let array_span = array.span;
    // NB: what is left in the tree: a plan wrapped in an object (its array is not the
    // top-level one), or a tree the reader built whole (`crate::parse_plan`). Each
    // instruction's node is dropped as soon as it is built.
    if let NodeKind::Array(items) = &mut array.kind {
        instructions.extend(
            std::mem::take(items)
                .into_iter()
                .map(|mut n| b.instruction(&mut n, 0)),
        );
    }
    let dialect = if b.older.is_some() {
        Dialect::Older
    } else {
        Dialect::Current
    };
    if let (Some((old_span, old_what)), Some((cur_span, cur_what))) = (&b.older, &b.current) {
        b.diags.push(
            Diagnostic::warning(
                codes::MIXED_DIALECT,
                format!("plan mixes the older dialect ({old_what}) with the current one ({cur_what})"),
            )
            .with_span(*cur_span)
            .with_label(*old_span, "older-dialect form")
            .with_help(
                "use one dialect: current plans call tools with {\"type\": \"calling\", \"parameters\": \
                 {\"tool_name\": ..., \"tool_params\": {...}, \"output_vars\": [...]}} and branch with `jmp`",
            ),
        );
    }
    Parsed {
        value: Some(Plan {
            dialect,
            instructions,
            span: array_span,
        }),
        diagnostics: b.diags,
    }
}

#[derive(Default)]
struct Builder {
    diags: Vec<Diagnostic>,
    /// First older-dialect form seen (span, description).
    older: Option<(Span, String)>,
    /// First current-only form seen (`jmp`, `calling`).
    current: Option<(Span, String)>,
}

/// Members of an object with duplicates resolved as Python does: one entry per key, the
/// last value, at the first position. Returns indices into `members` (parameter objects
/// are small: no allocation for the usual few).
fn dedup(members: &[Member]) -> SmallVec<[usize; 8]> {
    let mut out: SmallVec<[usize; 8]> = SmallVec::new();
    if members.len() > 16 {
        // NB: an object may have 100k keys: hash, never compare every pair.
        let mut at: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::with_capacity(members.len());
        for (i, m) in members.iter().enumerate() {
            match at.get(&*m.key) {
                Some(&k) => out[k] = i,
                None => {
                    at.insert(&m.key, out.len());
                    out.push(i);
                }
            }
        }
        return out;
    }
    for (i, m) in members.iter().enumerate() {
        match out.iter_mut().find(|o| members[**o].key == m.key) {
            Some(slot) => *slot = i,
            None => out.push(i),
        }
    }
    out
}

/// Moves a value out of the tree, leaving `null` with the same span.
fn take(node: &mut Node) -> Node {
    let span = node.span;
    std::mem::replace(
        node,
        Node {
            span,
            kind: NodeKind::Null,
        },
    )
}

/// Moves the members at `idx` (from [`dedup`]) out as (name, value) pairs.
fn take_members(members: &mut [Member], idx: &[usize]) -> Vec<(Name, Node)> {
    let mut out = Vec::with_capacity(idx.len());
    for &i in idx {
        if let Some(m) = members.get_mut(i) {
            let name = Name {
                text: std::mem::take(&mut m.key).into_owned(),
                span: m.key_span,
            };
            out.push((name, take(&mut m.value)));
        }
    }
    out
}

/// The text of a string node, moved out of the tree.
fn take_string(node: &mut Node) -> Option<String> {
    match &mut node.kind {
        NodeKind::String(s) => Some(std::mem::take(s)),
        _ => None,
    }
}

/// The last member named `key` (the one Python and serde_json keep).
fn get<'a>(members: &'a [Member], key: &str) -> Option<&'a Node> {
    members
        .iter()
        .rev()
        .find(|m| m.key == key)
        .map(|m| &m.value)
}

/// [`get`], for taking the value.
fn get_mut<'a>(members: &'a mut [Member], key: &str) -> Option<&'a mut Node> {
    members
        .iter_mut()
        .rev()
        .find(|m| m.key == key)
        .map(|m| &mut m.value)
}

/// Like [`get`], but JSON `null` counts as absent (`"context": null` is common).
fn get_some<'a>(members: &'a [Member], key: &str) -> Option<&'a Node> {
    get(members, key).filter(|n| !matches!(n.kind, NodeKind::Null))
}

/// [`get_some`], taking the value out of the tree.
fn take_some(members: &mut [Member], key: &str) -> Option<Node> {
    get_mut(members, key)
        .filter(|n| !matches!(n.kind, NodeKind::Null))
        .map(take)
}

/// A JSON value as display text: strings raw (moved out), anything else compact JSON.
fn text_of(node: &mut Node) -> String {
    match &mut node.kind {
        NodeKind::String(s) => std::mem::take(s),
        _ => serde_json::to_string(&node.to_value()).unwrap_or_default(),
    }
}

fn describe(node: &Node) -> String {
    match &node.kind {
        NodeKind::String(s) if s.len() <= 40 => format!("the string \"{}\"", s.escape_debug()),
        NodeKind::Number(n) => format!("the number {n}"),
        _ => format!("{} {}", article(node.type_name()), node.type_name()),
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

use plan_value::distance::{MAX_NAME_LEN, edit_distance};

/// The closest candidate within a small edit distance (none for a "word" too long to be
/// a name).
fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    if word.len() > MAX_NAME_LEN {
        return None;
    }
    let limit = (word.len() / 3).max(2);
    let close = candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c);
    // A truncated or unprefixed spelling (`call` for `calling`, `params` for `tool_params`) is
    // far in edits but obvious to a reader.
    close.or_else(|| {
        let lower = word.to_ascii_lowercase();
        (lower.len() >= 3).then(|| {
            candidates
                .iter()
                .copied()
                .find(|c| c.starts_with(&lower) || c.ends_with(&lower))
        })?
    })
}

impl Builder {
    /// The root array, or an array unwrapped from `{"plan": [...]}`.
    fn instruction_array<'a>(&mut self, root: &'a mut Node) -> Option<&'a mut Node> {
        match &root.kind {
            NodeKind::Array(_) => return Some(root),
            NodeKind::Object(members) => {
                let looks_like_instruction =
                    members.iter().any(|m| m.key == "seq_no" || m.key == "type");
                let mut arrays = members
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| matches!(m.value.kind, NodeKind::Array(_)));
                if let (Some((at, only)), None, false) =
                    (arrays.next(), arrays.next(), looks_like_instruction)
                {
                    self.diags.push(
                        Diagnostic::warning(
                            codes::WRAPPED_PLAN,
                            format!("the instruction array was taken out of the object member `{}`", only.key.escape_debug()),
                        )
                        .with_span(only.key_span)
                        .with_help("reply with the JSON array of instructions itself, not an object around it"),
                    );
                    return match &mut root.kind {
                        NodeKind::Object(members) => members.get_mut(at).map(|m| &mut m.value),
                        _ => None,
                    };
                }
                let help = if looks_like_instruction {
                    "this looks like a single instruction: wrap the instructions in an array, [{...}, {...}]"
                } else {
                    "a plan is a JSON array of instructions: [{\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {...}}, ...]"
                };
                self.diags.push(
                    Diagnostic::error(
                        codes::NOT_ARRAY,
                        "the plan is not an array of instructions (found an object)",
                    )
                    .with_span(root.span)
                    .with_help(help),
                );
            }
            _ => {
                self.diags.push(
                    Diagnostic::error(
                        codes::NOT_ARRAY,
                        format!("the plan is not an array of instructions (found {})", describe(root)),
                    )
                    .with_span(root.span)
                    .with_help(
                        "a plan is a JSON array of instructions: [{\"seq_no\": 0, \"type\": \"reasoning\", \"parameters\": {...}}, ...]",
                    ),
                );
            }
        }
        None
    }

    fn error(
        &mut self,
        code: &'static str,
        msg: String,
        span: Span,
        seq: Option<i64>,
        help: impl Into<String>,
    ) {
        self.diags.push(
            Diagnostic::error(code, msg)
                .with_span(span)
                .with_seq(seq)
                .with_help(help),
        );
    }

    fn warning(
        &mut self,
        code: &'static str,
        msg: String,
        span: Span,
        seq: Option<i64>,
        help: impl Into<String>,
    ) {
        self.diags.push(
            Diagnostic::warning(code, msg)
                .with_span(span)
                .with_seq(seq)
                .with_help(help),
        );
    }

    fn saw_older(&mut self, span: Span, what: impl FnOnce() -> String) {
        if self.older.is_none() {
            self.older = Some((span, what()));
        }
    }

    fn saw_current(&mut self, span: Span, what: impl FnOnce() -> String) {
        if self.current.is_none() {
            self.current = Some((span, what()));
        }
    }

    fn instruction(&mut self, node: &mut Node, depth: usize) -> Instruction {
        let node_span = node.span;
        let invalid = |seq_no, seq_span, ty| Instruction {
            seq_no,
            seq_span,
            ty,
            span: node_span,
            kind: InstrKind::Invalid,
        };
        if node.as_object().is_none() {
            self.error(
                codes::NOT_OBJECT,
                format!("an instruction must be an object, found {}", describe(node)),
                node.span,
                None,
                "write each instruction as {\"seq_no\": N, \"type\": \"...\", \"parameters\": {...}}",
            );
            return invalid(None, node.span, None);
        }
        let NodeKind::Object(members) = &mut node.kind else {
            return invalid(None, node_span, None);
        };

        let (seq_no, seq_span) = self.seq_no_of(members, node_span);
        self.unknown_members(members, seq_no);
        let ty = self.type_of(members, seq_span, seq_no);
        let (params_at, params_ok) = self.parameters_of(members, seq_span, seq_no);

        let (Some(ty_name), true, Some(params_node)) = (
            &ty,
            params_ok,
            params_at
                .and_then(|i| members.get_mut(i))
                .map(|m| &mut m.value),
        ) else {
            return invalid(seq_no, seq_span, ty);
        };
        let params_span = params_node.span;
        let NodeKind::Object(params) = &mut params_node.kind else {
            return invalid(seq_no, seq_span, ty);
        };
        let kind = self.kind(ty_name, params, params_span, seq_no, depth);
        Instruction {
            seq_no,
            seq_span,
            ty,
            span: node_span,
            kind,
        }
    }

    /// The instruction's `seq_no` and where it is (else where the instruction is).
    fn seq_no_of(&mut self, members: &[Member], node_span: Span) -> (Option<i64>, Span) {
        match get(members, "seq_no") {
            None => {
                self.error(
                    codes::MISSING_SEQ,
                    "instruction has no `seq_no`".to_owned(),
                    node_span,
                    None,
                    "add \"seq_no\": N, numbering the instructions 0, 1, 2, ... in order",
                );
                (None, node_span)
            }
            Some(v) => match v.as_i64() {
                Some(n) => (Some(n), v.span),
                None => {
                    let help = match v
                        .as_str()
                        .map(str::trim)
                        .and_then(|s| s.parse::<i64>().ok())
                    {
                        Some(n) => format!("write the number without quotes: \"seq_no\": {n}"),
                        None => "`seq_no` is the instruction's integer position: 0, 1, 2, ..."
                            .to_owned(),
                    };
                    self.error(
                        codes::BAD_SEQ,
                        format!("`seq_no` must be an integer, found {}", describe(v)),
                        v.span,
                        None,
                        help,
                    );
                    (None, v.span)
                }
            },
        }
    }

    /// Warns of members other than `seq_no`, `type` and `parameters`.
    fn unknown_members(&mut self, members: &[Member], seq_no: Option<i64>) {
        for m in members.iter() {
            if !matches!(&*m.key, "seq_no" | "type" | "parameters") {
                let help = match &*m.key {
                    "tool_name" | "tool_params" | "output_vars" | "output_var" => {
                        format!("move `{}` inside \"parameters\": {{...}}", m.key.escape_debug())
                    }
                    _ => "an instruction has only `seq_no`, `type` and `parameters`; remove this member".to_owned(),
                };
                self.warning(
                    codes::UNKNOWN_MEMBER,
                    format!("instruction member `{}` is ignored", m.key.escape_debug()),
                    m.key_span,
                    seq_no,
                    help,
                );
            }
        }
    }

    /// The instruction's `type`, if it is a string.
    fn type_of(
        &mut self,
        members: &mut [Member],
        seq_span: Span,
        seq_no: Option<i64>,
    ) -> Option<TypeName> {
        match get_mut(members, "type") {
            None => {
                self.error(
                    codes::MISSING_TYPE,
                    "instruction has no `type`".to_owned(),
                    seq_span,
                    seq_no,
                    "add \"type\": one of \"reasoning\", \"assign\", \"jmp\", \"calling\"",
                );
                None
            }
            Some(v) => match v.as_str() {
                Some(t) => Some(TypeName {
                    text: match ALL_TYPES.iter().find(|k| **k == t) {
                        Some(&known) => Cow::Borrowed(known),
                        None => Cow::Owned(t.to_owned()),
                    },
                    span: v.span,
                }),
                None => {
                    self.error(
                        codes::BAD_TYPE,
                        format!("`type` must be a string, found {}", describe(v)),
                        v.span,
                        seq_no,
                        "write the type as a string: one of \"reasoning\", \"assign\", \"jmp\", \"calling\"",
                    );
                    None
                }
            },
        }
    }

    /// Where the instruction's `parameters` member is (the last one), and whether it is
    /// an object.
    fn parameters_of(
        &mut self,
        members: &[Member],
        seq_span: Span,
        seq_no: Option<i64>,
    ) -> (Option<usize>, bool) {
        let params_at = members.iter().rposition(|m| m.key == "parameters");
        let params_ok = match params_at.and_then(|i| members.get(i)).map(|m| &m.value) {
            None => {
                let flattened = members
                    .iter()
                    .any(|m| !matches!(&*m.key, "seq_no" | "type"));
                let help = if flattened {
                    "put the instruction's fields inside \"parameters\": {...}"
                } else {
                    "add \"parameters\": {...} (an empty object if the instruction needs none)"
                };
                self.error(
                    codes::MISSING_PARAMETERS,
                    "instruction has no `parameters`".to_owned(),
                    seq_span,
                    seq_no,
                    help,
                );
                false
            }
            Some(v) => match v.as_object() {
                Some(_) => true,
                None => {
                    self.error(
                        codes::BAD_PARAMETERS,
                        format!("`parameters` must be an object, found {}", describe(v)),
                        v.span,
                        seq_no,
                        "write the parameters as an object: \"parameters\": {\"name\": value, ...}",
                    );
                    false
                }
            },
        };
        (params_at, params_ok)
    }

    fn kind(
        &mut self,
        ty: &TypeName,
        params: &mut [Member],
        params_span: Span,
        seq: Option<i64>,
        depth: usize,
    ) -> InstrKind {
        match &*ty.text {
            "reasoning" => {
                let chain_of_thoughts = match get(params, "chain_of_thoughts") {
                    Some(_) => get_mut(params, "chain_of_thoughts"),
                    None => get_mut(params, "chain of thoughts"),
                };
                let chain_of_thoughts = chain_of_thoughts.map(text_of);
                InstrKind::Reasoning(Box::new(Reasoning {
                    chain_of_thoughts,
                    dependency_analysis: get_mut(params, "dependency_analysis").map(text_of),
                }))
            }
            "assign" => self.assign(params, params_span),
            "jmp" => {
                self.saw_current(ty.span, || "`jmp`".to_owned());
                self.jmp(params, params_span, seq)
            }
            "calling" => {
                self.saw_current(ty.span, || "`calling`".to_owned());
                self.calling(params, params_span, seq, CallForm::Calling)
            }
            "condition" => {
                self.saw_older(ty.span, || "`condition`".to_owned());
                self.condition(params, seq, depth)
            }
            t if TOOL_TYPES.contains(&t) => {
                if t != "vector_search" {
                    self.saw_older(ty.span, || format!("`{t}` as an instruction type"));
                }
                self.tool_typed(ty, params, seq)
            }
            t => {
                if get(params, "tool_name").is_some() {
                    self.warning(
                        codes::UNKNOWN_TYPE_CALL,
                        format!("unknown instruction type `{}` with a `tool_name` is run as a tool call", t.escape_debug()),
                        ty.span,
                        seq,
                        "use \"type\": \"calling\" for tool calls",
                    );
                    return self.calling(
                        params,
                        params_span,
                        seq,
                        CallForm::UnknownTypeWithToolName,
                    );
                }
                let help = match suggest(t, ALL_TYPES) {
                    Some(s) => format!(
                        "did you mean \"{s}\"? The instruction types are \"reasoning\", \"assign\", \"jmp\" and \"calling\" \
                         (older plans: \"llm_generate\", \"retrieve_knowledge_graph\", \"retrieve_embedded_chunks\", \"condition\")"
                    ),
                    None => "the instruction types are \"reasoning\", \"assign\", \"jmp\" and \"calling\"; \
                             to call a tool write {\"type\": \"calling\", \"parameters\": {\"tool_name\": ..., \"tool_params\": {...}}}"
                        .to_owned(),
                };
                self.error(
                    codes::UNKNOWN_TYPE,
                    format!("unknown instruction type `{}`", t.escape_debug()),
                    ty.span,
                    seq,
                    help,
                );
                InstrKind::Invalid
            }
        }
    }

    fn assign(&mut self, params: &mut [Member], params_span: Span) -> InstrKind {
        let members = dedup(params);
        // Older form: exactly `value` and `var_name`, the name a string.
        if members.len() == 2
            && get(params, "value").is_some()
            && let Some(var) = get_mut(params, "var_name")
            && let Some(text) = take_string(var)
        {
            let name = Name {
                text,
                span: var.span,
            };
            self.saw_older(params_span, || {
                "`assign` with `value`/`var_name`".to_owned()
            });
            let value = get_mut(params, "value").map(take).unwrap_or(Node {
                span: params_span,
                kind: NodeKind::Null,
            });
            return InstrKind::Assign {
                vars: vec![(name, value)],
            };
        }
        InstrKind::Assign {
            vars: take_members(params, &members),
        }
    }

    /// A jump target: an integer seq_no. `None` if absent/null or invalid (reported).
    fn target(&mut self, params: &[Member], key: &str, seq: Option<i64>) -> Option<SeqRef> {
        let v = get_some(params, key)?;
        if let Some(n) = v.as_i64() {
            return Some(SeqRef {
                seq_no: n,
                span: v.span,
            });
        }
        let help = match v
            .as_str()
            .map(str::trim)
            .and_then(|s| s.parse::<i64>().ok())
        {
            Some(n) => format!("write the seq_no without quotes: \"{key}\": {n}"),
            None => format!("`{key}` is the integer `seq_no` of the instruction to jump to"),
        };
        self.error(
            codes::BAD_JUMP_TARGET,
            format!(
                "jump target `{key}` must be an integer seq_no, found {}",
                describe(v)
            ),
            v.span,
            seq,
            help,
        );
        None
    }

    /// Warns about parameters not in `known` (nor in `also_accepted`, tolerated spellings).
    fn unknown_params(
        &mut self,
        params: &[Member],
        known: &[&str],
        also_accepted: &[&str],
        seq: Option<i64>,
        what: &str,
    ) {
        for m in params {
            if known.contains(&&*m.key) || also_accepted.contains(&&*m.key) {
                continue;
            }
            let help = match suggest(&m.key, known) {
                Some(s) => format!("did you mean `{s}`? `{what}` takes {}", list(known)),
                None => format!("`{what}` takes {}", list(known)),
            };
            self.warning(
                codes::UNKNOWN_PARAMETER,
                format!(
                    "parameter `{}` of `{what}` is ignored",
                    m.key.escape_debug()
                ),
                m.key_span,
                seq,
                help,
            );
        }
    }

    fn jmp(&mut self, params: &mut [Member], params_span: Span, seq: Option<i64>) -> InstrKind {
        const KNOWN: &[&str] = &[
            "condition_prompt",
            "context",
            "jump_if_true",
            "jump_if_false",
            "target_seq",
        ];
        self.unknown_params(params, KNOWN, &[], seq, "jmp");
        let condition_prompt = take_some(params, "condition_prompt");
        let context = take_some(params, "context");
        let jump_if_true = self.target(params, "jump_if_true", seq);
        let jump_if_false = self.target(params, "jump_if_false", seq);
        let target_seq = self.target(params, "target_seq", seq);
        let written = |k: &str| get_some(params, k).is_some();
        if let Some(prompt) = &condition_prompt {
            let missing: Vec<&str> = ["jump_if_true", "jump_if_false"]
                .into_iter()
                .filter(|k| !written(k))
                .collect();
            if !missing.is_empty() {
                self.error(
                    codes::MISSING_BRANCH_TARGET,
                    format!("conditional `jmp` has no `{}`", missing.join("` and no `")),
                    prompt.span,
                    seq,
                    "a conditional jmp needs both \"jump_if_true\": N and \"jump_if_false\": M (seq_no of the next step)",
                );
            }
            if let Some(t) = get_some(params, "target_seq") {
                self.warning(
                    codes::JMP_BOTH_FORMS,
                    "`target_seq` is ignored in a conditional `jmp`".to_owned(),
                    t.span,
                    seq,
                    "use `jump_if_true`/`jump_if_false` with `condition_prompt`, or `target_seq` alone",
                );
            }
        } else if !written("target_seq") {
            let help = if written("jump_if_true") || written("jump_if_false") {
                "add \"condition_prompt\" to decide between jump_if_true and jump_if_false, or use \"target_seq\": N to always jump"
            } else {
                "add \"target_seq\": N for an unconditional jump, or \"condition_prompt\" with \"jump_if_true\" and \"jump_if_false\""
            };
            self.error(
                codes::JMP_WITHOUT_TARGET,
                "`jmp` has neither `condition_prompt` nor `target_seq`".to_owned(),
                params_span,
                seq,
                help,
            );
        }
        InstrKind::Jmp(Box::new(Jmp {
            condition_prompt,
            context,
            jump_if_true,
            jump_if_false,
            target_seq,
        }))
    }

    fn calling(
        &mut self,
        params: &mut [Member],
        params_span: Span,
        seq: Option<i64>,
        form: CallForm,
    ) -> InstrKind {
        const KNOWN: &[&str] = &["tool_name", "tool_params", "output_vars"];
        self.unknown_params(params, KNOWN, &["output_var"], seq, "calling");
        let tool = match get_mut(params, "tool_name") {
            Some(v) => match take_string(v) {
                Some(text) => Some(Name { text, span: v.span }),
                None => {
                    self.error(
                        codes::MISSING_TOOL_NAME,
                        format!("`tool_name` must be a string, found {}", describe(v)),
                        v.span,
                        seq,
                        "write the tool's name as a string: \"tool_name\": \"llm_generate\"",
                    );
                    None
                }
            },
            None => {
                self.error(
                    codes::MISSING_TOOL_NAME,
                    "`calling` instruction has no `tool_name`".to_owned(),
                    params_span,
                    seq,
                    "add \"tool_name\": the tool to call, e.g. \"llm_generate\" or \"vector_search\"",
                );
                None
            }
        };
        let tool_params =
            get_mut(params, "tool_params").filter(|n| !matches!(n.kind, NodeKind::Null));
        let call_params = match tool_params {
            None => Vec::new(),
            Some(v) => match &mut v.kind {
                NodeKind::Object(m) => {
                    let idx = dedup(m);
                    take_members(m, &idx)
                }
                _ => {
                    self.error(
                        codes::BAD_TOOL_PARAMS,
                        format!("`tool_params` must be an object, found {}", describe(v)),
                        v.span,
                        seq,
                        "write the arguments as an object: \"tool_params\": {\"query\": \"...\"}",
                    );
                    Vec::new()
                }
            },
        };
        let output_vars = self.outputs(params, seq, "output_vars");
        match tool {
            Some(tool) => InstrKind::Call(Box::new(Call {
                tool,
                params: call_params,
                output_vars,
                form,
            })),
            None => InstrKind::Invalid,
        }
    }

    /// Older tool-typed instruction: the type names the tool, `output_var` the result.
    fn tool_typed(&mut self, ty: &TypeName, params: &mut [Member], seq: Option<i64>) -> InstrKind {
        let mut idx = dedup(params);
        idx.retain(|i| {
            params
                .get(*i)
                .is_some_and(|m| m.key != "output_var" && m.key != "output_vars")
        });
        let call_params = take_members(params, &idx);
        let output_vars = self.outputs(params, seq, "output_var");
        InstrKind::Call(Box::new(Call {
            tool: Name {
                text: ty.text.to_string(),
                span: ty.span,
            },
            params: call_params,
            output_vars,
            form: CallForm::ToolTyped,
        }))
    }

    /// Output variable names from `output_vars` / `output_var`, as a string or an array of
    /// strings. `canonical` is the spelling this form documents (others get a warning).
    fn outputs(&mut self, params: &mut [Member], seq: Option<i64>, canonical: &str) -> Vec<Name> {
        let key = match (
            get_some(params, "output_vars"),
            get_some(params, "output_var"),
        ) {
            (Some(_), _) => "output_vars",
            (None, Some(_)) => "output_var",
            (None, None) => return Vec::new(),
        };
        let Some(v) = get_mut(params, key) else {
            return Vec::new();
        };
        let bad = |b: &mut Self, at: &Node| {
            b.error(
                codes::BAD_OUTPUT_VARS,
                format!(
                    "output variable names must be strings, found {}",
                    describe(at)
                ),
                at.span,
                seq,
                "write \"output_vars\": [\"name\", ...] with each variable name a string",
            );
        };
        let v_span = v.span;
        match &mut v.kind {
            NodeKind::String(s) => {
                let form_ok = key == canonical && key == "output_var";
                if !form_ok {
                    self.warning(
                        codes::OUTPUT_VARS_STRING,
                        if key == "output_vars" {
                            "`output_vars` is a single string; read as one output variable"
                                .to_owned()
                        } else {
                            "`output_var` read as `output_vars` with one output variable".to_owned()
                        },
                        v_span,
                        seq,
                        format!("write \"output_vars\": [\"{}\"]", s.escape_debug()),
                    );
                }
                vec![Name {
                    text: std::mem::take(s),
                    span: v_span,
                }]
            }
            NodeKind::Array(items) => {
                if key != canonical && canonical == "output_vars" {
                    self.warning(
                        codes::OUTPUT_VARS_STRING,
                        "`output_var` read as `output_vars`".to_owned(),
                        v_span,
                        seq,
                        "the parameter is spelled \"output_vars\"",
                    );
                }
                let mut out = Vec::with_capacity(items.len());
                for it in items.iter_mut() {
                    let span = it.span;
                    match take_string(it) {
                        Some(text) => out.push(Name { text, span }),
                        None => bad(self, it),
                    }
                }
                out
            }
            _ => {
                bad(self, v);
                Vec::new()
            }
        }
    }

    fn condition(&mut self, params: &mut [Member], seq: Option<i64>, depth: usize) -> InstrKind {
        const KNOWN: &[&str] = &["prompt", "context", "true_branch", "false_branch"];
        self.unknown_params(params, KNOWN, &[], seq, "condition");
        let prompt = take_some(params, "prompt");
        let context = take_some(params, "context");
        let true_branch = self.branch(params, "true_branch", seq, depth);
        let false_branch = self.branch(params, "false_branch", seq, depth);
        InstrKind::Condition(Box::new(Condition {
            prompt,
            context,
            true_branch,
            false_branch,
        }))
    }

    fn branch(
        &mut self,
        params: &mut [Member],
        key: &str,
        seq: Option<i64>,
        depth: usize,
    ) -> Vec<Instruction> {
        let Some(v) = get_mut(params, key).filter(|n| !matches!(n.kind, NodeKind::Null)) else {
            return Vec::new();
        };
        if v.as_array().is_none() {
            self.error(
                codes::BAD_BRANCH,
                format!("`{key}` must be an array of instructions, found {}", describe(v)),
                v.span,
                seq,
                format!("write \"{key}\": [{{\"seq_no\": N, \"type\": \"...\", \"parameters\": {{...}}}}, ...]"),
            );
            return Vec::new();
        };
        if depth + 1 > limits::MAX_PLAN_DEPTH {
            self.error(
                codes::PLAN_TOO_DEEP,
                format!(
                    "`condition` branches are nested deeper than {} levels",
                    limits::MAX_PLAN_DEPTH
                ),
                v.span,
                seq,
                "flatten the plan: use fewer nested conditions",
            );
            return Vec::new();
        }
        match &mut v.kind {
            NodeKind::Array(items) => items
                .iter_mut()
                .map(|n| self.instruction(n, depth + 1))
                .collect(),
            _ => Vec::new(),
        }
    }
}

fn list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("`{s}`")).collect();
    quoted.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        assert_eq!(suggest("call", ALL_TYPES), Some("calling"));
        assert_eq!(suggest("jump", ALL_TYPES), Some("jmp"));
        assert_eq!(suggest("Assign", ALL_TYPES), Some("assign"));
        assert_eq!(suggest("search_the_web_for_things", ALL_TYPES), None);
        // A name of a megabyte costs what 512 chars cost, and is close to nothing.
        assert_eq!(suggest(&"x".repeat(1 << 20), ALL_TYPES), None);
    }
}
