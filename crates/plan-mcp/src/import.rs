//! Importing the `[[mcp]]` servers' tools into a manifest: each server's listing (from the
//! cache, else listed by starting the server), filtered by `include` and `exclude`,
//! named with `prefix`, mapped by `schema`. A `[[tool]]` of the file with the same name
//! replaces the imported tool; two servers importing one name is an error (set a
//! `prefix`).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use plan_llm::{CallError, CallErrorKind, EnvLookup, Redactor};
use plan_manifest::{BackendConfig, Manifest};
use rmcp::model::Tool;

use crate::cache;
use crate::client::Servers;
use crate::schema::tool_spec;

/// Where listings come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    /// The cache, else the server (and the cache is written).
    Cached,
    /// The server, whatever the cache holds (`planvm tools refresh`).
    Fresh,
}

/// Adds the tools of every `[[mcp]]` server of `manifest`, listed through `servers`
/// when `cache` (a directory) has no listing or `listing` is `Fresh`. Every server's
/// problems are reported together.
pub async fn import(
    manifest: &mut Manifest,
    servers: &Servers,
    cache: Option<&Path>,
    listing: Listing,
) -> Result<(), CallError> {
    let mut problems = Vec::new();
    // NB: every server listed at once: a slow one costs its own time, not the others'.
    let listed = manifest.mcp.iter().map(|server| async move {
        let cached = match (listing, cache) {
            (Listing::Cached, Some(dir)) => cache::read(dir, server),
            _ => None,
        };
        if let Some(tools) = cached {
            return Ok((server.name.clone(), tools));
        }
        let tools = servers.list(&server.name).await.map_err(|e| e.message)?;
        if let Some(dir) = cache
            && let Err(e) = cache::write(dir, server, &tools)
        {
            // NB: only the next start pays for it.
            eprintln!(
                "warning: cannot keep the tool listing of MCP server `{}` in {}: {e}",
                server.name,
                dir.display()
            );
        }
        Ok((server.name.clone(), tools))
    });
    let mut listings = Vec::new();
    for listed in futures::future::join_all(listed).await {
        match listed {
            Ok(l) => listings.push(l),
            Err(e) => problems.push(e),
        }
    }
    let explicit: HashSet<String> = manifest.tools.iter().map(|t| t.name.clone()).collect();
    for (server, tools) in &listings {
        if let Err(e) = merge(manifest, server, tools, &explicit) {
            problems.extend(e);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CallError::new(CallErrorKind::Config, problems.join("\n")))
    }
}

