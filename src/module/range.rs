//! Source ranges in Terraform's notation, because several of Terraform's
//! messages embed a range (`versions.tf:3,3-21`) and users jump to it.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, SourcePos, SourceText, known_text};

/// A one-based line/column position; columns count characters, as HCL does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Pos {
    pub line: usize,
    pub column: usize,
}

/// Kept without its text, as [`SourcePos`] is (see there).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "SrcRangeForm", from = "SrcRangeForm")]
pub(super) struct SrcRange {
    pub file: PathBuf,
    pub start: Pos,
    pub end: Pos,
    /// The file's text and the bytes of it, for diagnostics to quote.
    pub text: Option<(SourceText, Range<usize>)>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SrcRangeForm {
    file: PathBuf,
    start: Pos,
    end: Pos,
    bytes: Option<Range<usize>>,
}

impl From<SrcRange> for SrcRangeForm {
    fn from(range: SrcRange) -> Self {
        SrcRangeForm {
            file: range.file,
            start: range.start,
            end: range.end,
            bytes: range.text.map(|(_, bytes)| bytes),
        }
    }
}

impl From<SrcRangeForm> for SrcRange {
    fn from(form: SrcRangeForm) -> Self {
        let text = form
            .bytes
            .and_then(|bytes| Some((known_text(&form.file)?, bytes)));
        SrcRange {
            file: form.file,
            start: form.start,
            end: form.end,
            text,
        }
    }
}

impl SrcRange {
    pub fn source_pos(&self) -> SourcePos {
        match &self.text {
            Some((source, bytes)) => source.pos(bytes.clone()),
            None => SourcePos::new(self.file.clone(), self.start.line, self.start.column),
        }
    }

    /// The smallest range covering both, for constructs whose parts were
    /// located separately (a block's type name through its last label).
    pub fn to(&self, other: &SrcRange) -> SrcRange {
        let text = match (&self.text, &other.text) {
            (Some((source, start)), Some((_, end))) => {
                Some((source.clone(), start.start..end.end.max(start.start)))
            }
            _ => None,
        };
        SrcRange {
            file: self.file.clone(),
            start: self.start,
            end: other.end,
            text,
        }
    }
}

/// Renders like hcl.Range.String(), which Terraform prints inside details.
impl fmt::Display for SrcRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        if self.start.line == self.end.line {
            write!(
                f,
                "{file}:{},{}-{}",
                self.start.line, self.start.column, self.end.column
            )
        } else {
            write!(
                f,
                "{file}:{},{}-{},{}",
                self.start.line, self.start.column, self.end.line, self.end.column
            )
        }
    }
}

pub(super) trait DiagnosticExt {
    fn with_range(self, range: &SrcRange) -> Diagnostic;
}

impl DiagnosticExt for Diagnostic {
    fn with_range(mut self, range: &SrcRange) -> Diagnostic {
        self.subject = Some(range.source_pos());
        self
    }
}

/// Maps byte offsets (what hcl-edit spans and our JSON scanner produce) to
/// line/column positions, keeping the text for diagnostics to quote.
pub(super) struct LineIndex {
    source: SourceText,
}

impl LineIndex {
    pub fn new(file: &Path, src: &str) -> Self {
        LineIndex {
            source: SourceText::new(file, src),
        }
    }

    pub fn pos(&self, offset: usize) -> Pos {
        let (line, column) = self.source.line_column(offset);
        Pos { line, column }
    }

    pub fn range(&self, span: Range<usize>) -> SrcRange {
        SrcRange {
            file: self.source.name().to_path_buf(),
            start: self.pos(span.start),
            end: self.pos(span.end),
            text: Some((self.source.clone(), span)),
        }
    }

    /// A zero-width range at the start of the file, for constructs the parser
    /// gave no span (should not happen for parsed input, but never panic).
    pub fn file_start(&self) -> SrcRange {
        self.range(0..0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters_and_lines() {
        let src = "a = 1\r\nbé = \"x\"\n";
        let index = LineIndex::new(Path::new("main.tf"), src);
        assert_eq!(index.pos(0), Pos { line: 1, column: 1 });
        let offset = src
            .find('=')
            .map(|_| src.rfind('=').unwrap_or(0))
            .unwrap_or(0);
        assert_eq!(index.pos(offset), Pos { line: 2, column: 4 });
        assert_eq!(index.pos(src.len()), Pos { line: 3, column: 1 });
    }

    #[test]
    fn renders_like_hcl_ranges() {
        let one_line = SrcRange {
            file: PathBuf::from("versions.tf"),
            start: Pos { line: 3, column: 3 },
            end: Pos {
                line: 3,
                column: 21,
            },
            text: None,
        };
        assert_eq!(one_line.to_string(), "versions.tf:3,3-21");
        let multi = SrcRange {
            end: Pos { line: 5, column: 2 },
            ..one_line
        };
        assert_eq!(multi.to_string(), "versions.tf:3,3-5,2");
    }
}
