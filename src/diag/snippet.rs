//! The source lines a diagnostic quotes and the block it is in, computed
//! the way Terraform computes them (`NewDiagnostic` in its
//! `internal/command/views/json/diagnostic.go`), so that `on main.tf line 5,
//! in terraform:` and `-json`'s `snippet` say what Terraform's would.

use std::ops::Range;

use super::SourceText;
use crate::go_quote::go_quote;

/// A place in a file, as `-json`'s `range` gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnippetPos {
    pub line: usize,
    pub column: usize,
    /// Zero-based offset into the file.
    pub byte: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snippet {
    /// The range marked, never empty: Terraform widens an empty range to
    /// the one byte after it.
    pub start: SnippetPos,
    pub end: SnippetPos,
    /// The top-level block the range is in (`terraform`, `module "vpc"`),
    /// or for JSON the path of objects to it (`terraform.required_providers`).
    pub context: Option<String>,
    /// The lines the range covers, without their line breaks.
    pub code: String,
    pub start_line: usize,
    /// Byte offsets into `code` of the marked part.
    pub highlight_start: usize,
    pub highlight_end: usize,
}

impl Snippet {
    pub fn new(source: &SourceText, bytes: Range<usize>) -> Snippet {
        let text = source.text();
        let start_byte = bytes.start.min(text.len());
        let end_byte = bytes.end.clamp(start_byte, text.len());
        let start = position(source, start_byte);
        let end = if end_byte == start_byte {
            SnippetPos {
                column: start.column + 1,
                byte: start.byte + 1,
                ..start
            }
        } else {
            position(source, end_byte)
        };

        // The lines the range overlaps; like HCL's range overlap test, an
        // empty line overlaps nothing.
        let mut code = String::new();
        let mut code_start = None;
        let mut line_start = 0;
        for line in text.split_inclusive('\n') {
            let content = line.trim_end_matches('\n').trim_end_matches('\r');
            let line_end = line_start + content.len();
            if !content.is_empty() && line_start < end.byte && line_end > start.byte {
                if code_start.is_some() {
                    code.push('\n');
                }
                code_start.get_or_insert(line_start);
                code.push_str(content);
            }
            line_start += line.len();
        }
        let code_start = code_start.unwrap_or(0);
        let highlight_start = start.byte.saturating_sub(code_start).min(code.len());
        let highlight_end =
            (start.byte.saturating_sub(code_start) + (end.byte - start.byte)).min(code.len());

        // HCL looks for the block that holds the byte before the range, so
        // a range that starts a block is not "in" it.
        let context = start.byte.checked_sub(1).and_then(|offset| {
            if source.name().to_string_lossy().ends_with(".json") {
                json_context(text, offset)
            } else {
                native_context(text, offset)
            }
        });

        Snippet {
            start,
            end,
            context,
            code,
            start_line: start.line,
            highlight_start,
            highlight_end,
        }
    }
}

fn position(source: &SourceText, byte: usize) -> SnippetPos {
    let (line, column) = source.line_column(byte);
    SnippetPos { line, column, byte }
}