/// Adds the tools `server` listed to `manifest`, where the tools named `explicit` (the
/// file's and the built-ins) stay as they are.
///
/// Linear in the tools of the listing and of the manifest: every lookup is hashed, since
/// a server may list tens of thousands of tools.
pub fn merge(
    manifest: &mut Manifest,
    server: &str,
    tools: &[Tool],
    explicit: &HashSet<String>,
) -> Result<(), Vec<String>> {
    let Some(cfg) = manifest.mcp_server(server).cloned() else {
        return Err(vec![format!("no [[mcp]] table named `{server}`")]);
    };
    let listed: HashSet<&str> = tools.iter().map(|t| &*t.name).collect();
    let mut problems = unlisted(manifest, (server, &cfg), &listed);
    let include: Option<HashSet<&str>> = cfg
        .include
        .as_ref()
        .map(|i| i.iter().map(String::as_str).collect());
    let exclude: HashSet<&str> = cfg.exclude.iter().map(String::as_str).collect();
    // NB: who serves each name already known (`None`: not an MCP server), for the
    // message of a clash.
    let known: HashMap<&str, Option<&str>> = manifest
        .tools
        .iter()
        .map(|t| {
            let by = match &t.backend {
                Some(BackendConfig::Mcp { server, .. }) => Some(server.as_str()),
                _ => None,
            };
            (t.name.as_str(), by)
        })
        .collect();
    let mut ours = HashSet::new();
    let mut added = Vec::new();
    for t in tools {
        let name = &*t.name;
        if include.as_ref().is_some_and(|i| !i.contains(name)) || exclude.contains(name) {
            continue;
        }
        if let Some(why) = bad_name(name) {
            // NB: a name a plan cannot call (or the compiled program cannot hold) would
            // fail every plan that uses it with an internal error; the table can
            // `exclude` it.
            problems.push(format!(
                "MCP server `{server}` lists a tool named {name:?}, which {why}: `exclude` it, or fix the server"
            ));
            continue;
        }
        let spec = tool_spec(&cfg, t);
        let clash = match known.get(spec.name.as_str()) {
            Some(by) => Some(*by),
            None if ours.contains(&spec.name) => Some(Some(server)),
            None => None,
        };
        match clash {
            None => {}
            // A `[[tool]]` of the file (or a built-in) of the same name stays.
            Some(_) if explicit.contains(&spec.name) => continue,
            // NB: imported by an earlier table (or listed twice): a plan could not say
            // which it means.
            Some(other) => {
                problems.push(format!(
                    "tool `{}` is imported from both MCP servers `{}` and `{server}`: give one of them a `prefix`",
                    spec.name,
                    other.unwrap_or("?")
                ));
                continue;
            }
        }
        ours.insert(spec.name.clone());
        added.push(spec);
    }
    manifest.tools.extend(added);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// What names a tool of server `server` (`cfg`) that it does not list: its table's
/// `include`, and the manifest's tools served by it; each problem says what it lists.
fn unlisted(
    manifest: &Manifest,
    (server, cfg): (&str, &plan_manifest::McpServer),
    listed: &HashSet<&str>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut all_names = None;
    let mut names = || -> String {
        all_names
            .get_or_insert_with(|| {
                let mut n: Vec<&str> = listed.iter().copied().collect();
                n.sort_unstable();
                let more = n.len().saturating_sub(LISTED_NAMES);
                let mut text = n[..n.len().min(LISTED_NAMES)].join(", ");
                if more > 0 {
                    text.push_str(&format!(" and {more} more"));
                }
                text
            })
            .clone()
    };
    for wanted in cfg.include.iter().flatten() {
        if !listed.contains(wanted.as_str()) {
            problems.push(format!(
                "[[mcp]] `{server}` includes `{wanted}`, which the server does not list; it has: {}",
                names()
            ));
        }
    }
    for t in &manifest.tools {
        if let Some(BackendConfig::Mcp { server: s, tool }) = &t.backend
            && *s == server
        {
            let remote = tool.as_deref().unwrap_or(&t.name);
            if !listed.contains(remote) {
                problems.push(format!(
                    "tool `{}` calls `{remote}` of MCP server `{server}`, which does not list it; it has: {}",
                    t.name,
                    names()
                ));
            }
        }
    }
    problems
}

/// Tool names of a server shown at most in a message that lists them.
const LISTED_NAMES: usize = 50;
/// The longest tool name imported: far beyond any real one, far below what a plan or
/// the planner's prompt should carry.
const MAX_NAME_BYTES: usize = 1024;

/// Why a tool of a server cannot be imported under `name` (its name on the server), if
/// it cannot: plans name tools by short strings that are neither empty nor hold control
/// characters, and a compiled program refuses an empty tool name.
fn bad_name(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("is empty")
    } else if name.chars().any(char::is_control) {
        Some("holds a control character")
    } else if name.len() > MAX_NAME_BYTES {
        Some("is too long")
    } else {
        None
    }
}

/// The tools file at `path` with its MCP servers' tools imported (listed where `listing`
/// says), as every command and the Python package load one: the error says which part
/// failed.
pub fn load(path: &Path, env: EnvLookup, listing: Listing) -> Result<Manifest, String> {
    let mut manifest = Manifest::load(path).map_err(|e| e.to_string())?;
    import_blocking(&mut manifest, env, listing)
        .map_err(|e| format!("cannot import the MCP servers' tools: {e}"))?;
    Ok(manifest)
}

/// [`import`] for callers without a runtime (the CLIs and the Python package at load):
/// on a thread of its own, with servers started only for listings the cache lacks, and
/// shut down before it returns.
pub fn import_blocking(
    manifest: &mut Manifest,
    env: EnvLookup,
    listing: Listing,
) -> Result<(), CallError> {
    if manifest.mcp.is_empty() {
        return Ok(());
    }
    let cache = plan_manifest::cache_dir("mcp");
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| CallError::new(CallErrorKind::Config, e.to_string()))?;
            rt.block_on(async {
                let servers =
                    Servers::new(&manifest.mcp, env, std::sync::Arc::new(Redactor::new()));
                let out = import(manifest, &servers, cache.as_deref(), listing).await;
                servers.shutdown().await;
                out
            })
        })
        .join()
        .unwrap_or_else(|_| {
            Err(CallError::new(
                CallErrorKind::Config,
                "listing the MCP servers' tools panicked",
            ))
        })
    })
}
