//! The TOML manifest file: its schema (private `Raw*` types, strict: unknown keys are
//! errors) and how it merges onto the built-in tools. The format is documented in the
//! crate docs and `docs/tools.md`.
//!
//! Why separate `Raw*` types instead of deserializing `ToolSpec` directly: the file needs
//! to tell "key absent" from "key empty" (an override that gives no `params` keeps the
//! built-in ones) and needs spans for error positions; `ToolSpec` is the resolved form
//! the compiler and VM use.

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::error::{ManifestError, ManifestErrorKind, line_col};
use crate::{
    BackendConfig, Effects, EvalConfig, GroundingConfig, Manifest, McpServer, ParamSpec, ParamType,
    PlannerConfig, ToolSpec,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    defaults: Option<RawDefaults>,
    #[serde(default)]
    tool: Vec<RawTool>,
    #[serde(default)]
    planner: Option<PlannerConfig>,
    #[serde(default)]
    grounding: Option<GroundingConfig>,
    #[serde(default)]
    mcp: Vec<Spanned<McpServer>>,
    #[serde(default)]
    eval: Option<EvalConfig>,
    #[serde(default)]
    pricing: std::collections::BTreeMap<String, Spanned<crate::Price>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    #[serde(default)]
    backend: Option<BackendConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    name: Spanned<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    effects: Option<Effects>,
    #[serde(default)]
    params: Option<Vec<RawParam>>,
    #[serde(default)]
    backend: Option<BackendConfig>,
    #[serde(default)]
    retrieval: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    name: Spanned<String>,
    #[serde(default, rename = "type")]
    ty: Option<Spanned<String>>,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    description: String,
    #[serde(default)]
    default: Option<Spanned<toml::Value>>,
    #[serde(default, rename = "enum")]
    choices: Option<Spanned<Vec<toml::Value>>>,
}

/// The accepted `type` spellings, in the order error messages list them.
fn accepted_types() -> String {
    ParamType::ALL
        .iter()
        .map(|t| format!("`{}`", t.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

struct Ctx<'a> {
    text: &'a str,
    source: &'a str,
}

impl Ctx<'_> {
    #[cold]
    fn err(
        &self,
        kind: ManifestErrorKind,
        span: std::ops::Range<usize>,
        msg: impl Into<String>,
    ) -> ManifestError {
        ManifestError::new(
            kind,
            self.source,
            Some(line_col(self.text, span.start)),
            msg,
        )
    }

    #[cold]
    fn toml_err(&self, e: &toml::de::Error) -> ManifestError {
        // toml's messages may span lines ("invalid string\nexpected ..."): keep one line,
        // since the caller prefixes `file:line:col:`.
        let mut message = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        // The commonest slip: `[tool]` (one table) for `[[tool]]` (an array of tables).
        let at = e
            .span()
            .and_then(|s| self.text.get(s.start..))
            .unwrap_or("");
        if message == "invalid type: map, expected a sequence" && at.starts_with("[tool]") {
            message.push_str(" (declare each tool with `[[tool]]`, not `[tool]`)");
        }
        let kind = if message.starts_with("unknown field") {
            ManifestErrorKind::UnknownKey
        } else if message.starts_with("missing field") {
            ManifestErrorKind::MissingKey
        } else {
            ManifestErrorKind::Syntax
        };
        let position = e.span().map(|s| line_col(self.text, s.start));
        ManifestError::new(kind, self.source, position, message)
    }

    fn params(&self, tool: &str, raw: Vec<RawParam>) -> Result<Vec<ParamSpec>, ManifestError> {
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(raw.len());
        for p in raw {
            let span = p.name.span();
            let name = p.name.into_inner();
            if name.is_empty() {
                return Err(self.err(
                    ManifestErrorKind::EmptyName,
                    span,
                    format!("tool `{tool}` has a param with an empty name"),
                ));
            }
            if !seen.insert(name.clone()) {
                return Err(self.err(
                    ManifestErrorKind::DuplicateParam,
                    span,
                    format!("tool `{tool}` declares param `{name}` twice"),
                ));
            }
            let ty = match p.ty {
                None => ParamType::Any,
                Some(t) => match ParamType::parse(t.get_ref()) {
                    Some(ty) => ty,
                    None => {
                        return Err(self.err(
                            ManifestErrorKind::InvalidParamType,
                            t.span(),
                            format!(
                                "param `{name}` of tool `{tool}` has unknown type `{}`; expected one of {}",
                                t.get_ref(),
                                accepted_types()
                            ),
                        ));
                    }
                },
            };
            let default = match p.default {
                None => None,
                Some(d) => Some(self.default(tool, &name, ty, p.required, d)?),
            };
            let choices = match p.choices {
                None => None,
                Some(c) => Some(self.choices(tool, &name, ty, default.as_ref(), c)?),
            };
            out.push(ParamSpec {
                name,
                ty,
                required: p.required,
                description: p.description,
                default,
                choices,
            });
        }
        Ok(out)
    }
}

impl Ctx<'_> {
    /// A param's `default`, checked: JSON-representable (TOML dates are not), of the
    /// param's type, and not on a required param (a default makes the param optional).
    fn default(
        &self,
        tool: &str,
        name: &str,
        ty: ParamType,
        required: bool,
        raw: Spanned<toml::Value>,
    ) -> Result<serde_json::Value, ManifestError> {
        let span = raw.span();
        let bad = |msg: String| self.err(ManifestErrorKind::InvalidDefault, span.clone(), msg);
        if required {
            return Err(bad(format!(
                "param `{name}` of tool `{tool}` is required and has a default; a param with a default is optional: drop `required = true`"
            )));
        }
        let raw = raw.into_inner();
        if contains_datetime(&raw) {
            return Err(bad(format!(
                "the default of param `{name}` of tool `{tool}` is a TOML date, which JSON cannot hold; write it as a string"
            )));
        }
        let value = serde_json::to_value(&raw).map_err(|e| {
            bad(format!(
                "the default of param `{name}` of tool `{tool}` is not a JSON value: {e}"
            ))
        })?;
        if !ty.accepts(&value) {
            return Err(bad(format!(
                "the default of param `{name}` of tool `{tool}` is {value}, not of its type `{}`",
                ty.as_str()
            )));
        }
        Ok(value)
    }
}

