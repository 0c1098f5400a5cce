//! Reader for the two syntaxes of CLI configuration files: HCL 1 native
//! syntax and JSON.
//!
//! Why hand-written: Terraform reads these files with HCL 1, and no Rust
//! crate parses HCL 1. hcl-rs parses HCL 2, which rejects HCL 1 forms that
//! real `.terraformrc` files rely on — above all the documented
//! `dev_overrides { "hashicorp/null" = "/path" }` with quoted attribute
//! names — so any file using them would be unreadable. The subset CLI config
//! files use is small (blocks with string labels, `=` attributes, strings
//! with escapes, heredocs, numbers, bools, lists, objects, three comment
//! styles), so a direct parser is less fragile than rewriting the text into
//! HCL 2 first, and it keeps exact line:column positions, which Terraform's
//! error messages quote.
//!
//! JSON goes through the same tree instead of serde_json because HCL 1 gives
//! a repeated key the meaning "another block of that kind" (Terraform's own
//! `provider-installation.json` fixture repeats `filesystem_mirror`), and
//! because errors need the position of each key; serde_json's data model
//! keeps neither. As in HCL 1, a file whose first non-space character is `{`
//! is JSON, whatever its name.
//!
//! Like HCL 1, a leading UTF-8 byte order mark is not part of the syntax;
//! unlike HCL 1 it is skipped rather than rejected, since Windows editors add
//! one silently.

use std::fmt;

/// A place in a file; columns count characters, as HCL 1 does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Native,
    Json,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub syntax: Syntax,
    pub items: Vec<Item>,
}

/// One `name "label"… = value` or `name "label"… { … }` entry; in JSON, one
/// object member. `pos` is where the name starts, which is what Terraform
/// reports as a block's position.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub name: String,
    pub labels: Vec<String>,
    pub pos: Pos,
    /// Written with `=` (always true for JSON members, where it carries no
    /// meaning; decoders check the document's syntax first).
    pub assign: bool,
    pub value: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub kind: ValueKind,
    pub pos: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ValueKind {
    String(String),
    /// Kept as written: CLI settings never do arithmetic.
    Number(String),
    Bool(bool),
    Null,
    List(Vec<Value>),
    Object(Vec<Item>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            ValueKind::String(s) => Some(s),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

impl SyntaxError {
    fn new(pos: Pos, message: impl Into<String>) -> Self {
        SyntaxError {
            pos,
            message: message.into(),
        }
    }
}

/// Hostile input must not overflow the stack; real files nest 4 levels deep.
const MAX_NESTING: usize = 64;

pub fn parse(src: &str) -> Result<Document, SyntaxError> {
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    if src.trim_start().starts_with('{') {
        let items = JsonParser::new(src).document()?;
        return Ok(Document {
            syntax: Syntax::Json,
            items,
        });
    }
    let tokens = lex(src)?;
    let items = NativeParser { tokens, next: 0 }.document()?;
    Ok(Document {
        syntax: Syntax::Native,
        items,
    })
}

struct Cursor {
    chars: Vec<char>,
    next: usize,
    line: usize,
    column: usize,
}

impl Cursor {
    fn new(src: &str) -> Self {
        Cursor {
            chars: src.chars().collect(),
            next: 0,
            line: 1,
            column: 1,
        }
    }

    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.column,
        }
    }

    fn peek(&self) -> Option<char> {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.next + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.next += 1;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn eat(&mut self, expected: char) -> bool {
        if self.peek() == Some(expected) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek().filter(|&c| keep(c)) {
            out.push(c);
            self.bump();
        }
        out
    }

    /// Reads exactly `len` hex digits as one code point.
    fn hex_code_point(&mut self, len: usize, escape_pos: Pos) -> Result<char, SyntaxError> {
        let digits = (0..len)
            .map(|_| self.bump().filter(char::is_ascii_hexdigit))
            .collect::<Option<String>>()
            .ok_or_else(|| SyntaxError::new(escape_pos, "invalid escape sequence"))?;
        u32::from_str_radix(&digits, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| SyntaxError::new(escape_pos, "invalid Unicode code point in escape"))
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Heredoc(String),
    Number(String),
    Bool(bool),
    Assign,
    LBrace,
    RBrace,
    LBrack,
    RBrack,
    Comma,
    Eof,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(name) => write!(f, "name {name}"),
            Tok::Str(s) => write!(f, "string {s:?}"),
            Tok::Heredoc(_) => f.write_str("heredoc string"),
            Tok::Number(n) => write!(f, "number {n}"),
            Tok::Bool(b) => write!(f, "{b}"),
            Tok::Assign => f.write_str("\"=\""),
            Tok::LBrace => f.write_str("\"{\""),
            Tok::RBrace => f.write_str("\"}\""),
            Tok::LBrack => f.write_str("\"[\""),
            Tok::RBrack => f.write_str("\"]\""),
            Tok::Comma => f.write_str("\",\""),
            Tok::Eof => f.write_str("end of file"),
        }
    }
}

