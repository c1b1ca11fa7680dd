//! Stable diagnostic codes of the reader (`E00xx`, `W00xx`) and of the plan-structure pass
//! (`E01xx`, `W01xx`). Each code has one `///` line with an input that triggers it.
//! Codes never change meaning once published; retire a code rather than reuse it.
//!
//! Every `W00NN` is a *repair*: the reader changed what it read to make it JSON.
//! `--strict` turns exactly these into the errors `E08NN` of the same number (see
//! [`STRICT_REPAIRS`] and [`is_reader_repair`]).

// ---- reader errors ----

/// `[1 2]`: a character that cannot continue the JSON value here.
pub const SYNTAX: &str = "E0001";
/// `["abc`: a string without its closing quote.
pub const UNTERMINATED_STRING: &str = "E0002";
/// `["\q"]`: an escape sequence that neither JSON nor Python defines.
pub const BAD_ESCAPE: &str = "E0003";
/// `[[[[…]]]]` nested deeper than 128 levels.
pub const TOO_DEEP: &str = "E0004";
/// A source larger than 16 MiB.
pub const TOO_LARGE: &str = "E0005";
/// `Sorry, I cannot write that plan.`: no JSON array or object anywhere.
pub const NO_JSON: &str = "E0006";
/// `[01, 1.e5, NaN, 1e999]`: a number JSON does not allow or cannot represent.
pub const BAD_NUMBER: &str = "E0007";
/// `[{"seq_no": 0, "type": "reas`: the input stops in the middle of a value.
pub const UNEXPECTED_EOF: &str = "E0008";
/// `[1] /* note`: a block comment that is never closed.
pub const UNTERMINATED_COMMENT: &str = "E0009";

// ---- reader repairs (warnings) ----

/// `Here is the plan: [...]`: text before the JSON value was ignored.
pub const PROSE_BEFORE: &str = "W0001";
/// `[...] Let me know if you need changes.`: text after the JSON value was ignored.
pub const PROSE_AFTER: &str = "W0002";
/// ```` ```json\n[...]\n``` ````: the plan was taken out of a Markdown code fence.
pub const CODE_FENCE: &str = "W0003";
/// `<think>plan it</think>[...]`: a reasoning block was removed.
pub const THINK_BLOCK: &str = "W0004";
/// `<answer>[...]</answer>`: the plan was taken out of an answer wrapper.
pub const ANSWER_WRAPPER: &str = "W0005";
/// `[1, 2,]`: a trailing comma was ignored.
pub const TRAILING_COMMA: &str = "W0006";
/// `[1 // one\n]`: a comment was ignored.
pub const COMMENT: &str = "W0007";
/// `['abc']`: a single-quoted (Python) string.
pub const SINGLE_QUOTED: &str = "W0008";
/// `[None, True, False]`: a Python literal read as `null`/`true`/`false`.
pub const PYTHON_LITERAL: &str = "W0009";
/// `{"a": 1, "a": 2}`: a duplicate key (the last one wins, as in Python and serde_json).
pub const DUPLICATE_KEY: &str = "W0010";
/// `["it\'s"]`: a Python-only escape (`\'`, `\xNN`, `\UNNNNNNNN`) in a double-quoted string.
pub const PYTHON_ESCAPE: &str = "W0011";
/// `["line one<newline>line two"]`: a raw control character (e.g. newline) inside a string.
pub const CONTROL_CHAR: &str = "W0012";
/// `[{seq_no: 0, type: "reasoning"}]`: an unquoted (JavaScript-style) object key.
pub const UNQUOTED_KEY: &str = "W0013";

// ---- plan structure errors ----

