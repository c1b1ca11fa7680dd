//! The TOML manifest: a full valid file, the merge rules, and one test per error kind
//! asserting the whole message with its position.

use plan_manifest::*;

const FULL: &str = r#"
# A manifest using every key.
[defaults.backend]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
model = "llama3.1"
api_key_env = "OPENAI_API_KEY"
temperature = 0.2
timeout_secs = 30.0
max_retries = 2
concurrency = 4

[[tool]]
name = "web_search"
description = "Searches the web."
effects = "read"
params = [
  { name = "query", type = "string", required = true, description = "What to look for." },
  { name = "limit", type = "int" },
  { name = "extra" },
]
[tool.backend]
kind = "http"
url = "http://127.0.0.1:8080/search"
pointer = "/results"
api_key_env = "SEARCH_KEY"

[[tool]]
name = "send_email"
effects = "write"
params = [
  { name = "to", type = "string", required = true },
  { name = "flags", type = "array" },
  { name = "meta", type = "object" },
  { name = "urgent", type = "bool" },
  { name = "score", type = "number" },
]
[tool.backend]
kind = "replay"
cassette = "mail.jsonl"

# Override of a built-in that only gives a backend: keeps the built-in params.
[[tool]]
name = "vector_search"
[tool.backend]
kind = "http"
url = "http://127.0.0.1:9000/vs"
"#;

fn param(name: &str, ty: ParamType, required: bool, description: &str) -> ParamSpec {
    ParamSpec {
        name: name.into(),
        ty,
        required,
        description: description.into(),
        default: None,
        choices: None,
    }
}

#[test]
fn full_file() {
    let m = Manifest::from_toml_str(FULL, "tools.toml").unwrap();
    assert_eq!(
        m.default_backend,
        Some(BackendConfig::Openai {
            base_url: "http://127.0.0.1:11434/v1".into(),
            model: "llama3.1".into(),
            api_key_env: Some("OPENAI_API_KEY".into()),
            temperature: Some(0.2),
            timeout_secs: Some(30.0),
            max_retries: Some(2),
            concurrency: Some(4),
        })
    );
    let names: Vec<_> = m.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "llm_generate",
            "vector_search",
            "retrieve_knowledge_graph",
            "retrieve_embedded_chunks",
            "ask_user",
            "web_search",
            "send_email"
        ]
    );
    assert_eq!(
        m.get("web_search").unwrap(),
        &ToolSpec {
            retrieval: false,
            name: "web_search".into(),
            description: "Searches the web.".into(),
            params: vec![
                param("query", ParamType::String, true, "What to look for."),
                param("limit", ParamType::Int, false, ""),
                param("extra", ParamType::Any, false, ""),
            ],
            effects: Effects::Read,
            backend: Some(BackendConfig::Http {
                url: "http://127.0.0.1:8080/search".into(),
                pointer: Some("/results".into()),
                api_key_env: Some("SEARCH_KEY".into()),
                timeout_secs: None,
                max_retries: None,
                concurrency: None,
            }),
        }
    );
    let mail = m.get("send_email").unwrap();
    assert_eq!(mail.effects, Effects::Write);
    assert_eq!(
        mail.params.iter().map(|p| p.ty).collect::<Vec<_>>(),
        [
            ParamType::String,
            ParamType::Array,
            ParamType::Object,
            ParamType::Bool,
            ParamType::Number
        ]
    );
    assert_eq!(
        mail.backend,
        Some(BackendConfig::Replay {
            cassette: Some("mail.jsonl".into())
        })
    );

    // The backend-only override kept everything else of the built-in.
    let builtin = Manifest::builtin();
    let vs = m.get("vector_search").unwrap();
    let orig = builtin.get("vector_search").unwrap();
    assert_eq!(vs.params, orig.params);
    assert_eq!(vs.description, orig.description);
    assert_eq!(vs.effects, orig.effects);
    assert!(matches!(vs.backend, Some(BackendConfig::Http { .. })));

    // Tools without a backend fall back to the default.
    assert_eq!(m.backend_for("llm_generate"), m.default_backend.as_ref());
    assert_eq!(m.backend_for("vector_search"), vs.backend.as_ref());
    assert_eq!(m.backend_for("nope"), None);
}