struct Token {
    tok: Tok,
    pos: Pos,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || (!c.is_ascii() && c.is_alphabetic())
}

fn is_ident_continue(c: char) -> bool {
    is_ident_start(c) || c.is_ascii_digit() || c == '-' || c == '.'
}

fn lex(src: &str) -> Result<Vec<Token>, SyntaxError> {
    let mut cur = Cursor::new(src);
    let mut tokens = Vec::new();
    loop {
        let pos = cur.pos();
        let Some(c) = cur.peek() else {
            tokens.push(Token { tok: Tok::Eof, pos });
            return Ok(tokens);
        };
        let tok = match c {
            c if c.is_whitespace() => {
                cur.bump();
                continue;
            }
            '#' => {
                cur.take_while(|c| c != '\n');
                continue;
            }
            '/' if cur.peek_at(1) == Some('/') => {
                cur.take_while(|c| c != '\n');
                continue;
            }
            '/' if cur.peek_at(1) == Some('*') => {
                skip_block_comment(&mut cur, pos)?;
                continue;
            }
            '=' | '{' | '}' | '[' | ']' | ',' => {
                cur.bump();
                match c {
                    '=' => Tok::Assign,
                    '{' => Tok::LBrace,
                    '}' => Tok::RBrace,
                    '[' => Tok::LBrack,
                    ']' => Tok::RBrack,
                    _ => Tok::Comma,
                }
            }
            '"' => Tok::Str(lex_string(&mut cur, pos)?),
            '<' if cur.peek_at(1) == Some('<') => Tok::Heredoc(lex_heredoc(&mut cur, pos)?),
            c if c.is_ascii_digit()
                || (c == '-' && cur.peek_at(1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                Tok::Number(lex_number(&mut cur))
            }
            c if is_ident_start(c) => match cur.take_while(is_ident_continue).as_str() {
                "true" => Tok::Bool(true),
                "false" => Tok::Bool(false),
                name => Tok::Ident(name.to_string()),
            },
            other => {
                return Err(SyntaxError::new(
                    pos,
                    format!("illegal character {other:?}"),
                ));
            }
        };
        tokens.push(Token { tok, pos });
    }
}

fn skip_block_comment(cur: &mut Cursor, start: Pos) -> Result<(), SyntaxError> {
    cur.bump();
    cur.bump();
    loop {
        match cur.bump() {
            None => return Err(SyntaxError::new(start, "comment not terminated")),
            Some('*') if cur.eat('/') => return Ok(()),
            Some(_) => {}
        }
    }
}

fn lex_number(cur: &mut Cursor) -> String {
    let mut text = String::new();
    if cur.eat('-') {
        text.push('-');
    }
    if cur.peek() == Some('0') && matches!(cur.peek_at(1), Some('x' | 'X')) {
        text.extend(cur.bump());
        text.extend(cur.bump());
        text.push_str(&cur.take_while(|c| c.is_ascii_hexdigit()));
        return text;
    }
    text.push_str(&cur.take_while(|c| c.is_ascii_digit()));
    if cur.peek() == Some('.') && cur.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
        text.extend(cur.bump());
        text.push_str(&cur.take_while(|c| c.is_ascii_digit()));
    }
    if matches!(cur.peek(), Some('e' | 'E')) {
        let sign = usize::from(matches!(cur.peek_at(1), Some('+' | '-')));
        if cur.peek_at(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
            for _ in 0..=sign {
                text.extend(cur.bump());
            }
            text.push_str(&cur.take_while(|c| c.is_ascii_digit()));
        }
    }
    text
}

