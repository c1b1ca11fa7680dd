//! `plan-mcp`: tools from MCP (Model Context Protocol) servers, through the official Rust
//! SDK (`rmcp`).
//!
//! - `import`: the `[[mcp]]` tables of a manifest become tools: each server's listing
//!   (`tools/list`, cached between processes by `cache`) filtered, prefixed and mapped by
//!   `schema` (input JSON Schema → params with types, required, defaults, enums;
//!   annotations → effects).
//! - `client`: [`Servers`], one client per table shared by every run of the process,
//!   started at first use, started again when it died, shut down at exit.
//! - `stdio`: the transport of a server over stdio, with a cap on the size of its answers.
//! - `result`: a `tools/call` result as the plan's value.
//!
//! The tool host (`plan-host`) serves `kind = "mcp"` backends with [`Servers::call`] and
//! [`output`]; the CLIs and the Python package load a tools file with [`load`].

mod cache;
mod client;
mod import;
mod result;
mod schema;
mod stdio;

pub use client::{DEFAULT_TIMEOUT, Servers};
pub use import::{Listing, import, import_blocking, load, merge};
pub use result::output;
pub use schema::{effects, tool_spec};