impl Ctx<'_> {
    /// A param's `enum`: not empty, every value JSON and of the param's type, the default
    /// among them.
    fn choices(
        &self,
        tool: &str,
        name: &str,
        ty: ParamType,
        default: Option<&serde_json::Value>,
        raw: Spanned<Vec<toml::Value>>,
    ) -> Result<Vec<serde_json::Value>, ManifestError> {
        let span = raw.span();
        let bad = |msg: String| self.err(ManifestErrorKind::InvalidEnum, span.clone(), msg);
        let raw = raw.into_inner();
        if raw.is_empty() {
            return Err(bad(format!(
                "the enum of param `{name}` of tool `{tool}` is empty: no call could pass it"
            )));
        }
        let mut out = Vec::with_capacity(raw.len());
        for v in raw {
            let value = (!contains_datetime(&v))
                .then(|| serde_json::to_value(&v).ok())
                .flatten()
                .filter(|v| ty.accepts(v))
                .ok_or_else(|| {
                    bad(format!(
                        "the enum of param `{name}` of tool `{tool}` holds {v}, not a JSON value of its type `{}`",
                        ty.as_str()
                    ))
                })?;
            out.push(value);
        }
        if let Some(d) = default.filter(|d| !out.contains(d)) {
            return Err(bad(format!(
                "the default of param `{name}` of tool `{tool}`, {d}, is not in its enum"
            )));
        }
        Ok(out)
    }

    /// The `[[mcp]]` tables, checked: names non-empty and unique, exactly one of
    /// `command` (not empty) and `url`, a positive timeout.
    fn mcp(&self, raw: Vec<Spanned<McpServer>>) -> Result<Vec<McpServer>, ManifestError> {
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(raw.len());
        for m in raw {
            let span = m.span();
            let m = m.into_inner();
            let bad = |msg: String| self.err(ManifestErrorKind::Mcp, span.clone(), msg);
            if m.name.trim().is_empty() {
                return Err(bad("an [[mcp]] table has an empty name".into()));
            }
            if !seen.insert(m.name.clone()) {
                return Err(bad(format!(
                    "[[mcp]] `{}` is declared more than once",
                    m.name
                )));
            }
            match (&m.command, &m.url) {
                (Some(c), None) if c.first().is_some_and(|p| !p.is_empty()) => {}
                (Some(_), None) => {
                    return Err(bad(format!(
                        "[[mcp]] `{}`: `command` is empty; give the program and its arguments",
                        m.name
                    )));
                }
                (None, Some(u)) if u.starts_with("http://") || u.starts_with("https://") => {}
                (None, Some(u)) => {
                    return Err(bad(format!(
                        "[[mcp]] `{}`: url `{u}` is not http:// or https://",
                        m.name
                    )));
                }
                _ => {
                    return Err(bad(format!(
                        "[[mcp]] `{}` needs exactly one of `command` (a program over stdio) and `url` (streamable HTTP)",
                        m.name
                    )));
                }
            }
            if let Some(t) = m.timeout_secs.filter(|t| !(t.is_finite() && *t > 0.0)) {
                return Err(bad(format!(
                    "[[mcp]] `{}`: timeout_secs {t} is not a positive number",
                    m.name
                )));
            }
            out.push(m);
        }
        Ok(out)
    }
}