/// The header of the top-level block holding `offset`, as HCL's
/// `ContextString` writes it: the type, then each label Go-quoted.
///
/// Written by hand because it must work on files that do not parse (a
/// syntax error is reported inside its block, as HCL's recovering parser
/// does), which hcl-edit, having no error recovery, cannot do. Only the
/// top level matters, so this follows braces, strings, comments and
/// heredocs, nothing more.
fn native_context(text: &str, offset: usize) -> Option<String> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    // The words of the line at the top level so far, and where it began.
    let mut header: Vec<String> = Vec::new();
    let mut header_start = None;
    let mut is_attribute = false;
    // The block open at the top level: where it starts and its header.
    let mut open: Option<(usize, Vec<String>)> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                if depth == 0 {
                    header.clear();
                    header_start = None;
                    is_attribute = false;
                }
                i += 1;
            }
            b'#' => i = line_end(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'/') => i = line_end(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |end| i + 2 + end + 2);
            }
            b'"' => {
                let (end, value) = quoted(text, i);
                if depth == 0 {
                    header_start.get_or_insert(i);
                    header.push(value);
                }
                i = end;
            }
            b'<' if bytes.get(i + 1) == Some(&b'<') => i = heredoc_end(text, i),
            b'{' => {
                if depth == 0 && !is_attribute && !header.is_empty() {
                    open = Some((header_start.unwrap_or(i), std::mem::take(&mut header)));
                }
                depth += 1;
                i += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
                if depth == 0 {
                    if let Some((start, header)) = open.take()
                        && (start..i).contains(&offset)
                    {
                        return Some(block_header(&header));
                    }
                    header.clear();
                    header_start = None;
                    is_attribute = false;
                }
            }
            b'=' => {
                if depth == 0 {
                    is_attribute = true;
                }
                i += 1;
            }
            _ if b.is_ascii_alphabetic() || b == b'_' => {
                let end = i + bytes[i..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'-')
                    .count();
                if depth == 0 {
                    header_start.get_or_insert(i);
                    header.push(text[i..end].to_owned());
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    // A block still open at the end of the file runs to its end.
    open.filter(|(start, _)| *start <= offset)
        .map(|(_, header)| block_header(&header))
}

fn block_header(words: &[String]) -> String {
    let mut out = words.first().cloned().unwrap_or_default();
    for label in words.iter().skip(1) {
        out.push(' ');
        out.push_str(&go_quote(label));
    }
    out
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |n| from + n)
}

/// The end of the quoted string at `start` and its value (escapes
/// undone where simple; a template sequence's text kept as written).
fn quoted(text: &str, start: usize) -> (usize, String) {
    let bytes = text.as_bytes();
    let mut value = String::new();
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return (i + 1, value),
            b'\n' => return (i, value),
            b'\\' => {
                match bytes.get(i + 1) {
                    Some(b'n') => value.push('\n'),
                    Some(b't') => value.push('\t'),
                    Some(b'r') => value.push('\r'),
                    Some(&c) if c.is_ascii() => value.push(c as char),
                    _ => {}
                }
                i += 2;
            }
            b'$' | b'%' if bytes.get(i + 1) == Some(&b'{') => {
                let end = template_end(text, i + 2);
                value.push_str(&text[i..end]);
                i = end;
            }
            _ => {
                let c = text[i..].chars().next().unwrap_or('\u{fffd}');
                value.push(c);
                i += c.len_utf8();
            }
        }
    }
    (bytes.len(), value)
}

