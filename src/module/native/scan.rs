//! The tokens of HCL's native syntax, cut where HCL's own scanner cuts
//! them, so that the reader in `parse.rs` sees exactly the token stream
//! Terraform's parser sees (newlines, comments and template pieces
//! included).

/// What a token is; punctuation is named by what it looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tok {
    OBrace,
    CBrace,
    OBrack,
    CBrack,
    OParen,
    CParen,
    /// `"` opening a quoted template.
    OQuote,
    CQuote,
    /// `<<EOT` or `<<-EOT` and its newline.
    OHeredoc,
    /// The line that ends a heredoc, without its newline.
    CHeredoc,
    Star,
    Slash,
    Plus,
    Minus,
    Percent,
    Equal,
    EqualOp,
    NotEqual,
    Less,
    LessEq,
    Greater,
    GreaterEq,
    And,
    Or,
    Bang,
    Dot,
    Comma,
    Ellipsis,
    FatArrow,
    Question,
    Colon,
    /// `::` between the parts of a provider function's name (HCL 2.20,
    /// Terraform 1.8).
    DoubleColon,
    /// `${` or `${~`.
    TemplateInterp,
    /// `%{` or `%{~`.
    TemplateControl,
    /// `}` or `~}` closing a template sequence.
    TemplateSeqEnd,
    /// Literal text of a quoted template, escapes still in it.
    QuotedLit,
    /// Literal text of a heredoc.
    StringLit,
    NumberLit,
    Ident,
    /// A comment; a line comment includes its newline.
    Comment,
    Newline,
    Eof,
    /// A character HCL never accepts where it stands.
    Bad(BadToken),
}

/// The characters HCL's scanner recognises only to reject them, each with
/// its own message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BadToken {
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor,
    BitwiseNot,
    Backtick,
    Apostrophe,
    Semicolon,
    QuotedNewline,
    CurlyQuote,
    Other,
}

impl BadToken {
    /// HCL's summary and detail for this token.
    pub fn message(self) -> (&'static str, &'static str) {
        match self {
            BadToken::BitwiseAnd => (
                "Unsupported operator",
                "Bitwise operators are not supported. Did you mean boolean AND (\"&&\")?",
            ),
            BadToken::BitwiseOr => (
                "Unsupported operator",
                "Bitwise operators are not supported. Did you mean boolean OR (\"||\")?",
            ),
            BadToken::BitwiseXor => (
                "Unsupported operator",
                "Bitwise operators are not supported.",
            ),
            BadToken::BitwiseNot => (
                "Unsupported operator",
                "Bitwise operators are not supported. Did you mean boolean NOT (\"!\")?",
            ),
            BadToken::Backtick => (
                "Invalid character",
                "The \"`\" character is not valid. To create a multi-line string, use the \"heredoc\" syntax, like \"<<EOT\".",
            ),
            BadToken::Apostrophe => (
                "Invalid character",
                "Single quotes are not valid. Use double quotes (\") to enclose strings.",
            ),
            BadToken::Semicolon => (
                "Invalid character",
                "The \";\" character is not valid. Use newlines to separate arguments and blocks, and commas to separate items in collection values.",
            ),
            BadToken::QuotedNewline => (
                "Invalid multi-line string",
                "Quoted strings may not be split over multiple lines. To produce a multi-line string, either use the \\n escape to represent a newline character or use the \"heredoc\" multi-line template syntax.",
            ),
            BadToken::CurlyQuote => (
                "Invalid character",
                "\"Curly quotes\" are not valid here. These can sometimes be inadvertently introduced when sharing code via documents or discussion forums. It might help to replace the character with a \"straight quote\".",
            ),
            BadToken::Other => (
                "Invalid character",
                "This character is not used within the language.",
            ),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
}

/// Where the scanner is: HCL's scanner is a stack of these, entered by
/// `"`, `<<EOT` and `${`/`%{`, left by their closers.
enum Mode<'a> {
    /// Expressions and bodies; `braces` is the brace depth at which a `}`
    /// ends the template sequence that entered this mode (none at the top).
    Main {
        closes_at: Option<usize>,
    },
    Quoted,
    Heredoc {
        marker: &'a str,
        at_line_start: bool,
    },
}

/// Cuts `src` into tokens, ending with `Eof`.
pub(super) fn scan(src: &str) -> Vec<Token> {
    let mut scanner = Scanner {
        src,
        bytes: src.as_bytes(),
        pos: 0,
        braces: 0,
        modes: vec![Mode::Main { closes_at: None }],
        tokens: Vec::with_capacity(src.len() / 4),
    };
    scanner.run();
    scanner.tokens
}

struct Scanner<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    braces: usize,
    modes: Vec<Mode<'a>>,
    tokens: Vec<Token>,
}