/// `{"seq_no": 0, "type": "reasoning"}`: the root is not an array of instructions.
pub const NOT_ARRAY: &str = "E0101";
/// `[1, "two"]`: an instruction that is not an object.
pub const NOT_OBJECT: &str = "E0102";
/// `[{"type": "reasoning", "parameters": {}}]`: no `seq_no`.
pub const MISSING_SEQ: &str = "E0103";
/// `[{"seq_no": "1", ...}]`: `seq_no` is not an integer.
pub const BAD_SEQ: &str = "E0104";
/// `[{"seq_no": 0, "parameters": {}}]`: no `type`.
pub const MISSING_TYPE: &str = "E0105";
/// `[{"seq_no": 0, "type": 3, ...}]`: `type` is not a string.
pub const BAD_TYPE: &str = "E0106";
/// `[{"seq_no": 0, "type": "assign"}]`: no `parameters`.
pub const MISSING_PARAMETERS: &str = "E0107";
/// `[{"seq_no": 0, "type": "assign", "parameters": [1]}]`: `parameters` is not an object.
pub const BAD_PARAMETERS: &str = "E0108";
/// `{"type": "search", "parameters": {"query": "q"}}`: unknown type and no `tool_name`.
pub const UNKNOWN_TYPE: &str = "E0109";
/// `{"type": "calling", "parameters": {"tool_params": {}}}`: no (string) `tool_name`.
pub const MISSING_TOOL_NAME: &str = "E0110";
/// `{"type": "jmp", "parameters": {"target_seq": "end"}}`: a jump target that is not an integer.
pub const BAD_JUMP_TARGET: &str = "E0111";
/// `{"type": "jmp", "parameters": {"condition_prompt": "p", "jump_if_true": 3}}`.
pub const MISSING_BRANCH_TARGET: &str = "E0112";
/// `{"type": "jmp", "parameters": {}}`: neither `condition_prompt` nor `target_seq`.
pub const JMP_WITHOUT_TARGET: &str = "E0113";
/// `{"type": "condition", "parameters": {"prompt": "p", "true_branch": "x"}}`.
pub const BAD_BRANCH: &str = "E0114";
/// Older-dialect `condition` branches nested deeper than 32 levels.
pub const PLAN_TOO_DEEP: &str = "E0115";
/// `{"type": "calling", "parameters": {"tool_name": "t", "tool_params": "q"}}`.
pub const BAD_TOOL_PARAMS: &str = "E0116";
/// `{"output_vars": [1]}` or `{"output_var": 3}`: output variable names must be strings.
pub const BAD_OUTPUT_VARS: &str = "E0117";

// ---- plan structure warnings ----

/// `{"plan": [...]}`: the instruction array was taken out of a wrapping object.
pub const WRAPPED_PLAN: &str = "W0101";
/// A plan that mixes `llm_generate`/`condition` (older) with `calling`/`jmp` (current).
pub const MIXED_DIALECT: &str = "W0102";
/// `{"type": "calling", "parameters": {"tool_name": "t", "params": {}}}`: ignored parameter.
pub const UNKNOWN_PARAMETER: &str = "W0103";
/// `{"type": "call", "parameters": {"tool_name": "t"}}`: unknown type run as a tool call.
pub const UNKNOWN_TYPE_CALL: &str = "W0104";
/// `{"seq_no": 0, "type": "reasoning", "parameters": {}, "note": "x"}`: ignored member.
pub const UNKNOWN_MEMBER: &str = "W0105";
/// `{"output_vars": "answer"}` or `calling` with `"output_var"`: output names in a non-standard form.
pub const OUTPUT_VARS_STRING: &str = "W0106";
/// `{"type": "jmp", "parameters": {"condition_prompt": "p", ..., "target_seq": 3}}`.
pub const JMP_BOTH_FORMS: &str = "W0107";

/// Every code this crate can emit, for tests and for `planc` documentation.
pub const ALL: &[&str] = &[
    SYNTAX,
    UNTERMINATED_STRING,
    BAD_ESCAPE,
    TOO_DEEP,
    TOO_LARGE,
    NO_JSON,
    BAD_NUMBER,
    UNEXPECTED_EOF,
    UNTERMINATED_COMMENT,
    PROSE_BEFORE,
    PROSE_AFTER,
    CODE_FENCE,
    THINK_BLOCK,
    ANSWER_WRAPPER,
    TRAILING_COMMA,
    COMMENT,
    SINGLE_QUOTED,
    PYTHON_LITERAL,
    DUPLICATE_KEY,
    PYTHON_ESCAPE,
    CONTROL_CHAR,
    UNQUOTED_KEY,
    NOT_ARRAY,
    NOT_OBJECT,
    MISSING_SEQ,
    BAD_SEQ,
    MISSING_TYPE,
    BAD_TYPE,
    MISSING_PARAMETERS,
    BAD_PARAMETERS,
    UNKNOWN_TYPE,
    MISSING_TOOL_NAME,
    BAD_JUMP_TARGET,
    MISSING_BRANCH_TARGET,
    JMP_WITHOUT_TARGET,
    BAD_BRANCH,
    PLAN_TOO_DEEP,
    BAD_TOOL_PARAMS,
    BAD_OUTPUT_VARS,
    WRAPPED_PLAN,
    MIXED_DIALECT,
    UNKNOWN_PARAMETER,
    UNKNOWN_TYPE_CALL,
    UNKNOWN_MEMBER,
    OUTPUT_VARS_STRING,
    JMP_BOTH_FORMS,
];

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
