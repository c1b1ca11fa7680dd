//! The seam to `plan-bytecode` and `plan-manifest`: every call the CLI makes into them
//! goes through here, so their signatures touch one file.

use plan_bytecode::{BytecodeError, Program};
use plan_manifest::Manifest;
use std::path::Path;

/// The `.pbc` bytes of a compiled program.
pub(crate) fn encode(program: &Program) -> Vec<u8> {
    plan_bytecode::encode(program)
}

/// Loads (decodes and validates, trusting nothing) a `.pbc` file and returns its listing.
pub(crate) fn load(bytes: &[u8]) -> Result<String, BytecodeError> {
    plan_bytecode::load(bytes).map(|p| plan_bytecode::disasm(&p))
}

/// Whether the bytes start with the `.pbc` magic.
pub(crate) fn is_pbc(bytes: &[u8]) -> bool {
    plan_bytecode::is_pbc(bytes)
}

/// The built-in tools plus (overriding by name) those of a TOML manifest file, with the
/// tools of its MCP servers (listed when no listing is cached). The error text already
/// names the file, line and column.
pub(crate) fn load_manifest(path: &Path) -> Result<Manifest, String> {
    plan_mcp::load(path, plan_llm::process_env(), plan_mcp::Listing::Cached)
}