impl<'a> Scanner<'a> {
    fn push(&mut self, tok: Tok, start: usize, end: usize) {
        self.tokens.push(Token { tok, start, end });
        self.pos = end;
    }

    fn at(&self, offset: usize) -> u8 {
        self.bytes.get(offset).copied().unwrap_or(0)
    }

    fn run(&mut self) {
        while self.pos < self.bytes.len() {
            match self.modes.last() {
                Some(Mode::Main { .. }) | None => self.main_token(),
                Some(Mode::Quoted) => self.quoted_token(),
                Some(Mode::Heredoc { .. }) => self.heredoc_token(),
            }
        }
        let end = self.bytes.len();
        self.tokens.push(Token {
            tok: Tok::Eof,
            start: end,
            end,
        });
    }

    fn main_token(&mut self) {
        let start = self.pos;
        let byte = self.bytes[start];
        let next = self.at(start + 1);
        let single = |tok| (tok, start + 1);
        let (tok, end) = match byte {
            b' ' | b'\t' => {
                let mut end = start + 1;
                while matches!(self.at(end), b' ' | b'\t') {
                    end += 1;
                }
                self.pos = end;
                return;
            }
            b'0'..=b'9' => (Tok::NumberLit, self.number_end(start)),
            b'#' => (Tok::Comment, self.line_comment_end(start + 1)),
            b'/' if next == b'/' => (Tok::Comment, self.line_comment_end(start + 2)),
            b'/' if next == b'*' => match self.src[start + 2..].find("*/") {
                Some(close) => (Tok::Comment, start + 2 + close + 2),
                None => single(Tok::Slash),
            },
            b'\n' => single(Tok::Newline),
            b'\r' if next == b'\n' => (Tok::Newline, start + 2),
            b':' if next == b':' => (Tok::DoubleColon, start + 2),
            b'=' if next == b'=' => (Tok::EqualOp, start + 2),
            b'=' if next == b'>' => (Tok::FatArrow, start + 2),
            b'!' if next == b'=' => (Tok::NotEqual, start + 2),
            b'>' if next == b'=' => (Tok::GreaterEq, start + 2),
            b'<' if next == b'=' => (Tok::LessEq, start + 2),
            b'&' if next == b'&' => (Tok::And, start + 2),
            b'|' if next == b'|' => (Tok::Or, start + 2),
            b'.' if next == b'.' && self.at(start + 2) == b'.' => (Tok::Ellipsis, start + 3),
            b'<' if next == b'<' => match self.heredoc_opener(start) {
                Some((end, marker)) => {
                    self.push(Tok::OHeredoc, start, end);
                    self.modes.push(Mode::Heredoc {
                        marker,
                        at_line_start: true,
                    });
                    return;
                }
                None => single(Tok::Less),
            },
            b'{' => {
                self.braces += 1;
                single(Tok::OBrace)
            }
            b'}' => {
                self.close_brace(start, start + 1, false);
                return;
            }
            b'~' if next == b'}' => {
                self.close_brace(start, start + 2, true);
                return;
            }
            b'"' => {
                self.push(Tok::OQuote, start, start + 1);
                self.modes.push(Mode::Quoted);
                return;
            }
            b'[' => single(Tok::OBrack),
            b']' => single(Tok::CBrack),
            b'(' => single(Tok::OParen),
            b')' => single(Tok::CParen),
            b'.' => single(Tok::Dot),
            b',' => single(Tok::Comma),
            b'*' => single(Tok::Star),
            b'/' => single(Tok::Slash),
            b'%' => single(Tok::Percent),
            b'+' => single(Tok::Plus),
            b'-' => single(Tok::Minus),
            b'=' => single(Tok::Equal),
            b'<' => single(Tok::Less),
            b'>' => single(Tok::Greater),
            b'!' => single(Tok::Bang),
            b'?' => single(Tok::Question),
            b':' => single(Tok::Colon),
            b'&' => single(Tok::Bad(BadToken::BitwiseAnd)),
            b'|' => single(Tok::Bad(BadToken::BitwiseOr)),
            b'^' => single(Tok::Bad(BadToken::BitwiseXor)),
            b'~' => single(Tok::Bad(BadToken::BitwiseNot)),
            b'`' => single(Tok::Bad(BadToken::Backtick)),
            b'\'' => single(Tok::Bad(BadToken::Apostrophe)),
            b';' => single(Tok::Bad(BadToken::Semicolon)),
            _ => {
                let ch = self.src[start..].chars().next().unwrap_or('\0');
                let end = start + ch.len_utf8();
                if ch == '_' || unicode_ident::is_xid_start(ch) {
                    (Tok::Ident, self.ident_end(end))
                } else if ch == '\u{201c}' || ch == '\u{201d}' {
                    (Tok::Bad(BadToken::CurlyQuote), end)
                } else {
                    (Tok::Bad(BadToken::Other), end)
                }
            }
        };
        self.push(tok, start, end);
    }

