//! Every cap the decoder and validator enforce, in one place.
//!
//! Why caps at all: a `.pbc` file is untrusted input. Each count read from the file is
//! checked against these limits *and* against the bytes left in the input before anything
//! is allocated, so a small file can never ask for a huge allocation. The validator enforces
//! the same caps on in-memory programs, so any program that validates also encodes to a
//! file that decodes.
//!
//! The numbers are generous for LLM-written plans (tens of instructions, a few kilobytes of
//! text) while keeping worst-case memory and recursion bounded.

/// Largest number of constants in the pool.
pub const MAX_CONSTS: usize = 1 << 20;
/// Largest number of variable slots.
pub const MAX_SLOTS: usize = 1 << 16;
/// Largest number of instructions.
pub const MAX_CODE: usize = 1 << 20;
/// Largest number of entries in any one side table (refs, templates, ariths, ...).
pub const MAX_TABLE: usize = 1 << 20;
/// Largest number of tools in the tool table.
pub const MAX_TOOLS: usize = 1 << 12;
/// Largest number of items in one list inside a table entry (template pieces, call
/// arguments, array elements, dotted path keys, arithmetic ops, ...).
pub const MAX_LIST: usize = 1 << 16;
/// Longest string (constant, slot name, tool name, reasoning text), in bytes.
pub const MAX_STRING: usize = 16 << 20;
/// Deepest nesting of a JSON constant (arrays/objects). Decoding and validation recurse
/// once per level, so this also bounds stack use.
pub const MAX_CONST_DEPTH: usize = 128;
/// Deepest nesting of `Operand::Array`/`Operand::Object` inside each other. The VM
/// recurses once per level when it builds such a value.
pub const MAX_OPERAND_DEPTH: usize = 64;
/// Largest operand-stack depth an arithmetic program may reach.
pub const MAX_ARITH_STACK: usize = 256;

/// Each table of a program with its size and its limit (the validator checks these; the
/// compiler reports a plan that goes past one at the instruction that does).
pub fn table_sizes(p: &crate::Program) -> [(&'static str, usize, usize); 13] {
    [
        ("constants", p.consts.len(), MAX_CONSTS),
        ("variables", p.slots.len(), MAX_SLOTS),
        ("instructions", p.code.len(), MAX_CODE),
        ("references", p.refs.len(), MAX_TABLE),
        ("templates", p.templates.len(), MAX_TABLE),
        ("arithmetic expressions", p.ariths.len(), MAX_TABLE),
        ("arrays holding references", p.arrays.len(), MAX_TABLE),
        ("objects holding references", p.objects.len(), MAX_TABLE),
        ("multi-variable assigns", p.assigns.len(), MAX_TABLE),
        ("calls", p.calls.len(), MAX_TABLE),
        ("conditions", p.conds.len(), MAX_TABLE),
        ("tools", p.tools.len(), MAX_TOOLS),
        (
            "reasoning texts",
            p.debug.as_ref().map_or(0, |d| d.reasoning.len()),
            MAX_CODE,
        ),
    ]
}