#[test]
fn round_trip_through_to_toml() {
    let m = Manifest::from_toml_str(FULL, "tools.toml").unwrap();
    let text = m.to_toml().unwrap();
    assert_eq!(
        Manifest::from_toml_str(&text, "generated.toml").unwrap(),
        m,
        "{text}"
    );
    let b = Manifest::builtin();
    assert_eq!(
        Manifest::from_toml_str(&b.to_toml().unwrap(), "b.toml").unwrap(),
        b
    );
}

#[test]
fn empty_file_is_the_builtins() {
    assert_eq!(
        Manifest::from_toml_str("", "empty.toml").unwrap(),
        Manifest::builtin()
    );
    assert_eq!(
        Manifest::from_toml_str("# nothing\n", "c.toml").unwrap(),
        Manifest::builtin()
    );
}

#[test]
fn override_replaces_given_keys_only() {
    let m = Manifest::from_toml_str(
        "[[tool]]\nname = \"llm_generate\"\neffects = \"read\"\nparams = [{ name = \"prompt\", type = \"string\", required = true }]\n",
        "o.toml",
    )
    .unwrap();
    let t = m.get("llm_generate").unwrap();
    assert_eq!(t.effects, Effects::Read);
    assert_eq!(t.params, vec![param("prompt", ParamType::String, true, "")]);
    assert_eq!(
        t.description,
        Manifest::builtin().get("llm_generate").unwrap().description
    );
    assert_eq!(m.tools.len(), Manifest::builtin().tools.len());
}

#[test]
fn new_tool_defaults() {
    let m = Manifest::from_toml_str("[[tool]]\nname = \"ping\"\n", "n.toml").unwrap();
    assert_eq!(
        m.get("ping").unwrap(),
        &ToolSpec {
            retrieval: false,
            name: "ping".into(),
            description: String::new(),
            params: vec![],
            effects: Effects::Read,
            backend: None
        }
    );
}

#[test]
fn load_reads_a_file_and_names_it_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("tools.toml");
    std::fs::write(&good, FULL).unwrap();
    // NB: a path in the file is relative to it.
    let mut want = Manifest::from_toml_str(FULL, "x").unwrap();
    let mail = dir.path().join("mail.jsonl").display().to_string();
    for t in &mut want.tools {
        if let Some(plan_manifest::BackendConfig::Replay { cassette }) = &mut t.backend {
            *cassette = Some(mail.clone());
        }
    }
    assert_eq!(Manifest::load(&good).unwrap(), want);

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[tool]]\nname = \"\"\n").unwrap();
    let e = Manifest::load(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}:2:8: tool name is empty", bad.display())
    );

    let missing = dir.path().join("missing.toml");
    let e = Manifest::load(&missing).unwrap_err();
    assert_eq!(e.kind(), ManifestErrorKind::Io);
    assert_eq!(e.line(), None);
    assert!(
        e.to_string().starts_with(&format!(
            "{}: cannot read tool manifest: ",
            missing.display()
        )),
        "{e}"
    );
}