    /// A `}` ends the template sequence that opened at this brace depth;
    /// any other is an object's or block's. `~}` always ends a sequence.
    fn close_brace(&mut self, start: usize, end: usize, strip: bool) {
        let closes = matches!(self.modes.last(), Some(Mode::Main { closes_at: Some(depth) }) if *depth == self.braces);
        self.braces = self.braces.saturating_sub(1);
        if closes {
            self.modes.pop();
            self.push(Tok::TemplateSeqEnd, start, end);
        } else if strip {
            self.push(Tok::TemplateSeqEnd, start, end);
        } else {
            self.push(Tok::CBrace, start, end);
        }
    }

    fn ident_end(&self, mut end: usize) -> usize {
        for ch in self.src[end..].chars() {
            if ch == '-' || unicode_ident::is_xid_continue(ch) {
                end += ch.len_utf8();
            } else {
                break;
            }
        }
        end
    }

    /// A digit and what may continue a number (digits, dots, exponents),
    /// never ending on a dot, as HCL's scanner cuts numbers; whether the
    /// text is a valid number is the parser's question.
    fn number_end(&self, start: usize) -> usize {
        let mut end = start + 1;
        let mut last_good = end;
        loop {
            match self.at(end) {
                b'0'..=b'9' => end += 1,
                b'.' => {
                    end += 1;
                    continue;
                }
                b'e' | b'E' => {
                    let sign = usize::from(matches!(self.at(end + 1), b'+' | b'-'));
                    if self.at(end + 1 + sign).is_ascii_digit() {
                        end += 2 + sign;
                    } else {
                        break;
                    }
                }
                _ => break,
            }
            last_good = end;
        }
        last_good
    }

    fn line_comment_end(&self, from: usize) -> usize {
        match self.src[from..].find('\n') {
            Some(newline) => from + newline + 1,
            None => self.bytes.len(),
        }
    }

    /// `<<` or `<<-`, an identifier and a newline open a heredoc.
    fn heredoc_opener(&self, start: usize) -> Option<(usize, &'a str)> {
        let src: &'a str = self.src;
        let mut ident_start = start + 2;
        if self.at(ident_start) == b'-' {
            ident_start += 1;
        }
        let first = src[ident_start..].chars().next()?;
        if first != '_' && !unicode_ident::is_xid_start(first) {
            return None;
        }
        let ident_end = self.ident_end(ident_start + first.len_utf8());
        let end = match self.at(ident_end) {
            b'\n' => ident_end + 1,
            b'\r' if self.at(ident_end + 1) == b'\n' => ident_end + 2,
            _ => return None,
        };
        Some((end, &src[ident_start..ident_end]))
    }

    /// `${`/`%{` (with an optional `~`) start a sequence scanned as
    /// expressions until its closing brace.
    fn template_sequence(&mut self, start: usize) -> bool {
        let tok = match (self.at(start), self.at(start + 1)) {
            (b'$', b'{') => Tok::TemplateInterp,
            (b'%', b'{') => Tok::TemplateControl,
            _ => return false,
        };
        let end = start + 2 + usize::from(self.at(start + 2) == b'~');
        self.push(tok, start, end);
        if let Some(Mode::Heredoc { at_line_start, .. }) = self.modes.last_mut() {
            *at_line_start = false;
        }
        self.braces += 1;
        self.modes.push(Mode::Main {
            closes_at: Some(self.braces),
        });
        true
    }

