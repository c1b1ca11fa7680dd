//! The exit codes are declared once (`plan_render::exit`): each command's `--help` prints
//! its table, and the README shows the same tables.

use plan_render::exit;

#[test]
fn the_readme_shows_every_command_s_exit_codes_as_declared() {
    let readme = include_str!("../../../README.md");
    let mut missing = String::new();
    for (command, table) in [
        ("planc", exit::PLANC),
        ("planvm run, resume, branch, runs", exit::PLANVM),
        ("planvm ask", exit::PLANVM_ASK),
        ("planvm batch", exit::PLANVM_BATCH),
        ("planvm serve", exit::PLANVM_SERVE),
        ("planvm mcp", exit::PLANVM_MCP),
        ("planvm eval", exit::PLANVM_EVAL),
        ("planvm submit", exit::PLANVM_SUBMIT),
        ("planvm worker", exit::PLANVM_WORKER),
    ] {
        let shown = exit::markdown(table);
        if !readme.contains(&shown) {
            missing.push_str(&format!("\n{command}:\n{shown}"));
        }
    }
    assert!(
        missing.is_empty(),
        "README.md does not show these exit codes as declared:{missing}"
    );
}

#[test]
fn every_declared_code_is_a_known_constant_once_per_table() {
    let known = [
        exit::OK,
        exit::RUN_FAILED,
        exit::USAGE,
        exit::NEEDS_INPUT,
        exit::OUTPUT_IS_INPUT,
        exit::DATA_ERR,
        exit::NO_INPUT,
        exit::SOFTWARE,
        exit::CANT_CREATE,
        exit::IO_ERR,
        exit::TEMP_FAIL,
    ];
    for table in [
        exit::PLANC,
        exit::PLANVM,
        exit::PLANVM_ASK,
        exit::PLANVM_BATCH,
        exit::PLANVM_SERVE,
        exit::PLANVM_MCP,
        exit::PLANVM_EVAL,
        exit::PLANVM_SUBMIT,
        exit::PLANVM_WORKER,
    ] {
        let codes: Vec<u8> = table.iter().map(|(c, _)| *c).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted, "in order, each once");
        assert!(codes.iter().all(|c| known.contains(c)), "{codes:?}");
        let help = exit::help(table);
        assert!(help.lines().all(|l| l.len() <= 88), "{help}");
    }
}