/// (case, file text, kind, full Display).
const ERRORS: &[(&str, &str, ManifestErrorKind, &str)] = &[
    (
        "unknown tool key",
        "[[tool]]\nname = \"x\"\nnmae = \"y\"\n",
        ManifestErrorKind::UnknownKey,
        "t.toml:3:1: unknown field `nmae`, expected one of `name`, `description`, `effects`, `params`, `backend`, `retrieval`",
    ),
    (
        "a negative price",
        "[pricing.\"m\"]\ninput_per_mtok = -1\n",
        ManifestErrorKind::Syntax,
        "t.toml:1:1: [pricing.\"m\"]: prices are numbers of 0 or more",
    ),
    (
        "unknown top-level key",
        "tools = []\n",
        ManifestErrorKind::UnknownKey,
        "t.toml:1:1: unknown field `tools`, expected one of `defaults`, `tool`, `planner`, `grounding`, `mcp`, `eval`, `pricing`",
    ),
    (
        "unknown defaults key",
        "[defaults]\nmodel = \"m\"\n",
        ManifestErrorKind::UnknownKey,
        "t.toml:2:1: unknown field `model`, expected `backend`",
    ),
    (
        "unknown param key",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"q\", typo = \"int\" }]\n",
        ManifestErrorKind::UnknownKey,
        "t.toml:3:25: unknown field `typo`, expected one of `name`, `type`, `required`, `description`, `default`, `enum`",
    ),
    (
        "unknown backend key",
        "[[tool]]\nname = \"x\"\n[tool.backend]\nkind = \"http\"\nurl = \"u\"\nfoo = 1\n",
        ManifestErrorKind::UnknownKey,
        "t.toml:3:1: unknown field `foo`, expected one of `url`, `pointer`, `api_key_env`, `timeout_secs`, `max_retries`, `concurrency`",
    ),
    (
        "unknown backend kind",
        "[[tool]]\nname = \"x\"\n[tool.backend]\nkind = \"grpc\"\n",
        ManifestErrorKind::Syntax,
        "t.toml:4:8: unknown variant `grpc`, expected one of `openai`, `http`, `replay`, `sql`, `mcp`",
    ),
    (
        "backend without kind",
        "[[tool]]\nname = \"x\"\n[tool.backend]\nurl = \"u\"\n",
        ManifestErrorKind::MissingKey,
        "t.toml:3:1: missing field `kind`",
    ),
    (
        "tool without name",
        "[[tool]]\ndescription = \"d\"\n",
        ManifestErrorKind::MissingKey,
        "t.toml:1:1: missing field `name`",
    ),
    (
        "grounding min_score out of range",
        "[grounding]\nmin_score = 1.5\n",
        ManifestErrorKind::Syntax,
        "t.toml:2:1: [grounding] min_score = 1.5: a share of the best table's score, from 0 to 1",
    ),
    (
        "bad effects",
        "[[tool]]\nname = \"x\"\neffects = \"destroy\"\n",
        ManifestErrorKind::Syntax,
        "t.toml:3:11: unknown variant `destroy`, expected one of `pure`, `read`, `write`, `human`",
    ),
    (
        "wrong value type",
        "[[tool]]\nname = 3\n",
        ManifestErrorKind::Syntax,
        "t.toml:2:8: invalid type: integer `3`, expected a string",
    ),
    (
        "single [tool] table",
        "[tool]\nname = \"x\"\n",
        ManifestErrorKind::Syntax,
        "t.toml:1:1: invalid type: map, expected a sequence (declare each tool with `[[tool]]`, not `[tool]`)",
    ),
    (
        "not toml",
        "name = \n",
        ManifestErrorKind::Syntax,
        "t.toml:1:8: invalid string; expected `\"`, `'`",
    ),
    (
        "unclosed array",
        "a = [1,\n",
        ManifestErrorKind::Syntax,
        "t.toml:2:1: invalid array; expected `]`",
    ),
    (
        "repeated key",
        "[[tool]]\nname = \"x\"\nname = \"y\"\n",
        ManifestErrorKind::Syntax,
        "t.toml:3:1: duplicate key `name` in table `tool`",
    ),
    (
        "duplicate tool",
        "[[tool]]\nname = \"x\"\n\n[[tool]]\nname = \"x\"\n",
        ManifestErrorKind::DuplicateTool,
        "t.toml:5:8: tool `x` is declared more than once",
    ),
    (
        "duplicate built-in override",
        "[[tool]]\nname = \"llm_generate\"\n[[tool]]\nname = \"llm_generate\"\n",
        ManifestErrorKind::DuplicateTool,
        "t.toml:4:8: tool `llm_generate` is declared more than once",
    ),
    (
        "duplicate param",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"q\" }, { name = \"q\" }]\n",
        ManifestErrorKind::DuplicateParam,
        "t.toml:3:36: tool `x` declares param `q` twice",
    ),
    (
        "invalid param type",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"q\", type = \"integer\" }]\n",
        ManifestErrorKind::InvalidParamType,
        "t.toml:3:32: param `q` of tool `x` has unknown type `integer`; expected one of `any`, `string`, `int`, `number`, `bool`, `array`, `object`",
    ),
    (
        "empty tool name",
        "[[tool]]\nname = \"\"\n",
        ManifestErrorKind::EmptyName,
        "t.toml:2:8: tool name is empty",
    ),
    (
        "blank tool name",
        "[[tool]]\nname = \"  \"\n",
        ManifestErrorKind::EmptyName,
        "t.toml:2:8: tool name is empty",
    ),
    (
        "empty param name",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"\" }]\n",
        ManifestErrorKind::EmptyName,
        "t.toml:3:20: tool `x` has a param with an empty name",
    ),
    (
        "default of the wrong type",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"k\", type = \"int\", default = \"ten\" }]\n",
        ManifestErrorKind::InvalidDefault,
        "t.toml:3:49: the default of param `k` of tool `x` is \"ten\", not of its type `int`",
    ),
    (
        "default on a required param",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"k\", required = true, default = 1 }]\n",
        ManifestErrorKind::InvalidDefault,
        "t.toml:3:52: param `k` of tool `x` is required and has a default; a param with a default is optional: drop `required = true`",
    ),
    (
        "date default",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"d\", default = 2024-10-05 }]\n",
        ManifestErrorKind::InvalidDefault,
        "t.toml:3:35: the default of param `d` of tool `x` is a TOML date, which JSON cannot hold; write it as a string",
    ),
    (
        "a person's tool with a backend",
        "[[tool]]\nname = \"ask_user\"\n[tool.backend]\nkind = \"replay\"\n",
        ManifestErrorKind::HumanTool,
        "t.toml:2:8: tool `ask_user` is answered by a person (effects = \"human\"): it takes no [tool.backend]",
    ),
    (
        "a person's tool without a question",
        "[[tool]]\nname = \"confirm\"\neffects = \"human\"\nparams = [{ name = \"q\", type = \"string\" }]\n",
        ManifestErrorKind::HumanTool,
        "t.toml:2:8: tool `confirm` is answered by a person (effects = \"human\"): it needs a string param `question` (what the person is asked)",
    ),
    (
        "empty enum",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"m\", enum = [] }]\n",
        ManifestErrorKind::InvalidEnum,
        "t.toml:3:32: the enum of param `m` of tool `x` is empty: no call could pass it",
    ),
    (
        "enum value of another type",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"n\", type = \"int\", enum = [1, \"two\"] }]\n",
        ManifestErrorKind::InvalidEnum,
        "t.toml:3:46: the enum of param `n` of tool `x` holds \"two\", not a JSON value of its type `int`",
    ),
    (
        "default outside the enum",
        "[[tool]]\nname = \"x\"\nparams = [{ name = \"m\", default = \"c\", enum = [\"a\", \"b\"] }]\n",
        ManifestErrorKind::InvalidEnum,
        "t.toml:3:47: the default of param `m` of tool `x`, \"c\", is not in its enum",
    ),
    (
        "mcp server with neither command nor url",
        "[[mcp]]\nname = \"gh\"\n",
        ManifestErrorKind::Mcp,
        "t.toml:1:1: [[mcp]] `gh` needs exactly one of `command` (a program over stdio) and `url` (streamable HTTP)",
    ),
    (
        "mcp server with both",
        "[[mcp]]\nname = \"gh\"\ncommand = [\"gh-mcp\"]\nurl = \"http://127.0.0.1:1/mcp\"\n",
        ManifestErrorKind::Mcp,
        "t.toml:1:1: [[mcp]] `gh` needs exactly one of `command` (a program over stdio) and `url` (streamable HTTP)",
    ),
    (
        "mcp server with an empty command",
        "[[mcp]]\nname = \"gh\"\ncommand = []\n",
        ManifestErrorKind::Mcp,
        "t.toml:1:1: [[mcp]] `gh`: `command` is empty; give the program and its arguments",
    ),
    (
        "mcp url of another scheme",
        "[[mcp]]\nname = \"gh\"\nurl = \"ftp://host/mcp\"\n",
        ManifestErrorKind::Mcp,
        "t.toml:1:1: [[mcp]] `gh`: url `ftp://host/mcp` is not http:// or https://",
    ),
    (
        "mcp server declared twice",
        "[[mcp]]\nname = \"gh\"\ncommand = [\"a\"]\n[[mcp]]\nname = \"gh\"\ncommand = [\"b\"]\n",
        ManifestErrorKind::Mcp,
        "t.toml:4:1: [[mcp]] `gh` is declared more than once",
    ),
    (
        "mcp timeout not positive",
        "[[mcp]]\nname = \"gh\"\ncommand = [\"a\"]\ntimeout_secs = 0\n",
        ManifestErrorKind::Mcp,
        "t.toml:1:1: [[mcp]] `gh`: timeout_secs 0 is not a positive number",
    ),
    (
        "a tool of an undeclared mcp server",
        "[[tool]]\nname = \"x\"\n[tool.backend]\nkind = \"mcp\"\nserver = \"gh\"\n",
        ManifestErrorKind::Mcp,
        "t.toml:2:8: tool `x` is served by MCP server `gh`, which no [[mcp]] table declares",
    ),
];

