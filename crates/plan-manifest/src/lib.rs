//! `plan-manifest`: which tools exist, their parameters and effects, and which backend
//! `planvm` uses for each. One TOML file (`--tools FILE.toml`) serves `planc` and `planvm`.
//!
//! Built-in tools (always present, overridable by name): `llm_generate(prompt, context?)`,
//! `vector_search(query, top_k: int)`, `retrieve_knowledge_graph(query)`,
//! `retrieve_embedded_chunks(embedding_query, top_k: int)`.

use serde::{Deserialize, Serialize};

/// Declared side effects of a tool. `write` tools keep program order relative to every
/// other call when the VM runs calls concurrently.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effects {
    Pure,
    #[default]
    Read,
    Write,
}

/// The JSON type a tool parameter accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    #[default]
    Any,
    String,
    /// An integer (`top_k`).
    Int,
    /// Integer or float.
    Number,
    Bool,
    Array,
    Object,
}

impl ParamType {
    /// Whether a constant JSON value is acceptable for this type.
    pub fn accepts(self, v: &serde_json::Value) -> bool {
        use serde_json::Value;
        match self {
            ParamType::Any => true,
            ParamType::String => v.is_string(),
            ParamType::Int => v.is_i64() || v.is_u64(),
            ParamType::Number => v.is_number(),
            ParamType::Bool => v.is_boolean(),
            ParamType::Array => matches!(v, Value::Array(_)),
            ParamType::Object => matches!(v, Value::Object(_)),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::Any => "any",
            ParamType::String => "string",
            ParamType::Int => "int",
            ParamType::Number => "number",
            ParamType::Bool => "bool",
            ParamType::Array => "array",
            ParamType::Object => "object",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    pub name: String,
    #[serde(default, rename = "type")]
    pub ty: ParamType,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub description: String,
}

/// How `planvm` serves a tool. Secrets are never stored here: only the name of the
/// environment variable that holds them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum BackendConfig {
    /// OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp server).
    Openai {
        base_url: String,
        model: String,
        /// Name of the environment variable holding the API key (none: no auth header).
        #[serde(default)]
        api_key_env: Option<String>,
        #[serde(default)]
        temperature: Option<f64>,
        #[serde(default)]
        timeout_secs: Option<f64>,
        #[serde(default)]
        max_retries: Option<u32>,
        #[serde(default)]
        concurrency: Option<usize>,
    },
    /// POST the args as JSON to `url`; the output is the response or `pointer` into it.
    Http {
        url: String,
        #[serde(default)]
        pointer: Option<String>,
        /// Name of an env var whose value is sent as `Authorization: Bearer ...`.
        #[serde(default)]
        api_key_env: Option<String>,
        #[serde(default)]
        timeout_secs: Option<f64>,
        #[serde(default)]
        max_retries: Option<u32>,
        #[serde(default)]
        concurrency: Option<usize>,
    },
    /// Answer from a cassette (`--replay`), no network.
    Replay {
        #[serde(default)]
        cassette: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub params: Vec<ParamSpec>,
    #[serde(default)]
    pub effects: Effects,
    #[serde(default)]
    pub backend: Option<BackendConfig>,
}

impl ToolSpec {
    pub fn param(&self, name: &str) -> Option<&ParamSpec> {
        self.params.iter().find(|p| p.name == name)
    }
}

/// The set of known tools.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub tools: Vec<ToolSpec>,
    /// Backend for tools that name none (and for `jmp_condition`, the LLM used for
    /// conditions, unless a tool named `jmp_condition` is declared).
    pub default_backend: Option<BackendConfig>,
}

fn p(name: &str, ty: ParamType, required: bool, description: &str) -> ParamSpec {
    ParamSpec { name: name.into(), ty, required, description: description.into() }
}

impl Manifest {
    /// The four built-in tools, with no backend configured.
    pub fn builtin() -> Self {
        let tool = |name: &str, description: &str, effects, params| ToolSpec {
            name: name.into(),
            description: description.into(),
            params,
            effects,
            backend: None,
        };
        Manifest {
            tools: vec![
                tool(
                    "llm_generate",
                    "Generates a response using the language model.",
                    Effects::Pure,
                    vec![
                        p("prompt", ParamType::String, true, "The prompt."),
                        p("context", ParamType::Any, false, "Additional context."),
                    ],
                ),
                tool(
                    "vector_search",
                    "Retrieves the most relevant document chunks by embedding similarity.",
                    Effects::Read,
                    vec![
                        p("query", ParamType::String, true, "The query."),
                        p("top_k", ParamType::Int, true, "How many chunks to return."),
                    ],
                ),
                tool(
                    "retrieve_knowledge_graph",
                    "Retrieves nodes and relationships from a knowledge graph.",
                    Effects::Read,
                    vec![p("query", ParamType::String, true, "The query.")],
                ),
                tool(
                    "retrieve_embedded_chunks",
                    "Retrieves embedded knowledge chunks for an embedding query.",
                    Effects::Read,
                    vec![
                        p("embedding_query", ParamType::String, true, "The query."),
                        p("top_k", ParamType::Int, true, "How many chunks to return."),
                    ],
                ),
            ],
            default_backend: None,
        }
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }
}
