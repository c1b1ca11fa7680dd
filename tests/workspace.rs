//! The workspace as cargo sees it: `cargo build --release` at the root builds the two tools.

use std::process::Command;

use serde_json::Value;

#[test]
fn a_root_build_builds_planc_and_planvm() {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let name_of = |id: &Value| -> Option<String> {
        let packages = meta["packages"].as_array()?;
        let p = packages.iter().find(|p| p["id"] == *id)?;
        p["name"].as_str().map(str::to_owned)
    };
    let defaults: Vec<String> = meta["workspace_default_members"]
        .as_array()
        .expect("cargo reports the default members")
        .iter()
        .filter_map(name_of)
        .collect();
    for tool in ["planc", "planvm"] {
        assert!(
            defaults.iter().any(|d| d == tool),
            "{tool} not built by default: {defaults:?}"
        );
    }
}