fn contains_datetime(v: &toml::Value) -> bool {
    match v {
        toml::Value::Datetime(_) => true,
        toml::Value::Array(a) => a.iter().any(contains_datetime),
        toml::Value::Table(t) => t.values().any(contains_datetime),
        _ => false,
    }
}

impl Ctx<'_> {
    /// `[pricing."MODEL"]`: each price a number of 0 or more.
    fn pricing(
        &self,
        raw: std::collections::BTreeMap<String, Spanned<crate::Price>>,
    ) -> Result<std::collections::BTreeMap<String, crate::Price>, ManifestError> {
        let mut pricing = std::collections::BTreeMap::new();
        for (model, price) in raw {
            let span = price.span();
            let price = price.into_inner();
            if ![price.input_per_mtok, price.output_per_mtok]
                .iter()
                .all(|p| p.is_finite() && *p >= 0.0)
            {
                return Err(self.err(
                    ManifestErrorKind::Syntax,
                    span,
                    format!("[pricing.\"{model}\"]: prices are numbers of 0 or more"),
                ));
            }
            pricing.insert(model, price);
        }
        Ok(pricing)
    }

    /// Refuses `tool` (declared at `span`) when it names an MCP server none declares, or
    /// is answered by a person but has a backend or no `question`.
    fn check_tool(
        &self,
        manifest: &Manifest,
        tool: &ToolSpec,
        span: std::ops::Range<usize>,
    ) -> Result<(), ManifestError> {
        if let Some(BackendConfig::Mcp { server, .. }) = &tool.backend
            && manifest.mcp_server(server).is_none()
        {
            return Err(self.err(
                ManifestErrorKind::Mcp,
                span,
                format!(
                    "tool `{}` is served by MCP server `{server}`, which no [[mcp]] table declares",
                    tool.name
                ),
            ));
        }
        if tool.effects != Effects::Human {
            return Ok(());
        }
        // NB: a person answers it: the host never sends it anywhere, and what it shows
        // them is its `question`.
        let why = if tool.backend.is_some() {
            "takes no [tool.backend]"
        } else if tool
            .param("question")
            .is_none_or(|p| p.ty != ParamType::String)
        {
            "needs a string param `question` (what the person is asked)"
        } else {
            return Ok(());
        };
        Err(self.err(
            ManifestErrorKind::HumanTool,
            span,
            format!(
                "tool `{}` is answered by a person (effects = \"human\"): it {why}",
                tool.name
            ),
        ))
    }
}

