//! The JSON tree the lenient reader produces: every node keeps its byte span.
//! (Types only here; the reader lives in `reader.rs`.)

use std::borrow::Cow;

use crate::span::Span;

/// A JSON value with the span of its source text.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub span: Span,
    pub kind: NodeKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Node>),
    /// Members in source order; duplicate keys are kept (the reader warns about them).
    Object(Vec<Member>),
}

/// One `"key": value` member of an object.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// NB: the keys every plan repeats (`seq_no`, `type`, `parameters`, ...) are shared
    /// static strings (`Cow::Borrowed`), so reading a plan does not allocate them once per
    /// instruction; any other key is owned. Compare and use it as a `&str`.
    pub key: Cow<'static, str>,
    pub key_span: Span,
    pub value: Node,
}

impl Node {
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[Member]> {
        match &self.kind {
            NodeKind::Object(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Node]> {
        match &self.kind {
            NodeKind::Array(a) => Some(a),
            _ => None,
        }
    }

    /// First member named `key` of an object node.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_object()?
            .iter()
            .find(|m| m.key == key)
            .map(|m| &m.value)
    }

    /// Integer value, if this is a number with no fractional part that fits `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match &self.kind {
            NodeKind::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    /// A short name of the JSON type, for messages ("string", "object", ...).
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "boolean",
            NodeKind::Number(n) if n.is_f64() => "float",
            NodeKind::Number(_) => "integer",
            NodeKind::String(_) => "string",
            NodeKind::Array(_) => "array",
            NodeKind::Object(_) => "object",
        }
    }

    /// Converts to a plain `serde_json::Value` (spans dropped, key order kept; for a
    /// duplicate key the last one wins, as in most JSON parsers).
    pub fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Number(n) => Value::Number(n.clone()),
            NodeKind::String(s) => Value::String(s.clone()),
            NodeKind::Array(a) => Value::Array(a.iter().map(Node::to_value).collect()),
            NodeKind::Object(m) => Value::Object(
                m.iter()
                    .map(|m| (m.key.to_string(), m.value.to_value()))
                    .collect(),
            ),
        }
    }
}

/// The shared spelling of a key plans write in every instruction, if `key` is one.
pub(crate) fn common_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "seq_no" => "seq_no",
        "type" => "type",
        "parameters" => "parameters",
        "tool_name" => "tool_name",
        "tool_params" => "tool_params",
        "output_vars" => "output_vars",
        "output_var" => "output_var",
        "chain_of_thoughts" => "chain_of_thoughts",
        "dependency_analysis" => "dependency_analysis",
        "condition_prompt" => "condition_prompt",
        "jump_if_true" => "jump_if_true",
        "jump_if_false" => "jump_if_false",
        "target_seq" => "target_seq",
        "true_branch" => "true_branch",
        "false_branch" => "false_branch",
        "var_name" => "var_name",
        _ => return None,
    })
}