/// A quoted HCL 1 string. `${…}` sequences are kept verbatim (HCL 1 leaves
/// interpolations to its caller, and the CLI config expands them as
/// environment variables later).
fn lex_string(cur: &mut Cursor, start: Pos) -> Result<String, SyntaxError> {
    cur.bump();
    let mut out = String::new();
    let mut interpolation_depth = 0usize;
    loop {
        let escape_pos = cur.pos();
        let c = match cur.bump() {
            None | Some('\n') => return Err(SyntaxError::new(start, "literal not terminated")),
            Some(c) => c,
        };
        match c {
            '"' if interpolation_depth == 0 => return Ok(out),
            '\\' if interpolation_depth == 0 => out.push(unescape_native(cur, escape_pos)?),
            '$' if interpolation_depth == 0 && cur.peek() == Some('{') => {
                cur.bump();
                out.push_str("${");
                interpolation_depth = 1;
            }
            '{' if interpolation_depth > 0 => {
                interpolation_depth += 1;
                out.push(c);
            }
            '}' if interpolation_depth > 0 => {
                interpolation_depth -= 1;
                out.push(c);
            }
            c => out.push(c),
        }
    }
}

fn unescape_native(cur: &mut Cursor, escape_pos: Pos) -> Result<char, SyntaxError> {
    let Some(c) = cur.bump() else {
        return Err(SyntaxError::new(escape_pos, "literal not terminated"));
    };
    Ok(match c {
        'a' => '\u{7}',
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'v' => '\u{b}',
        '\\' => '\\',
        '"' => '"',
        'x' => cur.hex_code_point(2, escape_pos)?,
        'u' => cur.hex_code_point(4, escape_pos)?,
        'U' => cur.hex_code_point(8, escape_pos)?,
        '0'..='7' => {
            let mut value = c.to_digit(8).unwrap_or(0);
            for _ in 0..2 {
                let digit = cur
                    .bump()
                    .and_then(|d| d.to_digit(8))
                    .ok_or_else(|| SyntaxError::new(escape_pos, "invalid octal escape"))?;
                value = value * 8 + digit;
            }
            char::from_u32(value)
                .ok_or_else(|| SyntaxError::new(escape_pos, "invalid octal escape"))?
        }
        other => {
            return Err(SyntaxError::new(
                escape_pos,
                format!("unknown escape sequence \\{other}"),
            ));
        }
    })
}

