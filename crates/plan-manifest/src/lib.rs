//! `plan-manifest`: which tools exist, their parameters and effects, and which backend
//! `planvm` uses for each. One TOML file (`--tools FILE.toml`) serves `planc` and `planvm`.
//!
//! Built-in tools (always present, overridable by name): `llm_generate(prompt, context?)`,
//! `vector_search(query, top_k: int = 10)`, `retrieve_knowledge_graph(query)`,
//! `retrieve_embedded_chunks(embedding_query, top_k: int = 10)`, and
//! `ask_user(question, choices?)`, answered by a person (effects `human`).
//!
//! Start with [`Manifest::builtin`] and [`Manifest::load`] / [`Manifest::from_toml_str`].
//! Module map: this file holds the data types (the agreed API); `file.rs` the TOML schema
//! and merge rules; `error.rs` the [`ManifestError`] with file, line and column.
//!
//! # The TOML format
//!
//! ```toml
//! [defaults.backend]          # optional; the backend for tools that name none
//! kind = "openai"
//! base_url = "http://127.0.0.1:11434/v1"
//! model = "llama3.1"
//! api_key_env = "OPENAI_API_KEY"   # the NAME of the env var, never the key
//!
//! [[tool]]
//! name = "web_search"         # required, non-empty, unique in the file
//! description = "Searches the web."
//! effects = "read"            # pure | read | write | human (default: read)
//! params = [ { name = "query", type = "string", required = true } ]
//! [tool.backend]              # optional
//! kind = "http"               # openai | http | replay | sql | mcp
//! url = "http://127.0.0.1:8080/search"
//! pointer = "/results"
//!
//! [planner]                   # optional; the LLM that writes plans (`planvm ask`)
//! examples = "planner"      # example plans (a directory, relative to this file)
//! max_examples = 2
//! temperature = 0.2
//! [planner.backend]           # optional; kind openai; default: [defaults.backend]
//! kind = "openai"
//! base_url = "https://api.openai.com/v1"
//! model = "gpt-4o"
//! ```
//!
//! Param keys: `name` (required), `type` (one of `any`, `string`, `int`, `number`, `bool`,
//! `array`, `object`; default `any`), `required` (default false), `default` (a value of
//! the param's type, which calls that omit the param are compiled with; not together
//! with `required = true`), `description`.
//!
//! Merge rules: the file starts from the built-ins. A `[[tool]]` whose name is new adds a
//! tool. A `[[tool]]` whose name is a built-in overrides it key by key: keys it leaves
//! out keep the built-in value, so an entry with only `name` and `backend` keeps the
//! built-in `params`, `description` and `effects`; a `params` list, when given, replaces
//! the built-in list as a whole.
//!
//! Strictness: unknown keys anywhere (including inside `backend`) are errors naming the
//! key; so are duplicate tool names, duplicate param names, empty names and unknown param
//! types (the message lists the accepted ones). Every error carries the file name, line
//! and column.

use serde::{Deserialize, Serialize};

mod error;
mod file;

pub use error::{ManifestError, ManifestErrorKind};

/// Declared side effects of a tool. `write` tools keep program order relative to every
/// other call when the VM runs calls concurrently. A `human` tool (the built-in
/// `ask_user`) is answered by a person: its call suspends the run until someone answers,
/// so it is never issued ahead nor started early, and it has no backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effects {
    Pure,
    #[default]
    Read,
    Write,
    Human,
}

/// The built-in tool a plan asks its user with.
pub const ASK_USER: &str = "ask_user";

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

    /// Every type, in the order error messages list them.
    pub const ALL: [ParamType; 7] = [
        ParamType::Any,
        ParamType::String,
        ParamType::Int,
        ParamType::Number,
        ParamType::Bool,
        ParamType::Array,
        ParamType::Object,
    ];

    /// The type named `s` in a manifest (`"int"`, `"string"`, ...), as [`Self::as_str`] spells it.
    pub fn parse(s: &str) -> Option<ParamType> {
        ParamType::ALL.into_iter().find(|t| t.as_str() == s)
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
    /// The value a call that omits this param is compiled with (so the tool always
    /// receives it, whatever serves it). A param with a default is optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// The values the param may take (`enum` in the file and in JSON Schema); a constant
    /// argument outside them does not compile.
    #[serde(default, rename = "enum", skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<serde_json::Value>>,
}

