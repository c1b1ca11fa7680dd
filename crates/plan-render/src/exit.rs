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
/// `planvm`: the run stopped at a question to a person (`ask_user`), printed; it goes on
/// with `planvm resume ID --input TEXT`.
pub const NEEDS_INPUT: u8 = 3;
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

/// What an exit code means for one command: the tables below are the one place the
/// commands' help texts and the README take their exit codes from.
pub type Meaning = (u8, &'static str);

/// `planc`.
pub const PLANC: &[Meaning] = &[
    (OK, "success"),
    (
        PLAN_ERRORS,
        "the plan has errors (or warnings with `--deny-warnings`); a plan file that cannot \
         be read is one (`E0000`), so `check a b c` still checks the others",
    ),
    (USAGE, "usage error, or an unloadable `--tools` file"),
    (
        OUTPUT_IS_INPUT,
        "the output (`-o`) is one of the inputs (the plan or the `--tools` file, by file \
         identity)",
    ),
    (DATA_ERR, "a malformed `.pbc` file"),
    (NO_INPUT, "a `.pbc` file cannot be read"),
    (SOFTWARE, "an internal error of the compiler"),
    (CANT_CREATE, "the output cannot be written"),
];

/// `planvm run`, `ask`, `resume`, `branch` and `runs`.
pub const PLANVM: &[Meaning] = &[
    (OK, "the run finished with a final answer"),
    (
        RUN_FAILED,
        "the run failed: a tool error after retries, a missing cassette entry, a limit or \
         the deadline exceeded, no backend or API key for a tool, a store write that \
         failed, ...",
    ),
    (
        USAGE,
        "usage error, including an unreadable or malformed `--tools` file, a `--run-id` \
         that exists, a branch point the run never reached, a `write` call in flight on \
         resume without `--retry-unknown-writes`, an `--input` that is empty or not one \
         of the question's choices, or given to a run that is not waiting for one",
    ),
    (
        NEEDS_INPUT,
        "the run stopped at a question to a person (`ask_user`): the question is printed \
         (with `--store`, answer it with `planvm resume ID --input TEXT`); `resume` \
         without `--input` of a run still waiting prints it again",
    ),
    (
        OUTPUT_IS_INPUT,
        "an output (`--trace`, `--record`) is one of the inputs (FILE, `--tools`, \
         `--replay`, the `--store` database or a file SQLite keeps beside it; by file \
         identity, and by resolved name for files that do not exist yet), or both are one \
         file",
    ),
    (
        DATA_ERR,
        "invalid input: the plan has errors, the `.pbc` is corrupted or truncated, the \
         `--replay` cassette is malformed, the `--store` file is not a planvm store (or \
         is newer) or what it holds is damaged",
    ),
    (
        NO_INPUT,
        "FILE or the `--replay` cassette cannot be read, or no run has that ID",
    ),
    (
        CANT_CREATE,
        "the `--trace` or `--record` file cannot be created",
    ),
    (
        IO_ERR,
        "the `--store` file cannot be read or written (or stays locked)",
    ),
    (
        TEMP_FAIL,
        "the stored run is being run by another live process",
    ),
];

/// `planvm ask`.
pub const PLANVM_ASK: &[Meaning] = &[
    (OK, "the goal was answered"),
    (
        RUN_FAILED,
        "the last plan's run failed, or the planner could not be reached (or has no \
         backend)",
    ),
    (
        USAGE,
        "usage error, including an unreadable or malformed `--tools` file, `--prompt` \
         template or an examples directory that cannot be read (or holds over 10,000 \
         examples), and a `--run-id` that exists",
    ),
    (
        NEEDS_INPUT,
        "the plan's run stopped at a question to the user (`ask_user`): the question is \
         printed; with `--store`, answer it with `planvm resume RUN_ID --input TEXT` and \
         the goal is answered when the run ends",
    ),
    (
        OUTPUT_IS_INPUT,
        "the `--trace` or `--record` file is one of the inputs or both are one file",
    ),
    (
        DATA_ERR,
        "the plan still had errors when the repairs ran out, the `--replay` cassette is \
         malformed, or the `--store` file is not a planvm store (or is damaged)",
    ),
    (NO_INPUT, "the `--replay` cassette cannot be read"),
    (
        CANT_CREATE,
        "the `--trace` or `--record` file cannot be created",
    ),
    (
        IO_ERR,
        "the `--store` file cannot be read or written (or stays locked)",
    ),
];

/// `planvm batch`.
pub const PLANVM_BATCH: &[Meaning] = &[
    (OK, "every run finished with a final answer"),
    (RUN_FAILED, "some run failed"),
    (
        USAGE,
        "usage error, including an unreadable or malformed `--tools` or `--list` file, and \
         a `--store` that holds a run of this `--batch-id` already (continue it with \
         `--resume`)",
    ),
    (
        NEEDS_INPUT,
        "no run failed, and some stopped at a question to a person (their lines have \
         `needs_input` and the question)",
    ),
    (
        OUTPUT_IS_INPUT,
        "`--output` is one of the inputs, or a run's `--record`/`--trace` file would \
         overwrite one of its inputs (that run is reported as a failed line)",
    ),
    (
        DATA_ERR,
        "some plan or cassette could not be loaded (unreadable, invalid plan, corrupted \
         `.pbc`, malformed cassette), or with `--resume` what the store holds of a run is \
         damaged: those runs are reported as failed lines, the others still run; also a \
         malformed `--replay` cassette (nothing runs)",
    ),
    (
        NO_INPUT,
        "DIR or the `--replay` cassette cannot be read, or DIR holds no plan; with \
         `--resume`, no run of the batch is in the store",
    ),
    (
        CANT_CREATE,
        "the `--output` file cannot be created or written, or a `--record`/`--trace` \
         directory or one of its per-run files cannot be created (those runs are reported \
         as failed lines)",
    ),
    (
        IO_ERR,
        "the `--store` file cannot be read or written (or stays locked)",
    ),
    (
        TEMP_FAIL,
        "with `--resume`, a run of the batch is being run by another live process",
    ),
];

/// `planvm serve`.
pub const PLANVM_SERVE: &[Meaning] = &[
    (OK, "the service stopped on SIGTERM or SIGINT"),
    (
        RUN_FAILED,
        "the tools' backends cannot be set up, or the runtime cannot start",
    ),
    (
        USAGE,
        "usage error, including an unreadable or malformed `--tools` file, a `--listen` \
         address off loopback without `--token-env`, or a `--token-env` variable unset or \
         empty",
    ),
    (
        DATA_ERR,
        "the `--store` file is not a planvm store (or is newer) or is damaged, or the \
         `--replay` cassette is malformed",
    ),
    (NO_INPUT, "the `--replay` cassette cannot be read"),
    (
        IO_ERR,
        "the `--store` file cannot be read or written, or the `--listen` address cannot be \
         listened on",
    ),
];

/// `planvm submit`.
pub const PLANVM_SUBMIT: &[Meaning] = &[
    (
        OK,
        "every run (or the goal) was submitted; their ids are on stdout",
    ),
    (
        USAGE,
        "usage error, including an unreadable or malformed `--tools` file or list, a list \
         line with a cassette, a `--timeout` or `--tool-timeout` a submission cannot keep, \
         or an id the store holds already (nothing is submitted)",
    ),
    (
        DATA_ERR,
        "a plan has errors, or the store is not a planvm store (or is newer)",
    ),
    (NO_INPUT, "a plan file cannot be read"),
    (IO_ERR, "the store cannot be reached, read or written"),
];

/// `planvm worker`.
pub const PLANVM_WORKER: &[Meaning] = &[
    (
        OK,
        "the worker stopped on SIGTERM or SIGINT, its runs at their next commit point",
    ),
    (
        RUN_FAILED,
        "the tools' backends cannot be set up, or the runtime cannot start",
    ),
    (
        USAGE,
        "usage error, including an unreadable or malformed `--tools` file",
    ),
    (
        DATA_ERR,
        "the store is not a planvm store (or is newer) or is damaged",
    ),
    (IO_ERR, "the store cannot be reached, read or written"),
];

/// `planvm eval`.
pub const PLANVM_EVAL: &[Meaning] = &[
    (
        OK,
        "the evaluation ran (whatever the verdicts), and no `--fail-under` or `--compare` \
         gate failed",
    ),
    (
        RUN_FAILED,
        "the pass rate is below `--fail-under`, or a case that passed in the `--compare` \
         baseline fails now; or the tools' backends cannot be set up",
    ),
    (
        USAGE,
        "usage error, including an unreadable or malformed `--tools` file, no planner, \
         or an `--eval-id` the store has already",
    ),
    (
        OUTPUT_IS_INPUT,
        "`--output`, or a case's cassette under `--record` or `--tools-from`, is one of \
         the inputs (the dataset, `--tools`, `--replay`, the `--store` database)",
    ),
    (
        DATA_ERR,
        "the `--compare` baseline is not a JSON report of `planvm eval`, the `--replay` \
         cassette is malformed, or the `--store` file is not a planvm store (or is newer) \
         or is damaged",
    ),
    (
        NO_INPUT,
        "the dataset or the `--replay` cassette (or directory) cannot be read",
    ),
    (
        CANT_CREATE,
        "the report, or the `--record` or `--tools-from` directory, cannot be written",
    ),
    (
        IO_ERR,
        "the `--store` file cannot be read or written (or stays locked)",
    ),
];

/// `planvm mcp`.
pub const PLANVM_MCP: &[Meaning] = &[
    (OK, "the client closed the session (stdin)"),
    (
        RUN_FAILED,
        "the tools' backends cannot be set up, or the runtime cannot start",
    ),
    (
        USAGE,
        "usage error, including an unreadable or malformed `--tools` file (or one whose \
         MCP servers cannot be listed)",
    ),
    (
        DATA_ERR,
        "the `--store` file is not a planvm store (or is newer) or is damaged, or the \
         `--replay` cassette is malformed",
    ),
    (NO_INPUT, "the `--replay` cassette cannot be read"),
    (
        CANT_CREATE,
        "without `--store`, the store of the process cannot be made",
    ),
    (
        IO_ERR,
        "the `--store` file cannot be read or written, or stdin or stdout fails",
    ),
];

/// `table` for a command's `--help`: `Exit codes:`, then one code a line, its meaning
/// wrapped under it.
pub fn help(table: &[Meaning]) -> String {
    let mut text = String::from("Exit codes:");
    for (code, meaning) in table {
        let mut line = format!("\n  {code:<3} ");
        for word in meaning.split(' ') {
            if line.len() + word.len() > 88 {
                text.push_str(line.trim_end());
                line = format!("\n{:6}", "");
            }
            line.push_str(word);
            line.push(' ');
        }
        text.push_str(line.trim_end());
    }
    text
}

/// `table` as a Markdown table, as the README shows it.
pub fn markdown(table: &[Meaning]) -> String {
    let mut text = String::from("| exit | meaning |\n|------|---------|\n");
    for (code, meaning) in table {
        text.push_str(&format!("| {code} | {meaning} |\n"));
    }
    text
}

/// The one mapping from what went wrong to the exit code, for every `planvm` command.
/// A failure of the run engine: the store, a run's id, an answer it does not take, the
/// tools file, the host (its cassettes, backends and databases), the planner's LLM.
pub fn of_engine(kind: plan_runs::ErrorKind) -> u8 {
    use plan_runs::ErrorKind as K;
    match kind {
        K::NotAStore | K::Damaged | K::Invalid => DATA_ERR,
        K::UnknownRun | K::NoStore => NO_INPUT,
        K::DuplicateRun
        | K::BadRunId
        | K::UnknownWrites
        | K::BadInput
        | K::NotWaiting
        | K::NotReached => USAGE,
        K::Busy => TEMP_FAIL,
        K::Cancelled | K::Config => RUN_FAILED,
        K::ReadOnly | K::Io => IO_ERR,
        K::Unreadable => NO_INPUT,
        K::CannotCreate => CANT_CREATE,
        K::OutputIsInput => OUTPUT_IS_INPUT,
    }
}

/// A run that ended with `status`.
pub fn of_run(status: plan_host::RunStatus) -> u8 {
    use plan_host::RunStatus as S;
    match status {
        S::Ok => OK,
        S::NeedsInput => NEEDS_INPUT,
        // NB: a command's host never drains; only the service stops its runs.
        S::Failed | S::Stopped => RUN_FAILED,
    }
}

/// A goal asked, that ended with `status`.
pub fn of_ask(status: plan_planner::AskStatus) -> u8 {
    use plan_planner::AskStatus as S;
    match status {
        S::Answered => OK,
        S::InvalidPlan => DATA_ERR,
        S::RunFailed | S::PlannerFailed | S::Stopped => RUN_FAILED,
        S::NeedsInput => NEEDS_INPUT,
    }
}

/// A batch, by the worst of its runs: an output over an input, an output not written,
/// a plan that did not load, a run that failed, a run waiting for a person.
pub fn of_batch(tally: &plan_runs::batch::Tally) -> u8 {
    if tally.over_input > 0 {
        OUTPUT_IS_INPUT
    } else if tally.unwritable > 0 {
        CANT_CREATE
    } else if tally.invalid > 0 {
        DATA_ERR
    } else if tally.ok + tally.needs_input < tally.runs {
        RUN_FAILED
    } else if tally.needs_input > 0 {
        NEEDS_INPUT
    } else {
        OK
    }
}