/// `<<EOF` … `EOF`, or `<<-EOF` whose lines lose the closing marker's
/// indentation when every line has it (HCL 1's rule). The closing marker may
/// be indented in both forms.
fn lex_heredoc(cur: &mut Cursor, start: Pos) -> Result<String, SyntaxError> {
    cur.bump();
    cur.bump();
    let indented = cur.eat('-');
    let anchor = cur.take_while(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if anchor.is_empty() {
        return Err(SyntaxError::new(start, "zero-length heredoc anchor"));
    }
    cur.eat('\r');
    if !cur.eat('\n') {
        return Err(SyntaxError::new(
            start,
            "heredoc anchor must be followed by a newline",
        ));
    }
    let mut lines = Vec::new();
    loop {
        if cur.peek().is_none() {
            return Err(SyntaxError::new(start, "heredoc not terminated"));
        }
        let line = cur.take_while(|c| c != '\n');
        let at_end = !cur.eat('\n');
        let trimmed = line.trim_end_matches('\r');
        if trimmed.trim_start() == anchor {
            let marker_indent = &trimmed[..trimmed.len() - anchor.len()];
            return Ok(join_heredoc(&lines, indented.then_some(marker_indent)));
        }
        if at_end {
            return Err(SyntaxError::new(start, "heredoc not terminated"));
        }
        lines.push(line);
    }
}

fn join_heredoc(lines: &[String], strip_indent: Option<&str>) -> String {
    let strip = strip_indent.filter(|indent| lines.iter().all(|l| l.starts_with(indent)));
    lines
        .iter()
        .map(|line| {
            let line = strip.map_or(line.as_str(), |indent| &line[indent.len()..]);
            format!("{line}\n")
        })
        .collect()
}

struct NativeParser {
    tokens: Vec<Token>,
    next: usize,
}

impl NativeParser {
    fn peek(&self) -> (&Tok, Pos) {
        match self.tokens.get(self.next).or(self.tokens.last()) {
            Some(t) => (&t.tok, t.pos),
            None => (&Tok::Eof, Pos { line: 1, column: 1 }),
        }
    }

    fn take(&mut self) -> (Tok, Pos) {
        let (tok, pos) = self.peek();
        let taken = (tok.clone(), pos);
        if self.next < self.tokens.len() {
            self.next += 1;
        }
        taken
    }

    fn document(mut self) -> Result<Vec<Item>, SyntaxError> {
        self.items(false, 0)
    }

    /// A sequence of items, optionally separated by commas (HCL 1 allows
    /// both styles, and the `hosts` fixture uses a trailing comma).
    fn items(&mut self, in_braces: bool, depth: usize) -> Result<Vec<Item>, SyntaxError> {
        if depth > MAX_NESTING {
            return Err(SyntaxError::new(self.peek().1, "nesting too deep"));
        }
        let mut items = Vec::new();
        loop {
            match self.peek() {
                (Tok::Eof, pos) if in_braces => {
                    return Err(SyntaxError::new(pos, "expected \"}\" before end of file"));
                }
                (Tok::Eof, _) => return Ok(items),
                (Tok::RBrace, _) if in_braces => return Ok(items),
                _ => {}
            }
            items.push(self.item(depth)?);
            if self.peek().0 == &Tok::Comma {
                self.take();
            }
        }
    }

    fn item(&mut self, depth: usize) -> Result<Item, SyntaxError> {
        let mut keys: Vec<(String, Pos)> = Vec::new();
        loop {
            let (tok, pos) = self.take();
            match tok {
                Tok::Ident(key) | Tok::Str(key) => keys.push((key, pos)),
                Tok::Assign | Tok::LBrace if keys.is_empty() => {
                    return Err(SyntaxError::new(
                        pos,
                        format!("expected a name, found {tok}"),
                    ));
                }
                Tok::Assign if keys.len() > 1 => {
                    return Err(SyntaxError::new(
                        pos,
                        "nested object expected: \"{\" after block labels, found \"=\"",
                    ));
                }
                Tok::Assign => {
                    let value = self.value(depth + 1)?;
                    return Ok(make_item(keys, true, value));
                }
                Tok::LBrace => {
                    let body = self.items(true, depth + 1)?;
                    self.take();
                    let value = Value {
                        kind: ValueKind::Object(body),
                        pos,
                    };
                    return Ok(make_item(keys, false, value));
                }
                other => {
                    let expected = if keys.is_empty() {
                        "a name"
                    } else {
                        "\"=\", \"{\" or a block label"
                    };
                    return Err(SyntaxError::new(
                        pos,
                        format!("expected {expected}, found {other}"),
                    ));
                }
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        if depth > MAX_NESTING {
            return Err(SyntaxError::new(self.peek().1, "nesting too deep"));
        }
        let (tok, pos) = self.take();
        let kind = match tok {
            Tok::Str(s) | Tok::Heredoc(s) => ValueKind::String(s),
            Tok::Number(n) => ValueKind::Number(n),
            Tok::Bool(b) => ValueKind::Bool(b),
            Tok::LBrace => {
                let body = self.items(true, depth)?;
                self.take();
                ValueKind::Object(body)
            }
            Tok::LBrack => ValueKind::List(self.list_elements(depth)?),
            other => {
                return Err(SyntaxError::new(
                    pos,
                    format!("expected a value, found {other}"),
                ));
            }
        };
        Ok(Value { kind, pos })
    }

    fn list_elements(&mut self, depth: usize) -> Result<Vec<Value>, SyntaxError> {
        let mut elements = Vec::new();
        loop {
            if self.peek().0 == &Tok::RBrack {
                self.take();
                return Ok(elements);
            }
            elements.push(self.value(depth + 1)?);
            match self.take() {
                (Tok::Comma, _) => {}
                (Tok::RBrack, _) => return Ok(elements),
                (other, pos) => {
                    return Err(SyntaxError::new(
                        pos,
                        format!("expected \",\" or \"]\" in list, found {other}"),
                    ));
                }
            }
        }
    }
}

fn make_item(keys: Vec<(String, Pos)>, assign: bool, value: Value) -> Item {
    let mut keys = keys.into_iter();
    let (name, pos) = keys.next().unwrap_or((String::new(), value.pos));
    Item {
        name,
        labels: keys.map(|(label, _)| label).collect(),
        pos,
        assign,
        value,
    }
}

struct JsonParser {
    cur: Cursor,
}

impl JsonParser {
    fn new(src: &str) -> Self {
        JsonParser {
            cur: Cursor::new(src),
        }
    }

    fn skip_space(&mut self) {
        self.cur
            .take_while(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
    }

    fn unexpected(&self, wanted: &str) -> SyntaxError {
        let found = match self.cur.peek() {
            Some(c) => format!("{c:?}"),
            None => "end of file".to_string(),
        };
        SyntaxError::new(self.cur.pos(), format!("expected {wanted}, found {found}"))
    }

    fn document(mut self) -> Result<Vec<Item>, SyntaxError> {
        self.skip_space();
        let top = self.value(0)?;
        self.skip_space();
        if self.cur.peek().is_some() {
            return Err(self.unexpected("end of file after the top-level object"));
        }
        match top.kind {
            ValueKind::Object(items) => Ok(items),
            _ => Err(SyntaxError::new(top.pos, "expected a JSON object")),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, SyntaxError> {
        if depth > MAX_NESTING {
            return Err(SyntaxError::new(self.cur.pos(), "nesting too deep"));
        }
        let pos = self.cur.pos();
        let kind = match self.cur.peek() {
            Some('{') => ValueKind::Object(self.object(depth)?),
            Some('[') => ValueKind::List(self.array(depth)?),
            Some('"') => ValueKind::String(self.string()?),
            Some('-' | '0'..='9') => ValueKind::Number(self.number()?),
            Some('t' | 'f' | 'n') => {
                let word = self.cur.take_while(|c| c.is_ascii_alphabetic());
                match word.as_str() {
                    "true" => ValueKind::Bool(true),
                    "false" => ValueKind::Bool(false),
                    "null" => ValueKind::Null,
                    _ => return Err(SyntaxError::new(pos, format!("invalid literal {word:?}"))),
                }
            }
            _ => return Err(self.unexpected("a JSON value")),
        };
        Ok(Value { kind, pos })
    }

    fn object(&mut self, depth: usize) -> Result<Vec<Item>, SyntaxError> {
        self.cur.bump();
        let mut items = Vec::new();
        self.skip_space();
        if self.cur.eat('}') {
            return Ok(items);
        }
        loop {
            self.skip_space();
            let pos = self.cur.pos();
            if self.cur.peek() != Some('"') {
                return Err(self.unexpected("a quoted property name"));
            }
            let name = self.string()?;
            self.skip_space();
            if !self.cur.eat(':') {
                return Err(self.unexpected("\":\""));
            }
            self.skip_space();
            let value = self.value(depth + 1)?;
            items.push(Item {
                name,
                labels: Vec::new(),
                pos,
                assign: true,
                value,
            });
            self.skip_space();
            if self.cur.eat('}') {
                return Ok(items);
            }
            if !self.cur.eat(',') {
                return Err(self.unexpected("\",\" or \"}\""));
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Vec<Value>, SyntaxError> {
        self.cur.bump();
        let mut elements = Vec::new();
        self.skip_space();
        if self.cur.eat(']') {
            return Ok(elements);
        }
        loop {
            self.skip_space();
            elements.push(self.value(depth + 1)?);
            self.skip_space();
            if self.cur.eat(']') {
                return Ok(elements);
            }
            if !self.cur.eat(',') {
                return Err(self.unexpected("\",\" or \"]\""));
            }
        }
    }

    fn number(&mut self) -> Result<String, SyntaxError> {
        let pos = self.cur.pos();
        let text = self
            .cur
            .take_while(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'));
        if is_json_number(&text) {
            Ok(text)
        } else {
            Err(SyntaxError::new(pos, format!("invalid number {text:?}")))
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.cur.pos();
        self.cur.bump();
        let mut out = String::new();
        loop {
            let escape_pos = self.cur.pos();
            match self.cur.bump() {
                None => return Err(SyntaxError::new(start, "string not terminated")),
                Some('"') => return Ok(out),
                Some('\\') => out.push(self.escape(escape_pos)?),
                Some(c) if (c as u32) < 0x20 => {
                    return Err(SyntaxError::new(
                        escape_pos,
                        "control character in string; use an escape sequence",
                    ));
                }
                Some(c) => out.push(c),
            }
        }
    }

    fn escape(&mut self, escape_pos: Pos) -> Result<char, SyntaxError> {
        let invalid = || SyntaxError::new(escape_pos, "invalid escape sequence");
        Ok(match self.cur.bump().ok_or_else(invalid)? {
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let unit = self.utf16_unit(escape_pos)?;
                if (0xD800..0xDC00).contains(&unit) {
                    if !(self.cur.eat('\\') && self.cur.eat('u')) {
                        return Err(invalid());
                    }
                    let low = self.utf16_unit(escape_pos)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err(invalid());
                    }
                    let combined = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    char::from_u32(combined).ok_or_else(invalid)?
                } else {
                    char::from_u32(unit).ok_or_else(invalid)?
                }
            }
            _ => return Err(invalid()),
        })
    }

    fn utf16_unit(&mut self, escape_pos: Pos) -> Result<u32, SyntaxError> {
        let digits = (0..4)
            .map(|_| self.cur.bump().filter(char::is_ascii_hexdigit))
            .collect::<Option<String>>()
            .ok_or_else(|| SyntaxError::new(escape_pos, "invalid escape sequence"))?;
        u32::from_str_radix(&digits, 16)
            .map_err(|_| SyntaxError::new(escape_pos, "invalid escape sequence"))
    }
}

/// RFC 8259 number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
fn is_json_number(text: &str) -> bool {
    let rest = text.strip_prefix('-').unwrap_or(text);
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if int_len == 0 || (int_len > 1 && rest.starts_with('0')) {
        return false;
    }
    let mut rest = &rest[int_len..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 {
            return false;
        }
        rest = &fraction[len..];
    }
    if let Some(exponent) = rest.strip_prefix(['e', 'E']) {
        let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        return !exponent.is_empty() && exponent.bytes().all(|b| b.is_ascii_digit());
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(src: &str) -> Vec<Item> {
        let doc = parse(src).unwrap();
        assert_eq!(doc.syntax, Syntax::Native);
        doc.items
    }

    fn string_value(item: &Item) -> &str {
        item.value.as_str().unwrap()
    }

    fn body(item: &Item) -> &[Item] {
        match &item.value.kind {
            ValueKind::Object(items) => items,
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn blocks_labels_and_quoted_names() {
        let items = native(
            "provider_installation {\n  dev_overrides {\n    \"hashicorp/null\" = \"/tmp/null\"\n  }\n}\ncredentials \"example.com\" { token = \"t\" }\n",
        );
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].name, "provider_installation");
        assert!(!items[0].assign);
        let dev = &body(&items[0])[0];
        assert_eq!(dev.pos, Pos { line: 2, column: 3 });
        let entry = &body(dev)[0];
        assert_eq!(entry.name, "hashicorp/null");
        assert!(entry.assign);
        assert_eq!(string_value(entry), "/tmp/null");
        assert_eq!(items[1].labels, vec!["example.com".to_string()]);
        assert_eq!(items[1].pos, Pos { line: 6, column: 1 });
    }

    #[test]
    fn leading_bom_is_skipped() {
        let items = native("\u{feff}plugin_cache_dir = \"/c\"\n");
        assert_eq!(items[0].pos, Pos { line: 1, column: 1 });
        assert_eq!(string_value(&items[0]), "/c");
    }

    #[test]
    fn comments_commas_and_literals() {
        let items = native(
            "# hash\n// slashes\n/* block\n comment */ a = 1, b = -2.5e3\nc = true d = false\nl = [\"x\", \"y\",]\no = { \"k.v1\" = \"u\", k2 = [1] }\n",
        );
        let names: Vec<_> = items.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "l", "o"]);
        assert_eq!(items[0].value.kind, ValueKind::Number("1".into()));
        assert_eq!(items[1].value.kind, ValueKind::Number("-2.5e3".into()));
        assert_eq!(items[2].value.kind, ValueKind::Bool(true));
        assert_eq!(
            items[3].pos,
            Pos {
                line: 5,
                column: 10
            }
        );
        let ValueKind::List(list) = &items[4].value.kind else {
            panic!()
        };
        assert_eq!(list.len(), 2);
        assert_eq!(body(&items[5])[0].name, "k.v1");
    }

    #[test]
    fn string_escapes_and_interpolation_kept() {
        let items = native(
            "a = \"tab\\there \\\"q\\\" \\u00e9 \\x41 \\101 \\\\\"\nb = \"${HOME}/x ${ {} }\"\n",
        );
        assert_eq!(string_value(&items[0]), "tab\there \"q\" é A A \\");
        assert_eq!(string_value(&items[1]), "${HOME}/x ${ {} }");
    }

    #[test]
    fn heredocs() {
        let items =
            native("a = <<EOF\nline one\n  two\nEOF\nb = <<-EOT\n    x\n      y\n    EOT\n");
        assert_eq!(string_value(&items[0]), "line one\n  two\n");
        assert_eq!(string_value(&items[1]), "x\n  y\n");
    }

    #[test]
    fn native_errors_have_positions() {
        let cases = [
            ("a = \"open\n", 1, 5, "literal not terminated"),
            ("credentials \"x\" = {}\n", 1, 17, "nested object expected"),
            ("a {\n  b = 1\n", 3, 1, "expected \"}\" before end of file"),
            ("a = [1 2]\n", 1, 8, "expected \",\" or \"]\""),
            ("a = b\n", 1, 5, "expected a value, found name b"),
            ("x = 1\n  @\n", 2, 3, "illegal character '@'"),
            ("/* open\n", 1, 1, "comment not terminated"),
            ("a = \"\\q\"\n", 1, 6, "unknown escape sequence \\q"),
            ("a = <<EOF\nno end\n", 1, 5, "heredoc not terminated"),
            ("= 1\n", 1, 1, "expected a name"),
        ];
        for (src, line, column, message) in cases {
            let err = parse(src).unwrap_err();
            assert_eq!(err.pos, Pos { line, column }, "{src:?}: {err:?}");
            assert!(err.message.contains(message), "{src:?}: {err:?}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!("a = {}1{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse(&src).unwrap_err().message.contains("too deep"));
        let json = format!("{{\"a\": {}1{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse(&json).unwrap_err().message.contains("too deep"));
    }

    #[test]
    fn json_keeps_order_duplicates_and_positions() {
        let doc = parse(
            "  {\n \"a\": [{\"p\": \"1\"}],\n \"b\": {\"x\": null, \"y\": 2.5},\n \"a\": [{\"p\": \"\\u00e9\\ud83d\\ude00\\n\"}]\n}\n",
        )
        .unwrap();
        assert_eq!(doc.syntax, Syntax::Json);
        let names: Vec<_> = doc.items.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "a"]);
        assert_eq!(doc.items[1].pos, Pos { line: 3, column: 2 });
        let ValueKind::List(list) = &doc.items[2].value.kind else {
            panic!()
        };
        let ValueKind::Object(inner) = &list[0].kind else {
            panic!()
        };
        assert_eq!(inner[0].value.as_str(), Some("é😀\n"));
        assert_eq!(body(&doc.items[1])[0].value.kind, ValueKind::Null);
    }

    #[test]
    fn json_errors_have_positions() {
        let cases = [
            ("{\"a\": 1,}", 1, 9, "quoted property name"),
            ("{\"a\" 1}", 1, 6, "\":\""),
            ("{\"a\": 01}", 1, 7, "invalid number"),
            ("{\"a\": \"x\n\"}", 1, 9, "control character"),
            ("{\n\"a\": tru}", 2, 6, "invalid literal"),
            ("{} x", 1, 4, "end of file after the top-level object"),
            ("{\"a\": \"\\ud800\"}", 1, 8, "invalid escape"),
        ];
        for (src, line, column, message) in cases {
            let err = parse(src).unwrap_err();
            assert_eq!(err.pos, Pos { line, column }, "{src:?}: {err:?}");
            assert!(err.message.contains(message), "{src:?}: {err:?}");
        }
    }
}