#[test]
fn param_defaults_are_checked_and_round_trip() {
    let m = Manifest::from_toml_str(
        "[[tool]]\nname = \"s\"\nparams = [{ name = \"q\", type = \"string\", required = true }, { name = \"n\", type = \"int\", default = 3 }, { name = \"opts\", type = \"object\", default = { lang = \"en\", tags = [\"a\"] } }]\n",
        "d.toml",
    )
    .unwrap();
    let t = m.get("s").unwrap();
    assert_eq!(t.param("q").unwrap().default, None);
    assert_eq!(t.param("n").unwrap().default, Some(serde_json::json!(3)));
    assert_eq!(
        t.param("opts").unwrap().default,
        Some(serde_json::json!({"lang": "en", "tags": ["a"]}))
    );
    let text = m.to_toml().unwrap();
    assert_eq!(
        Manifest::from_toml_str(&text, "again.toml").unwrap(),
        m,
        "{text}"
    );
    // The reference's retrieval tools take `top_k=10` when a plan leaves it out.
    let b = Manifest::builtin();
    for tool in ["vector_search", "retrieve_embedded_chunks"] {
        let k = b.get(tool).unwrap().param("top_k").unwrap();
        assert!(!k.required, "{tool}");
        assert_eq!(k.default, Some(serde_json::json!(10)), "{tool}");
    }
}