impl ParamSpec {
    /// `type, required` (or `optional`), then `, one of ...` and `, default ...` when it has
    /// them: a param as the planner's prompt and `planvm tools list` show it.
    pub fn summary(&self) -> String {
        let need = if self.required {
            "required"
        } else {
            "optional"
        };
        let mut s = format!("{}, {need}", self.ty.as_str());
        if let Some(c) = &self.choices {
            let c: Vec<String> = c.iter().map(serde_json::Value::to_string).collect();
            s.push_str(&format!(", one of {}", c.join(", ")));
        }
        if let Some(d) = &self.default {
            s.push_str(&format!(", default {d}"));
        }
        s
    }
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
    /// Run the call's `sql` on a database, under the constraints here (docs/sql.md).
    Sql {
        /// `sqlite:PATH` (relative to the tools file), or `postgres://user@host/db`.
        url: String,
        /// Name of the environment variable holding the PostgreSQL password (never in
        /// `url`).
        #[serde(default)]
        password_env: Option<String>,
        /// Only queries (default true).
        #[serde(default)]
        read_only: Option<bool>,
        /// The tables queries may name (default: all).
        #[serde(default)]
        allow_tables: Option<Vec<String>>,
        /// `table.column` entries no query may read.
        #[serde(default)]
        deny_columns: Option<Vec<String>>,
        /// Rows returned at most (default 200); more set `truncated`.
        #[serde(default)]
        max_rows: Option<usize>,
        /// Bytes of a result (as JSON) at most (default 1 MiB).
        #[serde(default)]
        max_result_bytes: Option<usize>,
        /// How long a query may run (default 10).
        #[serde(default)]
        timeout_secs: Option<f64>,
    },
    /// Call a tool of an MCP server declared by an `[[mcp]]` table (docs/mcp.md).
    Mcp {
        /// The `[[mcp]]` entry's `name`.
        server: String,
        /// The tool's name on the server (default: this tool's name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
    },
}

/// An `[[mcp]]` table: an MCP (Model Context Protocol) server whose tools are imported
/// into the manifest, started over stdio (`command`) or reached over streamable HTTP
/// (`url`). Secrets never appear here: only the names of the variables holding them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// What `[tool.backend] server = ...` and messages call it; unique in the file.
    pub name: String,
    /// The program and its arguments (stdio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Variables set for the program (values in the file: no secrets).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Variables of planvm's environment passed on to the program; the others are not,
    /// but for `PATH`, `HOME` and the locale (so a server never sees the planner's key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// The program's working directory (relative to the tools file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The server's streamable HTTP endpoint (`http://host/mcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent to `url`, each with the name of the variable holding its value.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers_env: std::collections::BTreeMap<String, String>,
    /// Name of the variable whose value is sent to `url` as `Authorization: Bearer ...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Only these of the server's tools (by their names on the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// None of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Put before each imported tool's name (`gh_` + `create_issue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// How long starting the server, listing its tools or one call may take (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
}

impl McpServer {
    /// Whether its tool `name` (its name on the server) is imported.
    pub fn imports(&self, name: &str) -> bool {
        self.include
            .as_ref()
            .is_none_or(|i| i.iter().any(|n| n == name))
            && !self.exclude.iter().any(|n| n == name)
    }

    /// The manifest name of its tool `name`.
    pub fn tool_name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix.as_deref().unwrap_or(""))
    }
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
    /// Finds documents or facts for the plan (`vector_search`, a knowledge graph): its
    /// calls are `retrieval` spans in traces rather than `execute_tool` ones.
    #[serde(default)]
    pub retrieval: bool,
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
    /// The `[planner]` table: the LLM that writes plans (`planvm ask`).
    pub planner: Option<PlannerConfig>,
    /// The `[grounding]` table: which databases the planner is shown, and how much.
    pub grounding: Option<GroundingConfig>,
    /// The `[[mcp]]` tables: servers whose tools are imported (by `plan-mcp`, which
    /// lists them; the tools are not in `tools` until then).
    pub mcp: Vec<McpServer>,
    /// The `[eval]` table: how `planvm eval` grades answers.
    pub eval: Option<EvalConfig>,
    /// The `[pricing."model"]` tables: what a model's tokens cost, by model name.
    pub pricing: std::collections::BTreeMap<String, Price>,
}

/// `[pricing."model"]`: what a million tokens of a model cost (in the currency of the
/// team's choice; reports call it `cost`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    #[serde(default)]
    pub input_per_mtok: f64,
    #[serde(default)]
    pub output_per_mtok: f64,
}

impl Price {
    /// What `input` and `output` tokens cost.
    pub fn cost(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_per_mtok + output as f64 * self.output_per_mtok) / 1e6
    }
}

/// The `[eval]` table of a tools file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalConfig {
    /// An LLM that grades each answer (`[eval.judge]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeConfig>,
}

/// `[eval.judge]`: the LLM judge of `planvm eval`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeConfig {
    /// Its LLM (kind `openai`); none: `[defaults.backend]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendConfig>,
    /// A rubric prompt file (relative to the tools file) instead of the built-in one;
    /// placeholders `{{goal}}`, `{{expected}}`, `{{answer}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Its sampling temperature (overrides the backend's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

/// The `[grounding]` table of a tools file: the tables, columns and values of the `sql`
/// tools' databases that matter for a goal go into the planner's prompt.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroundingConfig {
    /// The `sql` tools whose databases it covers (default: every one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Tables shown at most per database (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tables: Option<usize>,
    /// Columns shown at most per database (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_columns: Option<usize>,
    /// Matching values shown at most per database (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_values: Option<usize>,
    /// Tables scoring below this share (0 to 1) of the best table's score are not shown
    /// (default: the best `max_tables` are, however weakly they match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
    /// A sentence-embedding model's directory (relative to the tools file): a BERT model
    /// as sentence-transformers saves one (`config.json`, `tokenizer.json`,
    /// `model.safetensors`), installed beforehand; nothing is downloaded. Tables are
    /// then ranked by their words' match and their meaning's, fused (docs/sql.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<String>,
}