impl Manifest {
    /// The built-in tools with the tools of a TOML manifest added or overridden by name.
    /// `source_name` (usually the file path) prefixes every error message.
    pub fn from_toml_str(text: &str, source_name: &str) -> Result<Manifest, ManifestError> {
        let cx = Ctx {
            text,
            source: source_name,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| cx.toml_err(&e))?;
        let mut manifest = Manifest::builtin();
        manifest.default_backend = raw.defaults.and_then(|d| d.backend);
        manifest.planner = raw.planner;
        if manifest.planner.as_ref().and_then(|p| p.ask_user) == Some(false) {
            manifest.tools.retain(|t| t.name != crate::ASK_USER);
        }
        if let Some(min) = raw.grounding.as_ref().and_then(|g| g.min_score)
            && !(0.0..=1.0).contains(&min)
        {
            // NB: the value's place, found in the text: `[grounding]` is read unspanned.
            let at = text.find("min_score").unwrap_or(0);
            return Err(cx.err(
                ManifestErrorKind::Syntax,
                at..at,
                format!(
                    "[grounding] min_score = {min}: a share of the best table's score, from 0 to 1"
                ),
            ));
        }
        manifest.grounding = raw.grounding;
        manifest.eval = raw.eval;
        manifest.mcp = cx.mcp(raw.mcp)?;
        manifest.pricing = cx.pricing(raw.pricing)?;
        let mut declared = HashSet::new();
        for mut t in raw.tool {
            let span = t.name.span();
            let name = t.name.get_ref().clone();
            if name.trim().is_empty() {
                return Err(cx.err(ManifestErrorKind::EmptyName, span, "tool name is empty"));
            }
            if !declared.insert(name.clone()) {
                return Err(cx.err(
                    ManifestErrorKind::DuplicateTool,
                    span,
                    format!("tool `{name}` is declared more than once"),
                ));
            }
            let params = t.params.take().map(|p| cx.params(&name, p)).transpose()?;
            let i = manifest.merge_tool(t, params);
            cx.check_tool(&manifest, &manifest.tools[i], span)?;
        }
        Ok(manifest)
    }

    /// Adds tool `t` (`params` checked), or overrides the tool of its name: what the
    /// entry leaves out keeps the built-in value. Its index.
    fn merge_tool(&mut self, t: RawTool, params: Option<Vec<ParamSpec>>) -> usize {
        let name = t.name.into_inner();
        if let Some(i) = self.tools.iter().position(|existing| existing.name == name) {
            let existing = &mut self.tools[i];
            if let Some(d) = t.description {
                existing.description = d;
            }
            if let Some(e) = t.effects {
                existing.effects = e;
            }
            if let Some(p) = params {
                existing.params = p;
            }
            if t.backend.is_some() {
                existing.backend = t.backend;
            }
            if let Some(r) = t.retrieval {
                existing.retrieval = r;
            }
            return i;
        }
        // NB: a database tool takes its query, and writes when it may.
        let (params, effects) = match &t.backend {
            Some(BackendConfig::Sql { read_only, url, .. }) => (
                params.unwrap_or_else(|| vec![sql_param(url)]),
                t.effects.unwrap_or(if read_only.unwrap_or(true) {
                    Effects::Read
                } else {
                    Effects::Write
                }),
            ),
            // NB: what an MCP tool does is the server's business: a write unless the file
            // says otherwise.
            Some(BackendConfig::Mcp { .. }) => (
                params.unwrap_or_default(),
                t.effects.unwrap_or(Effects::Write),
            ),
            _ => (params.unwrap_or_default(), t.effects.unwrap_or_default()),
        };
        self.tools.push(ToolSpec {
            name,
            description: t.description.unwrap_or_default(),
            params,
            effects,
            backend: t.backend,
            retrieval: t.retrieval.unwrap_or(false),
        });
        self.tools.len() - 1
    }

