//! Tool listings kept between processes, so that `planc check` and every `planvm` command
//! know a server's tools without starting it: one JSON file per server, named by its
//! table's name and a hash of what starts or reaches it (`command`, `env`, `cwd`, `url`),
//! under `plan_manifest::cache_dir("mcp")`. A listing is made again by
//! `planvm tools refresh`, or when the table changes.

use std::path::{Path, PathBuf};

use plan_manifest::McpServer;
use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Serialize, Deserialize)]
struct Listing {
    server: String,
    tools: Vec<Tool>,
}

/// The file holding `server`'s listing in `dir`.
pub(crate) fn path(dir: &Path, server: &McpServer) -> PathBuf {
    let key = serde_json::json!([server.command, server.env, server.cwd, server.url]);
    let hash = Sha256::digest(key.to_string().as_bytes());
    let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name: String = server
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    dir.join(format!("{name}-{hex}.json"))
}

/// The listing kept for `server`, if any (one that cannot be read is as none).
pub(crate) fn read(dir: &Path, server: &McpServer) -> Option<Vec<Tool>> {
    let bytes = std::fs::read(path(dir, server)).ok()?;
    serde_json::from_slice::<Listing>(&bytes)
        .ok()
        .map(|l| l.tools)
}

/// Keeps `tools` as `server`'s listing (written whole, then renamed into place).
pub(crate) fn write(dir: &Path, server: &McpServer, tools: &[Tool]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = path(dir, server);
    let listing = serde_json::json!({"server": server.name, "tools": tools});
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&listing)?)?;
    std::fs::rename(&tmp, &path)
}
