//! What the tests share: `fake_server.py`'s `[[mcp]]` table, and a manifest of it.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;

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