#[test]
fn each_error_kind_has_a_clear_message() {
    let mut failures = Vec::new();
    for (case, text, kind, want) in ERRORS {
        match Manifest::from_toml_str(text, "t.toml") {
            Ok(_) => failures.push(format!("{case}: accepted")),
            Err(e) => {
                if e.kind() != *kind || e.to_string() != *want {
                    failures.push(format!(
                        "{case}:\n   got {:?} {:?}\n  want {kind:?} {want:?}",
                        e.kind(),
                        e.to_string()
                    ));
                }
                assert_eq!(e.file(), "t.toml");
                assert!(
                    e.line().is_some() && e.column().is_some(),
                    "{case}: no position"
                );
                assert!(want.ends_with(e.message()), "{case}");
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn param_type_names_round_trip() {
    for t in ParamType::ALL {
        assert_eq!(ParamType::parse(t.as_str()), Some(t));
    }
    assert_eq!(ParamType::parse("integer"), None);
}

#[test]
fn the_planner_table_is_read_strictly_and_written_back() {
    let text = r#"
[planner]
examples = "planner"
max_examples = 3
temperature = 0.2
[planner.backend]
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
model = "m"
"#;
    let m = Manifest::from_toml_str(text, "t.toml").unwrap();
    let p = m.planner.clone().unwrap();
    assert_eq!(p.examples.as_deref(), Some("planner"));
    assert_eq!((p.max_examples, p.temperature), (Some(3), Some(0.2)));
    assert!(matches!(p.backend, Some(BackendConfig::Openai { .. })));
    let back = Manifest::from_toml_str(&m.to_toml().unwrap(), "back.toml").unwrap();
    assert_eq!(back, m);
    let err = Manifest::from_toml_str("[planner]\nexampels = \"x\"\n", "t.toml").unwrap_err();
    assert!(
        err.to_string().contains("unknown field `exampels`"),
        "{err}"
    );
}

#[test]
fn plans_may_be_kept_from_asking_the_user() {
    let m = Manifest::from_toml_str("[planner]\nask_user = false\n", "t.toml").unwrap();
    assert!(m.get("ask_user").is_none());
    assert!(Manifest::builtin().get("ask_user").is_some());
}
