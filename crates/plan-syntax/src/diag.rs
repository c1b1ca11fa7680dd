//! Diagnostics as plain data. Rendering happens only at the CLI edge.

use crate::span::{LineIndex, Span};

/// How bad a diagnostic is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The plan is still compiled; `--deny-warnings` / `--strict` may promote it.
    Warning,
    /// The plan cannot be compiled.
    Error,
}

impl Severity {
    /// `"error"` or `"warning"`, as printed in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One finding about a plan: severity, stable code, one-line message, where, and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable code such as `E0101` or `W0201`; see the `codes` module of the crate that emits it.
    pub code: &'static str,
    pub message: String,
    /// Primary location (byte span into the source text), if any.
    pub span: Option<Span>,
    /// `seq_no` of the instruction concerned, if known.
    pub seq_no: Option<i64>,
    /// One line telling the plan's author what to do instead.
    pub help: Option<String>,
    /// Secondary labelled locations.
    pub labels: Vec<(Span, String)>,
}

impl Diagnostic {
    /// An error; its code is an `E` code (the table in `codes` and `planc codes` say a
    /// code's severity by its letter, so a call site cannot disagree with them).
    #[cold]
    pub fn error(code: &'static str, message: impl Into<String>) -> Self {
        debug_assert!(code.starts_with('E'), "error with the code {code}");
        Self::new(Severity::Error, code, message)
    }

    /// A warning; its code is a `W` code.
    #[cold]
    pub fn warning(code: &'static str, message: impl Into<String>) -> Self {
        debug_assert!(code.starts_with('W'), "warning with the code {code}");
        Self::new(Severity::Warning, code, message)
    }

    fn new(severity: Severity, code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            code,
            message: message.into(),
            span: None,
            seq_no: None,
            help: None,
            labels: Vec::new(),
        }
    }

    pub fn with_span(mut self, span: Span) -> Self {
        self.span = Some(span);
        self
    }

    pub fn with_seq(mut self, seq_no: Option<i64>) -> Self {
        self.seq_no = seq_no;
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn with_label(mut self, span: Span, label: impl Into<String>) -> Self {
        self.labels.push((span, label.into()));
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// 1-based (line, column) of the primary span, column counted in characters.
    pub fn line_col(&self, index: &LineIndex) -> Option<(u32, u32)> {
        self.span.map(|s| index.line_col(s.start))
    }
}

/// A value plus every diagnostic found while producing it. Front ends never stop at the
/// first problem: they return what they could build and all the findings.
#[derive(Clone, Debug)]
pub struct Parsed<T> {
    pub value: T,
    pub diagnostics: Vec<Diagnostic>,
}

impl<T> Parsed<T> {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// For callers that only want a `Result`: the value when there is no error.
    pub fn into_result(self) -> Result<T, Vec<Diagnostic>> {
        if self.has_errors() {
            Err(self.diagnostics)
        } else {
            Ok(self.value)
        }
    }
}
