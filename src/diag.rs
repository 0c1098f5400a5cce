//! Diagnostics in Terraform's shape (summary, detail, optional source position),
//! so every stage can report several problems at once and the UI renders them
//! the way Terraform users already know.

mod snippet;

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use snippet::{Snippet, SnippetPos};

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Severity {
    Warning,
    Error,
}

/// Kept (by a reading of a module kept across runs) as its file, line and
/// column and the bytes of the quote; read back, the quote gets the text of
/// the file as it is now ([`with_known_texts`]), which the reading is known
/// to have come from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "SourcePosForm", from = "SourcePosForm")]
pub struct SourcePos {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    /// The text the position is in and the bytes of it the problem is
    /// about, so the diagnostic can quote the line and name the enclosing
    /// block as Terraform does; `None` where no text is at hand.
    pub quote: Option<Quote>,
}

impl SourcePos {
    /// A position without text to quote.
    pub fn new(file: impl Into<PathBuf>, line: usize, column: usize) -> SourcePos {
        SourcePos {
            file: file.into(),
            line,
            column,
            quote: None,
        }
    }
}

impl SourcePos {
    /// Quotes `source` at this position if it is about that file and has
    /// no quote yet.
    pub fn quote_from(&mut self, source: &SourceText) {
        if self.quote.is_none() && self.file == source.name() {
            let start = source.offset_of(self.line, self.column);
            self.quote = Some(Quote {
                source: source.clone(),
                bytes: start..start,
            });
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SourcePosForm {
    file: PathBuf,
    line: usize,
    column: usize,
    quoted: Option<Range<usize>>,
}

impl From<SourcePos> for SourcePosForm {
    fn from(pos: SourcePos) -> Self {
        SourcePosForm {
            file: pos.file,
            line: pos.line,
            column: pos.column,
            quoted: pos.quote.map(|quote| quote.bytes),
        }
    }
}

impl From<SourcePosForm> for SourcePos {
    fn from(form: SourcePosForm) -> Self {
        let quote = form.quoted.and_then(|bytes| {
            Some(Quote {
                source: known_text(&form.file)?,
                bytes,
            })
        });
        SourcePos {
            file: form.file,
            line: form.line,
            column: form.column,
            quote,
        }
    }
}

thread_local! {
    /// The texts [`with_known_texts`] lends to what is read back meanwhile.
    static KNOWN_TEXTS: std::cell::RefCell<Vec<SourceText>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `read_back` with `texts` at hand for the positions and ranges it
/// reads back to quote. A kept reading holds no text (the files are read
/// anyway, to know the reading is theirs), and serde's derived readers take
/// no argument to hand the texts to: this thread-local is that argument.
pub fn with_known_texts<R>(texts: &[SourceText], read_back: impl FnOnce() -> R) -> R {
    let previous = KNOWN_TEXTS.with(|known| known.replace(texts.to_vec()));
    let result = read_back();
    KNOWN_TEXTS.with(|known| *known.borrow_mut() = previous);
    result
}

/// The text of `file` among those [`with_known_texts`] lent, if any.
pub fn known_text(file: &Path) -> Option<SourceText> {
    KNOWN_TEXTS.with(|known| {
        known
            .borrow()
            .iter()
            .find(|text| text.name() == file)
            .cloned()
    })
}

/// Bytes of a file's text a diagnostic is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quote {
    pub source: SourceText,
    pub bytes: Range<usize>,
}

/// The text of a configuration file (`.tf`, `.tf.json`, the lock file, the
/// CLI configuration, the policy file), shared by every diagnostic about
/// it, like the file sources Terraform keeps to render its diagnostics.
#[derive(Clone)]
pub struct SourceText {
    inner: Arc<SourceInner>,
}

struct SourceInner {
    name: PathBuf,
    text: String,
    line_starts: Vec<usize>,
}

impl SourceText {
    /// `name` is the file as diagnostics name it (relative to the working
    /// directory for configuration files); its ending says whether the
    /// text is JSON, as it does for Terraform.
    pub fn new(name: impl Into<PathBuf>, text: impl Into<String>) -> SourceText {
        let text = text.into();
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceText {
            inner: Arc::new(SourceInner {
                name: name.into(),
                text,
                line_starts,
            }),
        }
    }

    pub fn name(&self) -> &Path {
        &self.inner.name
    }

    pub fn text(&self) -> &str {
        &self.inner.text
    }

    /// The one-based line and column (in characters) of a byte offset.
    pub fn line_column(&self, offset: usize) -> (usize, usize) {
        let text = self.text();
        let offset = offset.min(text.len());
        let line_index = self
            .inner
            .line_starts
            .partition_point(|&start| start <= offset)
            - 1;
        let line_start = self.inner.line_starts[line_index];
        let column = text
            .get(line_start..offset)
            .map_or(offset - line_start, |part| part.chars().count());
        (line_index + 1, column + 1)
    }

    /// The byte offset of a one-based line and column (in characters), for
    /// readers that keep only line and column.
    pub fn offset_of(&self, line: usize, column: usize) -> usize {
        let text = self.text();
        let Some(&line_start) = self.inner.line_starts.get(line.saturating_sub(1)) else {
            return text.len();
        };
        let line_text = &text[line_start..];
        let line_text = &line_text[..line_text.find('\n').unwrap_or(line_text.len())];
        line_start
            + line_text
                .char_indices()
                .nth(column.saturating_sub(1))
                .map_or(line_text.len(), |(i, _)| i)
    }

    /// The position of `bytes` in this text, quoting it.
    pub fn pos(&self, bytes: Range<usize>) -> SourcePos {
        let (line, column) = self.line_column(bytes.start);
        SourcePos {
            file: self.inner.name.clone(),
            line,
            column,
            quote: Some(Quote {
                source: self.clone(),
                bytes,
            }),
        }
    }
}

/// Two texts are the same when they are the same file with the same text.
impl PartialEq for SourceText {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.name == other.inner.name && self.inner.text == other.inner.text)
    }
}

impl Eq for SourceText {}

/// The name only: a whole file in every failed assertion helps no one.
impl fmt::Debug for SourceText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SourceText({})", self.inner.name.display())
    }
}