    /// Where literal template text starting at `start` ends: before a
    /// sequence opener, a line end, or (quoted) the closing quote.
    fn literal_end(&self, start: usize, quoted: bool) -> usize {
        let mut end = start;
        while end < self.bytes.len() {
            match self.bytes[end] {
                b'\n' | b'\r' => break,
                b'"' if quoted => break,
                b'\\' if quoted => {
                    // An escape takes the next character with it, whatever
                    // it is, except a line end.
                    match self.src[end + 1..].chars().next() {
                        Some('\n' | '\r') | None => end += 1,
                        Some(ch) => end += 1 + ch.len_utf8(),
                    }
                }
                b'$' | b'%' if self.at(end + 1) == b'{' => {
                    if end > start {
                        break;
                    }
                    // `$${` and `%%{` are escapes: literal text.
                    end += 1;
                }
                b'$' | b'%' if self.at(end + 1) == self.bytes[end] && self.at(end + 2) == b'{' => {
                    end += 3
                }
                _ => end += 1,
            }
        }
        end
    }

    fn quoted_token(&mut self) {
        let start = self.pos;
        match self.bytes[start] {
            b'"' => {
                self.modes.pop();
                self.push(Tok::CQuote, start, start + 1);
            }
            b'\n' | b'\r' => {
                let mut end = start;
                while matches!(self.at(end), b'\n' | b'\r') {
                    end += 1;
                }
                self.push(Tok::Bad(BadToken::QuotedNewline), start, end);
            }
            _ => {
                if !self.template_sequence(start) {
                    let end = self.literal_end(start, true);
                    self.push(Tok::QuotedLit, start, end.max(start + 1));
                }
            }
        }
    }

    fn heredoc_token(&mut self) {
        let start = self.pos;
        if self.template_sequence(start) {
            return;
        }
        let Some(Mode::Heredoc {
            marker,
            at_line_start,
        }) = self.modes.last_mut()
        else {
            return;
        };
        let marker: &'a str = marker;
        let line_start = std::mem::replace(at_line_start, false);
        let end = self.literal_end(start, false);
        let newline = match (self.at(end), self.at(end + 1)) {
            (b'\n', _) => Some(end + 1),
            (b'\r', b'\n') => Some(end + 2),
            (b'\r', _) => {
                // A carriage return alone ends no line: HCL's scanner stops
                // here and the rest of the file is one invalid token.
                if end > start {
                    self.push(Tok::StringLit, start, end);
                }
                let rest = self.bytes.len();
                self.push(Tok::Bad(BadToken::Other), end, rest);
                return;
            }
            _ => None,
        };
        let Some(line_end) = newline else {
            self.push(Tok::StringLit, start, end);
            return;
        };
        if line_start && self.src[start..end].trim() == marker {
            self.modes.pop();
            self.push(Tok::CHeredoc, start, end);
            self.push(Tok::Newline, end, line_end);
            return;
        }
        self.push(Tok::StringLit, start, line_end);
        if let Some(Mode::Heredoc { at_line_start, .. }) = self.modes.last_mut() {
            *at_line_start = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        scan(src).iter().map(|token| token.tok).collect()
    }

    #[test]
    fn numbers_never_end_on_a_dot() {
        assert_eq!(
            kinds("a.0.b 1.5e+3 1e"),
            [
                Tok::Ident,
                Tok::Dot,
                Tok::NumberLit,
                Tok::Dot,
                Tok::Ident,
                Tok::NumberLit,
                Tok::NumberLit,
                Tok::Ident,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn templates_nest_and_close_at_their_own_brace() {
        assert_eq!(
            kinds("\"a${ {b = 1} }$${c}\""),
            [
                Tok::OQuote,
                Tok::QuotedLit,
                Tok::TemplateInterp,
                Tok::OBrace,
                Tok::Ident,
                Tok::Equal,
                Tok::NumberLit,
                Tok::CBrace,
                Tok::TemplateSeqEnd,
                Tok::QuotedLit,
                Tok::CQuote,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn heredocs_end_at_their_marker_line() {
        assert_eq!(
            kinds("<<-EOT\n  x ${y}\n  EOT\n"),
            [
                Tok::OHeredoc,
                Tok::StringLit,
                Tok::TemplateInterp,
                Tok::Ident,
                Tok::TemplateSeqEnd,
                Tok::StringLit,
                Tok::CHeredoc,
                Tok::Newline,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn line_comments_keep_their_newline() {
        let tokens = scan("# a\n/* b\n */\n");
        assert_eq!(tokens[0].tok, Tok::Comment);
        assert_eq!(tokens[0].end, 4);
        assert_eq!(tokens[1].tok, Tok::Comment);
        assert_eq!(tokens[2].tok, Tok::Newline);
    }
}
