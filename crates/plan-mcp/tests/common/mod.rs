//! What the tests share: `fake_server.py`'s `[[mcp]]` table, and a manifest of it; the
//! real servers scripts/mcp-deps installs, or why a test is skipped without them; a child
//! process killed at the end of its test.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use plan_manifest::Manifest;

/// An `[[mcp]]` table named `name` running `fake_server.py` with `args`, then `extra`
/// lines of the table.
pub fn fake(name: &str, args: &[&str], extra: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_server.py");
    let mut command = vec!["python3".to_owned(), script.display().to_string()];
    command.extend(args.iter().map(|a| (*a).to_owned()));
    format!(
        "[[mcp]]\nname = \"{name}\"\ncommand = {}\n{extra}",
        serde_json::to_string(&command).unwrap()
    )
}

/// The manifest of a tools file holding `text`.
pub fn manifest(text: &str) -> Manifest {
    Manifest::from_toml_str(text, "tools.toml").unwrap()
}

/// A child process killed when the test ends, passed or not.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where scripts/mcp-deps installs the real servers: beside planvm's MCP tests, which
/// run against them too (`planvm tools list`, the Python SDK's client of `planvm mcp`).
pub fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../planvm/tests/mcp")
}

/// The real servers: the reference server `@modelcontextprotocol/server-everything`
/// (Node), and a Python with the MCP SDK to run `server.py`, written with it.
pub struct Real {
    pub everything: PathBuf,
    pub python: PathBuf,
}

/// The real servers, or `None` (the test skipped, saying so) when scripts/mcp-deps has
/// not installed them; with PLANRT_REQUIRE_MCP set (scripts/test sets it), their absence
/// fails the test instead. The same rule, paths and variables as planvm's MCP tests.
pub fn real(test: &str) -> Option<Real> {
    let everything =
        mcp_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let python = std::env::var_os("PLANRT_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-venv/bin/python")
        });
    if everything.exists() && python.exists() {
        return Some(Real { everything, python });
    }
    let why = format!(
        "{test}: SKIPPED: the MCP test servers are not installed (run scripts/mcp-deps): {} {}",
        everything.display(),
        python.display()
    );
    assert!(std::env::var_os("PLANRT_REQUIRE_MCP").is_none(), "{why}");
    eprintln!("{why}");
    None
}

impl Real {
    /// The reference server's table: its tools prefixed `ev_`, `get-env` left out.
    pub fn everything(&self) -> String {
        format!(
            "[[mcp]]\nname = \"everything\"\ncommand = [\"node\", \"{}\", \"stdio\"]\nprefix = \"ev_\"\nexclude = [\"get-env\"]\n",
            self.everything.display()
        )
    }

    /// `server.py` over stdio, as a table named `name`.
    pub fn python(&self, name: &str) -> String {
        format!(
            "[[mcp]]\nname = \"{name}\"\ncommand = [\"{}\", \"{}\", \"stdio\"]\n",
            self.python.display(),
            server_py().display()
        )
    }
}

/// The Python SDK's test server (its tools: its docstring).
pub fn server_py() -> PathBuf {
    mcp_dir().join("server.py")
}
