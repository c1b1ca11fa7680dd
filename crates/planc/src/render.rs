//! Rendering lives in `plan-render` (shared with `planvm`); planc adds its own read-error code.

pub(crate) use plan_render::*;

/// Code of the diagnostic for a plan file that could not be read (missing, unreadable,
/// not UTF-8). It is reported like any other error so that `planc check a b c` still
/// checks the other files and the exit code stays 1 ("the plan has errors").
pub(crate) const E_READ: &str = "E0000";
