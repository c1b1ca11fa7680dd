//! Process exit codes, one table for both CLIs. Codes above 2 follow BSD sysexits, so
//! scripts can tell "the plan or the run failed" (1) from "the input is not usable" (65,
//! 66) and from "an output could not be written" (64, 73).

pub const OK: u8 = 0;
/// `planc`: the plan has errors (or warnings under `--deny-warnings`).
pub const PLAN_ERRORS: u8 = 1;
/// `planvm`: the run failed (its error has a run error code, docs/semantics.md).
pub const RUN_FAILED: u8 = 1;
/// Bad command line (clap uses it too), including an unreadable or malformed `--tools`
/// file.
pub const USAGE: u8 = 2;
/// `EX_USAGE`: an output is one of the command's inputs, or two outputs are one file.
pub const OUTPUT_IS_INPUT: u8 = 64;
/// `EX_DATAERR`: a `.pbc` file that is corrupted or truncated; `planvm`: also a plan with
/// errors or a malformed `--replay` cassette.
pub const DATA_ERR: u8 = 65;
/// `EX_NOINPUT`: an input file that cannot be read.
pub const NO_INPUT: u8 = 66;
/// `EX_SOFTWARE`: the compiler broke its own contract (no program and no error).
pub const SOFTWARE: u8 = 70;
/// `EX_CANTCREAT`: an output file that cannot be created or written.
pub const CANT_CREATE: u8 = 73;
/// `EX_IOERR`: `planvm`: the run store could not be read or written.
pub const IO_ERR: u8 = 74;
/// `EX_TEMPFAIL`: `planvm`: the stored run is held by another live process; try later.
pub const TEMP_FAIL: u8 = 75;