impl Manifest {
    /// The tools grounding covers: `[grounding] tools`, else every `sql` tool.
    pub fn grounded_tools(&self) -> Vec<&ToolSpec> {
        let wanted = self.grounding.as_ref().and_then(|g| g.tools.as_ref());
        self.tools
            .iter()
            .filter(|t| matches!(t.backend, Some(BackendConfig::Sql { .. })))
            .filter(|t| wanted.is_none_or(|w| w.contains(&t.name)))
            .collect()
    }
}

/// The `[planner]` table of a tools file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannerConfig {
    /// The planner's LLM (kind `openai`); none: `[defaults.backend]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendConfig>,
    /// A directory of example plans (goal, labels, plan), the most similar of which go
    /// into the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<String>,
    /// How many examples go into the prompt (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_examples: Option<usize>,
    /// The planner's sampling temperature (overrides the backend's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// A session's earlier rounds in the prompt, at most this many tokens (estimated);
    /// older ones are summarized (default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_tokens: Option<usize>,
    /// `false`: plans may not ask the user (`ask_user` is left out of the tools, so the
    /// planner is not offered it and a plan that calls it does not compile): for batch
    /// runs and evaluations nobody answers. Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_user: Option<bool>,
}

/// Where what planvm derives from a tools file and keeps between processes (databases'
/// schemas for grounding, MCP servers' tool listings) goes, by `kind`:
/// `$PLANVM_CACHE_DIR/KIND`, else `$XDG_CACHE_HOME/planvm/KIND`, else
/// `~/.cache/planvm/KIND`; `None` when none of these is set.
pub fn cache_dir(kind: &str) -> Option<std::path::PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    env("PLANVM_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("planvm")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/planvm")))
        .map(|d| d.join(kind))
}

fn p(name: &str, ty: ParamType, required: bool, description: &str) -> ParamSpec {
    ParamSpec {
        name: name.into(),
        ty,
        required,
        description: description.into(),
        default: None,
        choices: None,
    }
}

/// `top_k` of the retrieval tools: optional, 10 when omitted, as in the reference
/// (`vector_search(query, top_k=10)`), whose plans often leave it out.
fn top_k() -> ParamSpec {
    ParamSpec {
        default: Some(serde_json::Value::from(10)),
        ..p(
            "top_k",
            ParamType::Int,
            false,
            "How many chunks to return (default 10).",
        )
    }
}

impl BackendConfig {
    /// The name of the environment variable holding its API key, if it has one.
    pub fn api_key_env(&self) -> Option<&str> {
        match self {
            BackendConfig::Openai { api_key_env, .. } | BackendConfig::Http { api_key_env, .. } => {
                api_key_env.as_deref()
            }
            BackendConfig::Replay { .. }
            | BackendConfig::Sql { .. }
            | BackendConfig::Mcp { .. } => None,
        }
    }
}

impl Manifest {
    /// Every backend the file configures: the tools', `[defaults.backend]`, the planner's.
    pub fn backends(&self) -> impl Iterator<Item = &BackendConfig> {
        self.tools
            .iter()
            .filter_map(|t| t.backend.as_ref())
            .chain(self.default_backend.as_ref())
            .chain(self.planner.as_ref().and_then(|p| p.backend.as_ref()))
            .chain(
                self.eval
                    .as_ref()
                    .and_then(|e| e.judge.as_ref())
                    .and_then(|j| j.backend.as_ref()),
            )
    }

    /// The built-in tools, with no backend configured.
    pub fn builtin() -> Self {
        let tool = |name: &str, description: &str, effects, params| ToolSpec {
            retrieval: name.starts_with("retrieve_") || name == "vector_search",
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
                    vec![p("query", ParamType::String, true, "The query."), top_k()],
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
                        top_k(),
                    ],
                ),
                tool(
                    ASK_USER,
                    "Asks the user a question and waits for the answer (the run stops until a person answers). \
                     Only when the goal is ambiguous and a wrong guess would be costly; never for what the other tools can find out.",
                    Effects::Human,
                    vec![
                        p(
                            "question",
                            ParamType::String,
                            true,
                            "The question, in the user's language.",
                        ),
                        p(
                            "choices",
                            ParamType::Array,
                            false,
                            "The answers to choose from (strings), if the answer must be one of them.",
                        ),
                    ],
                ),
            ],
            default_backend: None,
            planner: None,
            grounding: None,
            mcp: Vec::new(),
            eval: None,
            pricing: std::collections::BTreeMap::new(),
        }
    }

    /// The `[[mcp]]` entry named `name`.
    pub fn mcp_server(&self, name: &str) -> Option<&McpServer> {
        self.mcp.iter().find(|s| s.name == name)
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The backend that serves tool `name`: its own, else the default. `None` when the tool
    /// is unknown or neither is configured.
    pub fn backend_for(&self, name: &str) -> Option<&BackendConfig> {
        self.get(name)?
            .backend
            .as_ref()
            .or(self.default_backend.as_ref())
    }
}
