//! `ManifestError`: one error with the file name, 1-based line and column, and a message
//! that names the offending key, tool, or value.

use std::fmt;

/// What kind of problem a [`ManifestError`] reports (stable, for tests and callers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ManifestErrorKind {
    /// The file could not be read. Example: `--tools missing.toml`.
    Io,
    /// Not valid TOML, or a value of the wrong type. Example: `name = 3`.
    Syntax,
    /// A key the format does not define. Example: `[[tool]] nmae = "x"`.
    UnknownKey,
    /// A required key is absent. Example: a `[[tool]]` without `name`.
    MissingKey,
    /// Two `[[tool]]` entries with the same name. Example: `web_search` declared twice.
    DuplicateTool,
    /// Two params with the same name in one tool. Example: `query` listed twice.
    DuplicateParam,
    /// A param `type` outside the accepted list. Example: `type = "integer"`.
    InvalidParamType,
    /// A tool or param whose name is empty. Example: `name = ""`.
    EmptyName,
    /// A param `default` that does not fit the param, or on a required param. Example:
    /// `{ name = "top_k", type = "int", default = "ten" }`.
    InvalidDefault,
    /// A tool answered by a person (`effects = "human"`) given a backend, or a human
    /// tool without a string `question` param. Example: `ask_user` with `[tool.backend]`.
    HumanTool,
    /// A param `enum` that is empty, holds a value not of the param's type, or leaves out
    /// the param's default. Example: `{ name = "n", type = "int", enum = ["a"] }`.
    InvalidEnum,
    /// An `[[mcp]]` table with neither or both of `command` and `url`, a duplicate name,
    /// or a tool whose `kind = "mcp"` backend names no `[[mcp]]` table.
    Mcp,
}

/// A clean error for a bad tool manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    kind: ManifestErrorKind,
    file: String,
    /// 1-based line and column, when the error points into the text.
    position: Option<(usize, usize)>,
    message: String,
}

impl ManifestError {
    #[cold]
    pub(crate) fn new(
        kind: ManifestErrorKind,
        file: &str,
        position: Option<(usize, usize)>,
        message: impl Into<String>,
    ) -> Self {
        ManifestError {
            kind,
            file: file.to_owned(),
            position,
            message: message.into(),
        }
    }

    pub fn kind(&self) -> ManifestErrorKind {
        self.kind
    }

    /// The file (or source name) the error is in.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// 1-based line, when known.
    pub fn line(&self) -> Option<usize> {
        self.position.map(|(l, _)| l)
    }

    /// 1-based column (in characters), when known.
    pub fn column(&self) -> Option<usize> {
        self.position.map(|(_, c)| c)
    }

    /// The message without the location prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, col)) => write!(f, "{}:{line}:{col}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ManifestError {}

/// 1-based line and column (in characters) of byte `offset` in `text`. Offsets past the
/// end or inside a character are clamped, so any span gives some position.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::line_col;

    #[test]
    fn positions() {
        let t = "ab\ncdé\nx";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 2), (1, 3));
        assert_eq!(line_col(t, 3), (2, 1));
        assert_eq!(line_col(t, 7), (2, 4)); // after the two-byte é
        assert_eq!(line_col(t, 6), (2, 3)); // inside é: clamped back
        assert_eq!(line_col(t, 100), (3, 2));
        assert_eq!(line_col("", 5), (1, 1));
    }
}
