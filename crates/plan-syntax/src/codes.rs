//! Stable diagnostic codes of the reader (`E00xx`, `W00xx`) and of the plan-structure pass
//! (`E01xx`, `W01xx`). Each code has one `///` line with an input that triggers it, and
//! [`declare_codes!`] makes of those lines the table [`ALL`] that `planc codes` prints.
//! Codes never change meaning once published; retire a code rather than reuse it.
//!
//! Every `W00NN` is a *repair*: the reader changed what it read to make it JSON.
//! `--strict` turns exactly these into the errors `E08NN` of the same number (see
//! [`STRICT_REPAIRS`] and [`is_reader_repair`]).

use crate::diag::Severity;

/// One diagnostic code: its number, its constant's name and what triggers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeDoc {
    pub code: &'static str,
    pub name: &'static str,
    /// The `///` lines of the constant: an input that triggers the code, and why.
    pub doc: &'static str,
}

impl CodeDoc {
    /// `W...` codes are warnings; `E...` (the front ends') and `R...` (a run's) errors.
    pub fn severity(&self) -> Severity {
        if self.code.starts_with('W') {
            Severity::Warning
        } else {
            Severity::Error
        }
    }

    /// A run's error (`R...`), not a diagnostic of the front ends.
    pub fn is_run_error(&self) -> bool {
        self.code.starts_with('R')
    }

    /// A repair of the reader (see [`is_reader_repair`]).
    pub fn is_repair(&self) -> bool {
        is_reader_repair(self.code)
    }
}

