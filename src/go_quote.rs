//! Go's `strconv.Quote`, which is what `%q` prints.
//!
//! Terraform quotes user input in its messages with `%q`, and people and
//! tools that match on those messages expect the same escapes, so every
//! quoted name in a message goes through this one function. Go decides what
//! to escape by `unicode.IsPrint`; guessing that from Rust's `is_control` and
//! `is_whitespace` misses format characters such as U+200B and unassigned
//! code points, so [`is_print`] reads the Unicode general category instead.

use std::fmt::Write;

use icu_properties::CodePointMapData;
use icu_properties::props::{GeneralCategory, GeneralCategoryGroup};

/// `strconv.Quote(s)`.
pub fn go_quote(s: &str) -> String {
    go_quote_bytes(s.as_bytes())
}

/// `strconv.Quote` of a Go string, which may hold bytes that are not UTF-8
/// (a checksum file's field, say): each such byte is written as `\xNN`.
pub fn go_quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_escaped(&mut out, c);
        }
        // Go decodes an invalid sequence one byte at a time, so every byte
        // of it is escaped on its own.
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out.push('"');
    out
}

fn push_escaped(out: &mut String, c: char) {
    let code = u32::from(c);
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        c if is_print(c) => out.push(c),
        '\u{07}' => out.push_str("\\a"),
        '\u{08}' => out.push_str("\\b"),
        '\u{0C}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{0B}' => out.push_str("\\v"),
        c if c < ' ' || c == '\u{7F}' => {
            let _ = write!(out, "\\x{code:02x}");
        }
        _ if code < 0x10000 => {
            let _ = write!(out, "\\u{code:04x}");
        }
        _ => {
            let _ = write!(out, "\\U{code:08x}");
        }
    }
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and
/// the ASCII space. Every other space, controls, format characters, private
/// use, surrogates and unassigned code points are not printable.
///
/// The categories come from a newer Unicode version than the Go that built
/// a given Terraform, so a code point assigned since then prints here where
/// that Terraform escapes it.
pub fn is_print(c: char) -> bool {
    const PRINTABLE: GeneralCategoryGroup = GeneralCategoryGroup::Letter
        .union(GeneralCategoryGroup::Mark)
        .union(GeneralCategoryGroup::Number)
        .union(GeneralCategoryGroup::Punctuation)
        .union(GeneralCategoryGroup::Symbol);
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    PRINTABLE.contains(CodePointMapData::<GeneralCategory>::new().get(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs and outputs of `quotetests` in Go's `strconv/quote_test.go`.
    #[test]
    fn strconv_quote_tests() {
        let vectors: [(&[u8], &str); 7] = [
            (b"\x07\x08\x0c\r\n\t\x0b", r#""\a\b\f\r\n\t\v""#),
            (b"\\", r#""\\""#),
            (b"abc\xffdef", r#""abc\xffdef""#),
            ("\u{263a}".as_bytes(), "\"\u{263a}\""),
            ("\u{10ffff}".as_bytes(), r#""\U0010ffff""#),
            (b"\x04", r#""\x04""#),
            (
                "!\u{a0}!\u{2000}!\u{3000}!".as_bytes(),
                r#""!\u00a0!\u2000!\u3000!""#,
            ),
        ];
        for (input, want) in vectors {
            assert_eq!(go_quote_bytes(input), want, "input {input:?}");
        }
    }

    /// The `Quote` column of `quoterunetests` in `strconv/quote_test.go`,
    /// one rune as a string.
    #[test]
    fn strconv_quote_rune_tests() {
        let vectors = [
            ('a', r#""a""#),
            ('\u{07}', r#""\a""#),
            ('\\', r#""\\""#),
            ('\u{ff}', "\"\u{ff}\""),
            ('\u{263a}', "\"\u{263a}\""),
            ('\u{fffd}', "\"\u{fffd}\""),
            ('\u{10ffff}', r#""\U0010ffff""#),
            ('\u{04}', r#""\x04""#),
            ('\u{a0}', r#""\u00a0""#),
            ('\u{2000}', r#""\u2000""#),
            ('\u{3000}', r#""\u3000""#),
        ];
        for (input, want) in vectors {
            assert_eq!(go_quote(&input.to_string()), want, "input {input:?}");
        }
    }

    /// The examples of `Quote`, `AppendQuote` and `IsPrint` in Go's
    /// `strconv/example_test.go`, which the package documentation shows.
    #[test]
    fn strconv_examples() {
        assert_eq!(
            go_quote("\"Fran & Freddie's Diner\t\u{263a}\""),
            r#""\"Fran & Freddie's Diner\t☺\"""#
        );
        assert_eq!(
            go_quote("\"Fran & Freddie's Diner\""),
            r#""\"Fran & Freddie's Diner\"""#
        );
        assert!(is_print('\u{263a}'));
        assert!(!is_print('\u{07}'));
    }

    /// `canbackquotetests` in `strconv/quote_test.go` name the inputs whose
    /// bytes are not all printable: an invalid or truncated sequence, and
    /// the byte order mark (a format character).
    #[test]
    fn invalid_utf8_and_format_characters() {
        assert_eq!(go_quote_bytes(b"\x80"), r#""\x80""#);
        assert_eq!(go_quote_bytes(b"a\xe0\xa0z"), r#""a\xe0\xa0z""#);
        assert_eq!(go_quote("\u{feff}abc"), r#""\ufeffabc""#);
        assert_eq!(go_quote("a\u{200b}b\u{ad}"), r#""a\u200bb\u00ad""#);
        assert_eq!(go_quote("\u{7f}\u{85}"), r#""\x7f\u0085""#);
    }

    #[test]
    fn printable_is_letters_marks_numbers_punctuation_and_symbols() {
        for c in [
            'a',
            ' ',
            '~',
            'é',
            'ド',
            '\u{301}',
            '٣',
            '«',
            '€',
            '\u{1f438}',
        ] {
            assert!(is_print(c), "{c:?}");
        }
        // Control, other spaces, format, private use, unassigned.
        for c in [
            '\u{9f}',
            '\u{2028}',
            '\u{61c}',
            '\u{e000}',
            '\u{378}',
            '\u{e0001}',
        ] {
            assert!(!is_print(c), "{c:?}");
        }
    }
}
