//! An MCP tool as a manifest tool: its input JSON Schema as params, its annotations as
//! effects. Lenient: a schema construct with no manifest equivalent widens the param (to
//! `any`, no default, no enum) rather than failing the import, since the server still
//! checks its own arguments; only what the manifest can say is checked before a run.

use plan_manifest::{BackendConfig, Effects, McpServer, ParamSpec, ParamType, ToolSpec};
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::Value;

/// The manifest tool for `tool` of `server`.
pub fn tool_spec(server: &McpServer, tool: &Tool) -> ToolSpec {
    let schema = &*tool.input_schema;
    let required: Vec<&str> = match schema.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let params = match schema.get("properties") {
        Some(Value::Object(props)) => props
            .iter()
            .map(|(name, s)| param(name, s, required.contains(&name.as_str())))
            .collect(),
        _ => Vec::new(),
    };
    let description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default()
        .trim()
        .to_owned();
    ToolSpec {
        name: server.tool_name(&tool.name),
        description,
        params,
        effects: effects(tool.annotations.as_ref()),
        retrieval: false,
        backend: Some(BackendConfig::Mcp {
            server: server.name.clone(),
            tool: Some(tool.name.to_string()),
        }),
    }
}

/// A tool that says it only reads is `read`; any other (destructive, or saying nothing) is
/// `write`: never started early, never issued ahead, never retried after an unknown
/// outcome. The hints come from the server, so they can only make a tool less trusted
/// than `read`, never `pure`.
pub fn effects(annotations: Option<&ToolAnnotations>) -> Effects {
    let read_only = annotations.and_then(|a| a.read_only_hint) == Some(true);
    let destructive = annotations.and_then(|a| a.destructive_hint) == Some(true);
    if read_only && !destructive {
        Effects::Read
    } else {
        Effects::Write
    }
}

fn param(name: &str, schema: &Value, required: bool) -> ParamSpec {
    let ty = param_type(schema);
    let text = |k: &str| schema.get(k).and_then(Value::as_str).map(str::trim);
    let description = text("description")
        .or_else(|| text("title"))
        .unwrap_or_default()
        .to_owned();
    let choices = match (schema.get("enum"), schema.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (None, Some(c)) => Some(vec![c.clone()]),
        _ => None,
    }
    .filter(|c| !c.is_empty() && c.iter().all(|v| ty.accepts(v)));
    let default = schema
        .get("default")
        .filter(|d| !d.is_null() && ty.accepts(d))
        .filter(|d| choices.as_ref().is_none_or(|c| c.contains(d)))
        .cloned();
    ParamSpec {
        name: name.to_owned(),
        ty,
        // NB: a param with a default is optional, whatever the schema says.
        required: required && default.is_none(),
        description,
        default,
        choices,
    }
}

/// The param type of a JSON Schema: its `type`, with `null` dropped from a list of types
/// (a null argument stands for an absent one); anything else is `any`.
fn param_type(schema: &Value) -> ParamType {
    let one = |t: &str| match t {
        "string" => Some(ParamType::String),
        "integer" => Some(ParamType::Int),
        "number" => Some(ParamType::Number),
        "boolean" => Some(ParamType::Bool),
        "array" => Some(ParamType::Array),
        "object" => Some(ParamType::Object),
        _ => None,
    };
    match schema.get("type") {
        Some(Value::String(t)) => one(t),
        Some(Value::Array(ts)) => {
            let mut ts = ts.iter().filter_map(Value::as_str).filter(|t| *t != "null");
            match (ts.next(), ts.next()) {
                (Some(t), None) => one(t),
                _ => None,
            }
        }
        _ => None,
    }
    .unwrap_or(ParamType::Any)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(v: Value) -> Tool {
        serde_json::from_value(v).unwrap()
    }

    fn server() -> McpServer {
        McpServer {
            name: "everything".into(),
            command: Some(vec!["x".into()]),
            prefix: Some("ev_".into()),
            ..McpServer::default()
        }
    }

    #[test]
    fn schema_becomes_params() {
        let t = tool(json!({
            "name": "get-sum",
            "description": "Returns the sum of two numbers",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "First number"},
                    "b": {"type": ["integer", "null"], "default": 2},
                    "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "any": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                    "bad_default": {"type": "integer", "default": "seven"}
                },
                "required": ["a", "b", "bad_default"]
            },
            "annotations": {"readOnlyHint": true}
        }));
        let spec = tool_spec(&server(), &t);
        assert_eq!(spec.name, "ev_get-sum");
        assert_eq!(spec.effects, Effects::Read);
        assert_eq!(
            spec.backend,
            Some(BackendConfig::Mcp {
                server: "everything".into(),
                tool: Some("get-sum".into())
            })
        );
        let p = |n: &str| spec.param(n).unwrap();
        assert_eq!((p("a").ty, p("a").required), (ParamType::Number, true));
        assert_eq!(p("a").description, "First number");
        // A default makes a required param optional.
        assert_eq!(
            (p("b").ty, p("b").required, p("b").default.clone()),
            (ParamType::Int, false, Some(json!(2)))
        );
        assert_eq!(p("mode").choices, Some(vec![json!("fast"), json!("slow")]));
        assert_eq!(p("tags").ty, ParamType::Array);
        assert_eq!(p("any").ty, ParamType::Any);
        // A default of the wrong type is dropped, and the param stays required.
        assert_eq!(
            (p("bad_default").default.clone(), p("bad_default").required),
            (None, true)
        );
    }

    #[test]
    fn hints_become_effects() {
        let a = |v: Value| serde_json::from_value::<ToolAnnotations>(v).unwrap();
        assert_eq!(effects(None), Effects::Write);
        assert_eq!(effects(Some(&a(json!({})))), Effects::Write);
        assert_eq!(
            effects(Some(&a(json!({"readOnlyHint": true})))),
            Effects::Read
        );
        assert_eq!(
            effects(Some(&a(
                json!({"readOnlyHint": false, "idempotentHint": true})
            ))),
            Effects::Write
        );
        assert_eq!(
            effects(Some(&a(
                json!({"readOnlyHint": true, "destructiveHint": true})
            ))),
            Effects::Write
        );
    }
}