/// Declares code constants, each with its `///` lines, and the table `ALL` of them all,
/// so a code and its documentation are written once. Used by this crate and the
/// compiler's.
#[macro_export]
macro_rules! declare_codes {
    ($( #[doc = $doc:literal] $(#[doc = $more:literal])* $name:ident = $code:literal; )*) => {
        $(
            #[doc = $doc]
            $(#[doc = $more])*
            pub const $name: &str = $code;
        )*
        /// Every code declared here, with its documentation.
        pub const ALL: &[$crate::codes::CodeDoc] = &[
            $($crate::codes::CodeDoc {
                code: $code,
                name: stringify!($name),
                doc: concat!($doc $(, "\n", $more)*),
            },)*
        ];
    };
}

declare_codes! {
    // ---- reader errors ----

    /// `planc check missing.json`: the plan file cannot be read (missing, unreadable, not
    /// UTF-8). Reported like any plan error, so the other files are still checked.
    UNREADABLE = "E0000";
    /// `[1 2]`: a character that cannot continue the JSON value here.
    SYNTAX = "E0001";
    /// `["abc`: a string without its closing quote.
    UNTERMINATED_STRING = "E0002";
    /// `["\q"]`: an escape sequence that neither JSON nor Python defines.
    BAD_ESCAPE = "E0003";
    /// `[[[[…]]]]` nested deeper than 128 levels.
    TOO_DEEP = "E0004";
    /// A source larger than 16 MiB.
    TOO_LARGE = "E0005";
    /// `Sorry, I cannot write that plan.`: no JSON array or object anywhere.
    NO_JSON = "E0006";
    /// `[01, 1.e5, NaN, 1e999]`: a number JSON does not allow or cannot represent.
    BAD_NUMBER = "E0007";
    /// `[{"seq_no": 0, "type": "reas`: the input stops in the middle of a value.
    UNEXPECTED_EOF = "E0008";
    /// `[1] /* note`: a block comment that is never closed.
    UNTERMINATED_COMMENT = "E0009";

    // ---- reader repairs (warnings) ----

    /// `Here is the plan: [...]`: text before the JSON value was ignored.
    PROSE_BEFORE = "W0001";
    /// `[...] Let me know if you need changes.`: text after the JSON value was ignored.
    PROSE_AFTER = "W0002";
    /// ```` ```json\n[...]\n``` ````: the plan was taken out of a Markdown code fence.
    CODE_FENCE = "W0003";
    /// `<think>plan it</think>[...]`: a reasoning block was removed.
    THINK_BLOCK = "W0004";
    /// `<answer>[...]</answer>`: the plan was taken out of an answer wrapper.
    ANSWER_WRAPPER = "W0005";
    /// `[1, 2,]`: a trailing comma was ignored.
    TRAILING_COMMA = "W0006";
    /// `[1 // one\n]`: a comment was ignored.
    COMMENT = "W0007";
    /// `['abc']`: a single-quoted (Python) string.
    SINGLE_QUOTED = "W0008";
    /// `[None, True, False]`: a Python literal read as `null`/`true`/`false`.
    PYTHON_LITERAL = "W0009";
    /// `{"a": 1, "a": 2}`: a duplicate key (the last one wins, as in Python and serde_json).
    DUPLICATE_KEY = "W0010";
    /// `["it\'s"]`: a Python-only escape (`\'`, `\xNN`, `\UNNNNNNNN`) in a double-quoted string.
    PYTHON_ESCAPE = "W0011";
    /// `["line one<newline>line two"]`: a raw control character (e.g. newline) inside a string.
    CONTROL_CHAR = "W0012";
    /// `[{seq_no: 0, type: "reasoning"}]`: an unquoted (JavaScript-style) object key.
    UNQUOTED_KEY = "W0013";

    // ---- plan structure errors ----

    /// `{"seq_no": 0, "type": "reasoning"}`: the root is not an array of instructions.
    NOT_ARRAY = "E0101";
    /// `[1, "two"]`: an instruction that is not an object.
    NOT_OBJECT = "E0102";
    /// `[{"type": "reasoning", "parameters": {}}]`: no `seq_no`.
    MISSING_SEQ = "E0103";
    /// `[{"seq_no": "1", ...}]`: `seq_no` is not an integer.
    BAD_SEQ = "E0104";
    /// `[{"seq_no": 0, "parameters": {}}]`: no `type`.
    MISSING_TYPE = "E0105";
    /// `[{"seq_no": 0, "type": 3, ...}]`: `type` is not a string.
    BAD_TYPE = "E0106";
    /// `[{"seq_no": 0, "type": "assign"}]`: no `parameters`.
    MISSING_PARAMETERS = "E0107";
    /// `[{"seq_no": 0, "type": "assign", "parameters": [1]}]`: `parameters` is not an object.
    BAD_PARAMETERS = "E0108";
    /// `{"type": "search", "parameters": {"query": "q"}}`: unknown type and no `tool_name`.
    UNKNOWN_TYPE = "E0109";
    /// `{"type": "calling", "parameters": {"tool_params": {}}}`: no (string) `tool_name`.
    MISSING_TOOL_NAME = "E0110";
    /// `{"type": "jmp", "parameters": {"target_seq": "end"}}`: a jump target that is not an integer.
    BAD_JUMP_TARGET = "E0111";
    /// `{"type": "jmp", "parameters": {"condition_prompt": "p", "jump_if_true": 3}}`.
    MISSING_BRANCH_TARGET = "E0112";
    /// `{"type": "jmp", "parameters": {}}`: neither `condition_prompt` nor `target_seq`.
    JMP_WITHOUT_TARGET = "E0113";
    /// `{"type": "condition", "parameters": {"prompt": "p", "true_branch": "x"}}`.
    BAD_BRANCH = "E0114";
    /// Older-dialect `condition` branches nested deeper than 32 levels.
    PLAN_TOO_DEEP = "E0115";
    /// `{"type": "calling", "parameters": {"tool_name": "t", "tool_params": "q"}}`.
    BAD_TOOL_PARAMS = "E0116";
    /// `{"output_vars": [1]}` or `{"output_var": 3}`: output variable names must be strings.
    BAD_OUTPUT_VARS = "E0117";

    // ---- plan structure warnings ----

    /// `{"plan": [...]}`: the instruction array was taken out of a wrapping object.
    WRAPPED_PLAN = "W0101";
    /// A plan that mixes `llm_generate`/`condition` (older) with `calling`/`jmp` (current).
    MIXED_DIALECT = "W0102";
    /// `{"type": "calling", "parameters": {"tool_name": "t", "params": {}}}`: ignored parameter.
    UNKNOWN_PARAMETER = "W0103";
    /// `{"type": "call", "parameters": {"tool_name": "t"}}`: unknown type run as a tool call.
    UNKNOWN_TYPE_CALL = "W0104";
    /// `{"seq_no": 0, "type": "reasoning", "parameters": {}, "note": "x"}`: ignored member.
    UNKNOWN_MEMBER = "W0105";
    /// `{"output_vars": "answer"}` or `calling` with `"output_var"`: output names in a non-standard form.
    OUTPUT_VARS_STRING = "W0106";
    /// `{"type": "jmp", "parameters": {"condition_prompt": "p", ..., "target_seq": 3}}`.
    JMP_BOTH_FORMS = "W0107";
}

/// Each reader repair (`W00NN`) and the error `E08NN` it becomes under `--strict`: same
/// number, own code, so a consumer of `planc check --format json` can tell a repair
/// that was accepted (a warning) from one that was refused (an error) by the code alone.
pub const STRICT_REPAIRS: &[(&str, &str)] = &[
    (PROSE_BEFORE, "E0801"),
    (PROSE_AFTER, "E0802"),
    (CODE_FENCE, "E0803"),
    (THINK_BLOCK, "E0804"),
    (ANSWER_WRAPPER, "E0805"),
    (TRAILING_COMMA, "E0806"),
    (COMMENT, "E0807"),
    (SINGLE_QUOTED, "E0808"),
    (PYTHON_LITERAL, "E0809"),
    (DUPLICATE_KEY, "E0810"),
    (PYTHON_ESCAPE, "E0811"),
    (CONTROL_CHAR, "E0812"),
    (UNQUOTED_KEY, "E0813"),
];

/// True for the reader's repairs: the warnings `W00xx`, and the errors `E08xx` that
/// `--strict` turns them into.
pub fn is_reader_repair(code: &str) -> bool {
    code.len() == 5 && (code.starts_with("W00") || code.starts_with("E08"))
}

/// The `--strict` error code of repair `code` (`W0003` → `E0803`), if it is a repair.
pub fn strict_code(code: &str) -> Option<&'static str> {
    STRICT_REPAIRS
        .iter()
        .find(|(w, _)| *w == code)
        .map(|&(_, e)| e)
}
