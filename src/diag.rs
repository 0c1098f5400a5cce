//! Diagnostics in Terraform's shape (summary, detail, optional source position),
//! so every stage can report several problems at once and the UI renders them
//! the way Terraform users already know.

use std::fmt;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourcePos {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for SourcePos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub summary: String,
    pub detail: String,
    pub subject: Option<SourcePos>,
}

impl Diagnostic {
    pub fn error(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(Severity::Error, summary, detail)
    }

    pub fn warning(summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(Severity::Warning, summary, detail)
    }

    /// A syntax error from hcl-edit, whose messages start in lower case
    /// where HCL's, and so Terraform's, start with a capital.
    pub fn invalid_hcl_syntax(parser_message: &str) -> Self {
        let mut chars = parser_message.chars();
        let detail: String = match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => String::new(),
        };
        Self::error("Invalid HCL syntax", detail)
    }

    fn new(severity: Severity, summary: impl Into<String>, detail: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            summary: summary.into(),
            detail: detail.into(),
            subject: None,
        }
    }

    pub fn at(mut self, file: impl Into<PathBuf>, line: usize, column: usize) -> Self {
        self.subject = Some(SourcePos {
            file: file.into(),
            line,
            column,
        });
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = match self.severity {
            Severity::Warning => "Warning",
            Severity::Error => "Error",
        };
        write!(f, "{word}: {}", self.summary)?;
        if let Some(pos) = &self.subject {
            write!(f, "\n\n  on {} line {}", pos.file.display(), pos.line)?;
        }
        if !self.detail.is_empty() {
            write!(f, "\n\n{}", self.detail)?;
        }
        Ok(())
    }
}

/// A batch of diagnostics; warnings and errors travel together because
/// Terraform shows every problem it found, not only the first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, diag: Diagnostic) {
        self.0.push(diag);
    }

    pub fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// The values of concurrent jobs, or the diagnostics of every job that
    /// failed: like Terraform, one run reports all the problems it found,
    /// not just the first.
    pub fn collect<T, E: Into<Diagnostics>>(
        results: impl IntoIterator<Item = Result<T, E>>,
    ) -> Result<Vec<T>, Diagnostics> {
        let mut diags = Diagnostics::new();
        let mut values = Vec::new();
        for result in results {
            match result {
                Ok(value) => values.push(value),
                Err(err) => diags.extend(err.into()),
            }
        }
        if diags.has_errors() {
            Err(diags)
        } else {
            Ok(values)
        }
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(diag: Diagnostic) -> Self {
        Diagnostics(vec![diag])
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, diag) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{diag}")?;
        }
        Ok(())
    }
}

/// Byte offsets to 1-based line/column, counting columns in characters as
/// HCL does (close enough: HCL counts grapheme clusters): what a reader of
/// hcl-edit's byte spans needs to say where a problem is.
pub struct LineMap<'a> {
    src: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineMap<'a> {
    pub fn new(src: &'a str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineMap { src, line_starts }
    }

    /// The text the offsets are into.
    pub fn src(&self) -> &'a str {
        self.src
    }

    pub fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.src.len());
        let line_index = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let line_start = self.line_starts[line_index];
        let column = self
            .src
            .get(line_start..offset)
            .map_or(0, |text| text.chars().count());
        (line_index + 1, column + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters() {
        let map = LineMap::new("äb\ncd");
        assert_eq!(map.position(2), (1, 2));
        assert_eq!(map.position(4), (2, 1));
        assert_eq!(map.position(99), (2, 3));
    }

    #[test]
    fn collect_keeps_every_error_and_only_errors_fail() {
        let failed: Vec<Result<u8, Diagnostic>> = vec![
            Ok(1),
            Err(Diagnostic::error("first", "")),
            Ok(2),
            Err(Diagnostic::error("second", "")),
        ];
        let diags = Diagnostics::collect(failed).unwrap_err();
        let summaries: Vec<&str> = diags.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(summaries, ["first", "second"]);

        let warned: Vec<Result<u8, Diagnostic>> =
            vec![Ok(1), Err(Diagnostic::warning("only a warning", "")), Ok(2)];
        assert_eq!(Diagnostics::collect(warned), Ok(vec![1, 2]));
    }
}