impl fmt::Display for SourcePos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
        self.subject = Some(SourcePos::new(file, line, column));
        self
    }

    /// At a position kept from reading a file (quoting it if it can).
    pub fn at_pos(mut self, pos: &SourcePos) -> Self {
        self.subject = Some(pos.clone());
        self
    }

    /// About `bytes` of `source`: rendered with the enclosing block and the
    /// lines quoted, as Terraform renders its configuration errors.
    pub fn in_source(mut self, source: &SourceText, bytes: Range<usize>) -> Self {
        self.subject = Some(source.pos(bytes));
        self
    }

    /// The subject's text, where it has one: what Terraform shows under
    /// `on FILE line N` and writes as `-json`'s `snippet`.
    pub fn snippet(&self) -> Option<Snippet> {
        self.subject
            .as_ref()?
            .quote
            .as_ref()
            .map(|quote| Snippet::new(&quote.source, quote.bytes.clone()))
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

    /// Gives every diagnostic about `source`'s file that has only a line
    /// and column the text to quote, for readers that keep no byte spans:
    /// the character at the position is marked.
    pub fn quote_from(&mut self, source: &SourceText) {
        for diag in &mut self.0 {
            if let Some(pos) = &mut diag.subject {
                pos.quote_from(source);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters() {
        let source = SourceText::new("main.tf", "äb\ncd");
        assert_eq!(source.line_column(2), (1, 2));
        assert_eq!(source.line_column(4), (2, 1));
        assert_eq!(source.line_column(99), (2, 3));
        assert_eq!(source.offset_of(1, 2), 2);
        assert_eq!(source.offset_of(2, 3), 6);
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