/// The end of a `${ … }` sequence whose body starts at `from`, skipping
/// the strings inside it.
fn template_end(text: &str, from: usize) -> usize {
    let bytes = text.as_bytes();
    let mut depth = 1;
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = quoted(text, i).0,
            b'{' => {
                depth += 1;
                i += 1;
            }
            b'}' => {
                depth -= 1;
                i += 1;
                if depth == 0 {
                    return i;
                }
            }
            b'\n' => return i,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The end of the heredoc at `start` (`<<EOT` or `<<-EOT`): the end of
/// the line that closes it.
fn heredoc_end(text: &str, start: usize) -> usize {
    let rest = &text[start + 2..];
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let marker: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    if marker.is_empty() {
        return start + 2;
    }
    let body_start = line_end(text.as_bytes(), start);
    let mut pos = body_start;
    for line in text[body_start..].split_inclusive('\n').skip(1) {
        pos += line.len();
        if line.trim() == marker {
            return pos;
        }
    }
    text.len()
}

/// The path of JSON objects and arrays holding `offset`, as HCL's JSON
/// `ContextString` writes it (`terraform.required_providers`, `a[0].b`).
///
/// Written by hand for the reason [`native_context`] is: it must work on
/// a file with a syntax error after the offset.
fn json_context(text: &str, offset: usize) -> Option<String> {
    enum Frame {
        Object { key: Option<String> },
        Array { index: usize },
    }
    let bytes = text.as_bytes();
    let mut frames: Vec<(Frame, String)> = Vec::new();
    let mut i = 0;
    while i <= offset && i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let (end, value) = quoted(text, i);
                if let Some((Frame::Object { key }, _)) = frames.last_mut()
                    && key.is_none()
                {
                    *key = Some(value);
                }
                i = end;
                continue;
            }
            b',' => match frames.last_mut() {
                Some((Frame::Object { key }, _)) => *key = None,
                Some((Frame::Array { index }, _)) => *index += 1,
                None => {}
            },
            open @ (b'{' | b'[') => {
                let step = match frames.last() {
                    Some((Frame::Object { key }, _)) => {
                        format!(".{}", key.clone().unwrap_or_default())
                    }
                    Some((Frame::Array { index }, _)) => format!("[{index}]"),
                    None => String::new(),
                };
                let frame = if open == b'{' {
                    Frame::Object { key: None }
                } else {
                    Frame::Array { index: 0 }
                };
                frames.push((frame, step));
            }
            b'}' | b']' if i < offset => {
                frames.pop();
            }
            _ => {}
        }
        i += 1;
    }
    let path: String = frames.iter().map(|(_, step)| step.as_str()).collect();
    let path = path.strip_prefix('.').unwrap_or(&path);
    (!path.is_empty()).then(|| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snippet(name: &str, text: &str, bytes: Range<usize>) -> Snippet {
        Snippet::new(&SourceText::new(name, text), bytes)
    }

    #[test]
    fn quotes_the_lines_and_names_the_top_level_block() {
        let text = "terraform {\n  required_providers {\n    null = {\n      version = \">= 1.0 and bogus\"\n    }\n  }\n}\n";
        let start = text.find("\">=").unwrap();
        let end = text.find("bogus\"").unwrap() + 6;
        let s = snippet("main.tf", text, start..end);
        assert_eq!(s.context.as_deref(), Some("terraform"));
        assert_eq!(s.code, "      version = \">= 1.0 and bogus\"");
        assert_eq!(s.start_line, 4);
        assert_eq!(
            &s.code[s.highlight_start..s.highlight_end],
            "\">= 1.0 and bogus\""
        );
        assert_eq!((s.start.line, s.start.column, s.end.column), (4, 17, 35));
    }

    #[test]
    fn a_range_that_starts_a_block_is_not_in_it() {
        let text = "module \"vpc\" {\n  source = \"x\"\n}\n";
        assert_eq!(snippet("main.tf", text, 0..12).context, None);
        let source = text.find("\"x\"").unwrap();
        assert_eq!(
            snippet("main.tf", text, source..source + 3)
                .context
                .as_deref(),
            Some("module \"vpc\"")
        );
    }

    #[test]
    fn blocks_are_found_past_strings_comments_and_heredocs() {
        let text = "# {\nlocals {\n  a = \"}${x(\"}\")}\"\n  b = <<EOT\n}\nEOT\n}\nresource \"a\" \"b\" {\n  c = 1 /* } */\n}\n";
        let c = text.find("c = 1").unwrap();
        assert_eq!(
            snippet("main.tf", text, c..c + 5).context.as_deref(),
            Some("resource \"a\" \"b\"")
        );
        let b = text.find("b = ").unwrap();
        assert_eq!(
            snippet("main.tf", text, b..b + 1).context.as_deref(),
            Some("locals")
        );
    }

    #[test]
    fn an_unclosed_block_runs_to_the_end() {
        let text = "terraform {\n  required_providers {\n";
        let at = text.find("required").unwrap();
        assert_eq!(
            snippet("main.tf", text, at..at).context.as_deref(),
            Some("terraform")
        );
    }

    #[test]
    fn empty_ranges_mark_one_byte_and_multi_line_ranges_every_line() {
        let s = snippet("main.tf", "a = 1\n", 4..4);
        assert_eq!((s.start.byte, s.end.byte, s.end.column), (4, 5, 6));
        assert_eq!(&s.code[s.highlight_start..s.highlight_end], "1");

        let s = snippet("main.tf", "x {\n  a = 1\n\n}\n", 0..15);
        assert_eq!(s.code, "x {\n  a = 1\n}");
    }

    #[test]
    fn json_context_is_the_path_of_objects() {
        let text = "{\n  \"terraform\": {\n    \"required_providers\": {\n      \"null\": { \"version\": \"bogus\" }\n    }\n  },\n  \"module\": [{\"a\": 1}, {\"b\": 2}]\n}\n";
        let at = text.find("\"bogus\"").unwrap();
        assert_eq!(
            snippet("main.tf.json", text, at..at + 7).context.as_deref(),
            Some("terraform.required_providers.null")
        );
        let at = text.find("\"b\"").unwrap();
        assert_eq!(
            snippet("main.tf.json", text, at..at + 3).context.as_deref(),
            Some("module[1]")
        );
    }
}