    /// Reads a TOML manifest file; see [`Manifest::from_toml_str`]. Paths in it (a `sql`
    /// backend's `sqlite:` path, a `replay` backend's cassette, the judge's prompt, the
    /// grounding's embedding model) are relative to the file.
    pub fn load(path: impl AsRef<Path>) -> Result<Manifest, ManifestError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ManifestError::new(
                ManifestErrorKind::Io,
                &name,
                None,
                format!("cannot read tool manifest: {e}"),
            )
        })?;
        let mut manifest = Manifest::from_toml_str(&text, &name)?;
        if let Some(dir) = path.parent() {
            if let Some(prompt) = manifest
                .eval
                .as_mut()
                .and_then(|e| e.judge.as_mut())
                .and_then(|j| j.prompt.as_mut())
                .filter(|p| Path::new(p.as_str()).is_relative())
            {
                *prompt = dir.join(&*prompt).display().to_string();
            }
            if let Some(model) = (manifest.grounding.as_mut())
                .and_then(|g| g.embeddings.as_mut())
                .filter(|m| Path::new(m.as_str()).is_relative())
            {
                *model = dir.join(&*model).display().to_string();
            }
            let planner = manifest.planner.as_mut().and_then(|p| p.backend.as_mut());
            let backends = manifest
                .tools
                .iter_mut()
                .filter_map(|t| t.backend.as_mut())
                .chain(manifest.default_backend.as_mut())
                .chain(planner);
            for backend in backends {
                match backend {
                    BackendConfig::Sql { url, .. } => {
                        if let Some(file) = url.strip_prefix("sqlite:")
                            && Path::new(file).is_relative()
                        {
                            *url = format!("sqlite:{}", dir.join(file).display());
                        }
                    }
                    BackendConfig::Replay {
                        cassette: Some(file),
                    } if Path::new(file.as_str()).is_relative() => {
                        *file = dir.join(&*file).display().to_string();
                    }
                    _ => {}
                }
            }
            // NB: absolute: the program starts in its `cwd`, where a relative path to it
            // would no longer hold, and the listing cache is keyed by them.
            let beside = |p: &str| {
                let p = dir.join(p);
                std::path::absolute(&p).unwrap_or(p).display().to_string()
            };
            for m in &mut manifest.mcp {
                if let Some(cwd) = m
                    .cwd
                    .as_mut()
                    .filter(|c| Path::new(c.as_str()).is_relative())
                {
                    *cwd = beside(cwd);
                }
                // NB: a program named by a path (`./server.py`) is beside the file; a bare
                // name (`npx`) is looked up on PATH.
                if let Some(prog) = m.command.as_mut().and_then(|c| c.first_mut())
                    && prog.contains('/')
                    && Path::new(prog.as_str()).is_relative()
                {
                    *prog = beside(prog);
                }
            }
        }
        Ok(manifest)
    }

    /// The manifest as a TOML file that [`Manifest::from_toml_str`] reads back to an equal
    /// manifest (every tool written out in full, built-ins included).
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        #[derive(Serialize)]
        struct Defaults<'a> {
            backend: &'a BackendConfig,
        }
        #[derive(Serialize)]
        struct File<'a> {
            #[serde(skip_serializing_if = "<[McpServer]>::is_empty")]
            mcp: &'a [McpServer],
            #[serde(skip_serializing_if = "Option::is_none")]
            defaults: Option<Defaults<'a>>,
            tool: &'a [ToolSpec],
            #[serde(skip_serializing_if = "Option::is_none")]
            planner: Option<&'a PlannerConfig>,
            #[serde(skip_serializing_if = "Option::is_none")]
            grounding: Option<&'a GroundingConfig>,
            #[serde(skip_serializing_if = "Option::is_none")]
            eval: Option<&'a EvalConfig>,
            #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
            pricing: &'a std::collections::BTreeMap<String, crate::Price>,
        }
        toml::to_string(&File {
            mcp: &self.mcp,
            defaults: self
                .default_backend
                .as_ref()
                .map(|backend| Defaults { backend }),
            tool: &self.tools,
            planner: self.planner.as_ref(),
            grounding: self.grounding.as_ref(),
            eval: self.eval.as_ref(),
            pricing: &self.pricing,
        })
    }
}

/// The one param of a database tool (at `url`): its query.
fn sql_param(url: &str) -> ParamSpec {
    let dialect = if url.starts_with("sqlite:") {
        "SQLite's"
    } else {
        "PostgreSQL's"
    };
    ParamSpec {
        name: "sql".into(),
        ty: ParamType::String,
        required: true,
        description: format!(
            "One SQL query ({dialect} dialect): SELECT only, unless the tool may write."
        ),
        default: None,
        choices: None,
    }
}
