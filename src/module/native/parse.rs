//! A reader of HCL's native syntax that accepts exactly what Terraform's
//! parser accepts, and keeps only the structure tfinstall needs: blocks,
//! their labels, attributes and the source span of each attribute's
//! expression.
//!
//! Why not hcl-edit alone: hcl-edit 0.10 refuses some files Terraform
//! reads (a newline inside the value of an object `for` expression, which
//! every configuration calling cloudposse/label/null 0.25.0 has), and a
//! single refused file stops the whole configuration. Expressions here are
//! checked against the grammar but not built: nothing tfinstall decides
//! depends on an expression it cannot evaluate, and the few it can
//! evaluate (module sources, versions, provider references) are read from
//! their span by hcl-edit in `native.rs`.
//!
//! The rules follow HCL's own parser (hclsyntax, as in Terraform 1.0 and
//! later): which brackets ignore newlines (parentheses, brackets, `for`
//! expressions, template sequences, function arguments) and which do not
//! (bodies and object constructors), line comments counting as newlines
//! where newlines count, and the checks HCL makes while parsing (escapes,
//! number literals, template directives, repeated arguments). The
//! differential test (`tests/native_syntax.rs`) holds it to real
//! Terraform.

use std::collections::HashSet;
use std::ops::Range;

use super::scan::{Tok, Token, scan};

/// A body's attributes and blocks, in source order.
#[derive(Debug, Default)]
pub(in crate::module) struct Body {
    pub items: Vec<Item>,
}

#[derive(Debug)]
pub(in crate::module) enum Item {
    Attr {
        name: Range<usize>,
        expr: Range<usize>,
    },
    Block {
        kind: Range<usize>,
        labels: Vec<Label>,
        body: Body,
    },
}

#[derive(Debug)]
pub(in crate::module) struct Label {
    pub value: String,
    pub span: Range<usize>,
}

/// The first syntax error, with HCL's summary and detail.
#[derive(Debug)]
pub(in crate::module) struct SyntaxError {
    pub summary: String,
    pub detail: String,
    pub span: Range<usize>,
}

type Parsed<T> = Result<T, SyntaxError>;

/// Reads a whole file; the first error ends the reading (HCL goes on to
/// report more, but any error makes Terraform refuse the file).
pub(in crate::module) fn parse_body(src: &str) -> Parsed<Body> {
    let tokens = scan(src);
    if let Some(bad) = tokens.iter().find_map(|token| match token.tok {
        Tok::Bad(bad) => Some((bad, token)),
        _ => None,
    }) {
        let (summary, detail) = bad.0.message();
        return Err(error(summary, detail, bad.1));
    }
    let mut parser = Parser {
        src,
        tokens,
        next: 0,
        nesting: 0,
        newlines: vec![true],
    };
    parser.body(Tok::Eof)
}

fn error(summary: impl Into<String>, detail: impl Into<String>, at: &Token) -> SyntaxError {
    SyntaxError {
        summary: summary.into(),
        detail: detail.into(),
        span: at.start..at.end,
    }
}

/// How deep brackets, templates and operators may nest. HCL has no limit
/// (Go's stacks grow); a thread's stack here does not, and real
/// configurations stay far below this.
const MAX_NESTING: usize = 256;

struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    next: usize,
    nesting: usize,
    /// Whether newlines are tokens here: HCL's stack of contexts, pushed
    /// by every bracket.
    newlines: Vec<bool>,
}

impl Parser<'_> {
    /// The next token as the grammar sees it: comments are skipped, and
    /// newlines too where they do not count; a line comment counts as its
    /// newline where they do.
    fn next_token(&self) -> (Token, usize) {
        let newlines = self.newlines.last().copied().unwrap_or(true);
        let mut i = self.next;
        while let Some(token) = self.tokens.get(i) {
            match token.tok {
                Tok::Comment if newlines && self.src.as_bytes()[token.end - 1] == b'\n' => {
                    let newline = Token {
                        tok: Tok::Newline,
                        start: token.end - 1,
                        end: token.end,
                    };
                    return (newline, i + 1);
                }
                Tok::Comment => {}
                Tok::Newline if !newlines => {}
                _ => return (*token, i + 1),
            }
            i += 1;
        }
        let last = self.tokens.len() - 1;
        (self.tokens[last], self.tokens.len())
    }

    fn peek(&self) -> Token {
        self.next_token().0
    }

    fn read(&mut self) -> Token {
        let (token, next) = self.next_token();
        self.next = next;
        token
    }

    /// The end of the last token read, for expression spans.
    fn prev_end(&self) -> usize {
        self.next
            .checked_sub(1)
            .map_or(0, |i| self.tokens[i.min(self.tokens.len() - 1)].end)
    }

    fn text(&self, token: &Token) -> &str {
        &self.src[token.start..token.end]
    }

    fn is_keyword(&self, token: &Token, keyword: &str) -> bool {
        token.tok == Tok::Ident && self.text(token) == keyword
    }

    /// Runs `inner` with newlines counting (or not) until it returns.
    fn with_newlines<T>(&mut self, counted: bool, inner: impl FnOnce(&mut Self) -> T) -> T {
        self.newlines.push(counted);
        let result = inner(self);
        self.newlines.pop();
        result
    }

    fn body(&mut self, end: Tok) -> Parsed<Body> {
        let src = self.src;
        let mut body = Body::default();
        let mut names = HashSet::new();
        loop {
            let next = self.peek();
            if next.tok == end {
                self.read();
                return Ok(body);
            }
            match next.tok {
                Tok::Newline => {
                    self.read();
                }
                Tok::Ident => {
                    let item = self.body_item()?;
                    if let Item::Attr { name, .. } = &item {
                        let text = &src[name.clone()];
                        if !names.insert(text) {
                            return Err(SyntaxError {
                                summary: "Attribute redefined".into(),
                                detail: format!(
                                    "The argument {text:?} was already set. Each argument may be set only once."
                                ),
                                span: name.clone(),
                            });
                        }
                    }
                    body.items.push(item);
                }
                Tok::OQuote => {
                    return Err(error(
                        "Invalid argument name",
                        "Argument names must not be quoted.",
                        &next,
                    ));
                }
                _ => {
                    return Err(error(
                        "Argument or block definition required",
                        "An argument or block definition is required here.",
                        &next,
                    ));
                }
            }
        }
    }

    fn body_item(&mut self) -> Parsed<Item> {
        let ident = self.read();
        let next = self.peek();
        match next.tok {
            Tok::Equal => self.attribute(ident, false),
            Tok::OQuote | Tok::OBrace | Tok::Ident => self.block(ident),
            _ => Err(error(
                "Argument or block definition required",
                "An argument or block definition is required here. To set an argument, use the equals sign \"=\" to introduce the argument value.",
                &ident,
            )),
        }
    }

    fn attribute(&mut self, ident: Token, single_line: bool) -> Parsed<Item> {
        self.read(); // =
        let start = self.peek().start;
        self.expression()?;
        let expr = start..self.prev_end().max(start);
        if !single_line {
            let end = self.peek();
            match end.tok {
                Tok::Newline | Tok::Eof => {
                    self.read();
                }
                Tok::Comma => {
                    return Err(error(
                        "Unexpected comma after argument",
                        "Argument definitions must be separated by newlines, not commas. An argument definition must end with a newline.",
                        &end,
                    ));
                }
                _ => {
                    return Err(error(
                        "Missing newline after argument",
                        "An argument definition must end with a newline.",
                        &end,
                    ));
                }
            }
        }
        Ok(Item::Attr {
            name: ident.start..ident.end,
            expr,
        })
    }

    fn block(&mut self, ident: Token) -> Parsed<Item> {
        let mut labels = Vec::new();
        loop {
            let token = self.peek();
            match token.tok {
                Tok::OBrace => {
                    self.read();
                    break;
                }
                Tok::OQuote => labels.push(self.quoted_label()?),
                Tok::Ident => {
                    self.read();
                    labels.push(Label {
                        value: self.text(&token).to_string(),
                        span: token.start..token.end,
                    });
                }
                Tok::Equal => {
                    return Err(error(
                        "Invalid block definition",
                        "The equals sign \"=\" indicates an argument definition, and must not be used when defining a block.",
                        &token,
                    ));
                }
                Tok::Newline => {
                    return Err(error(
                        "Invalid block definition",
                        "A block definition must have block content delimited by \"{\" and \"}\", starting on the same line as the block header.",
                        &token,
                    ));
                }
                _ => {
                    return Err(error(
                        "Invalid block definition",
                        "Either a quoted string block label or an opening brace (\"{\") is expected here.",
                        &token,
                    ));
                }
            }
        }
        let body = match self.peek().tok {
            Tok::Newline | Tok::Eof | Tok::CBrace => {
                self.deeper(|parser| parser.body(Tok::CBrace))?
            }
            _ => self.single_attribute_body()?,
        };
        let end = self.peek();
        match end.tok {
            Tok::Newline | Tok::Eof => {
                self.read();
            }
            _ => {
                return Err(error(
                    "Missing newline after block definition",
                    "A block definition must end with a newline.",
                    &end,
                ));
            }
        }
        Ok(Item::Block {
            kind: ident.start..ident.end,
            labels,
            body,
        })
    }

    /// `name { arg = value }` on one line.
    fn single_attribute_body(&mut self) -> Parsed<Body> {
        let ident = self.read();
        if ident.tok != Tok::Ident {
            return Err(error(
                "Argument or block definition required",
                "An argument or block definition is required here.",
                &ident,
            ));
        }
        let next = self.peek();
        let attr = match next.tok {
            Tok::Equal => self.attribute(ident, true)?,
            Tok::OQuote | Tok::OBrace | Tok::Ident => {
                return Err(error(
                    "Argument definition required",
                    format!(
                        "A single-line block definition can contain only a single argument. If you meant to define argument {:?}, use an equals sign to assign it a value. To define a nested block, place it on a line of its own within its parent block.",
                        self.text(&ident)
                    ),
                    &next,
                ));
            }
            _ => {
                return Err(error(
                    "Argument or block definition required",
                    "An argument or block definition is required here. To set an argument, use the equals sign \"=\" to introduce the argument value.",
                    &ident,
                ));
            }
        };
        let close = self.peek();
        let detail = match close.tok {
            Tok::CBrace => {
                self.read();
                return Ok(Body { items: vec![attr] });
            }
            Tok::Comma => {
                "Single-line block syntax can include only one argument definition. To define multiple arguments, use the multi-line block syntax with one argument definition per line."
            }
            Tok::Newline => {
                "An argument definition on the same line as its containing block creates a single-line block definition, which must also be closed on the same line. Place the block's closing brace immediately after the argument definition."
            }
            _ => {
                "A single-line block definition must end with a closing brace immediately after its single argument definition."
            }
        };
        Err(error(
            "Invalid single-argument block definition",
            detail,
            &close,
        ))
    }

    /// A block label: a quoted string without template sequences.
    fn quoted_label(&mut self) -> Parsed<Label> {
        let open = self.read();
        let mut value = String::new();
        loop {
            let token = self.read();
            match token.tok {
                Tok::CQuote => {
                    return Ok(Label {
                        value,
                        span: open.start..token.end,
                    });
                }
                Tok::QuotedLit => unescape(self.text(&token), token.start, &mut value)?,
                Tok::TemplateInterp | Tok::TemplateControl => {
                    let which = &self.text(&token)[..1];
                    return Err(error(
                        "Invalid string literal",
                        format!(
                            "Template sequences are not allowed in this string. To include a literal {which:?}, double it (as \"{which}{which}\") to escape it."
                        ),
                        &token,
                    ));
                }
                Tok::Eof => {
                    return Err(error(
                        "Unterminated string literal",
                        "Unable to find the closing quote mark before the end of the file.",
                        &token,
                    ));
                }
                _ => {
                    return Err(error(
                        "Invalid string literal",
                        "This item is not valid in a string literal.",
                        &token,
                    ));
                }
            }
        }
    }

    fn expression(&mut self) -> Parsed<()> {
        // Operator precedence changes the tree, never what parses: every
        // binary operator joins two operands alike.
        loop {
            self.operand()?;
            let next = self.peek();
            let binary = matches!(
                next.tok,
                Tok::Or
                    | Tok::And
                    | Tok::EqualOp
                    | Tok::NotEqual
                    | Tok::Greater
                    | Tok::GreaterEq
                    | Tok::Less
                    | Tok::LessEq
                    | Tok::Plus
                    | Tok::Minus
                    | Tok::Star
                    | Tok::Slash
                    | Tok::Percent
            );
            if !binary {
                break;
            }
            self.read();
        }
        if self.peek().tok != Tok::Question {
            return Ok(());
        }
        self.read();
        self.deeper(Self::expression)?;
        let colon = self.peek();
        if colon.tok != Tok::Colon {
            return Err(error(
                "Missing false expression in conditional",
                "The conditional operator (...?...:...) requires a false expression, delimited by a colon.",
                &colon,
            ));
        }
        self.read();
        self.deeper(Self::expression)
    }

    /// A term and the traversals after it (`.attr`, `[index]`, splats).
    fn operand(&mut self) -> Parsed<()> {
        self.term()?;
        self.traversals()
    }

    fn traversals(&mut self) -> Parsed<()> {
        loop {
            match self.peek().tok {
                Tok::Dot => {
                    self.read();
                    let step = self.peek();
                    match step.tok {
                        Tok::Ident => {
                            self.read();
                        }
                        Tok::NumberLit => {
                            self.read();
                            self.legacy_index(&step, "")?;
                        }
                        Tok::Star => {
                            self.read();
                            self.attribute_splat()?;
                        }
                        _ => return Err(missing_attribute_name(&step)),
                    }
                }
                Tok::OBrack => {
                    self.read();
                    if self.peek().tok == Tok::Star {
                        self.read();
                        let close = self.read();
                        if close.tok != Tok::CBrack {
                            return Err(error(
                                "Missing close bracket on splat index",
                                "The star for a full splat operator must be immediately followed by a closing bracket (\"]\").",
                                &close,
                            ));
                        }
                        continue;
                    }
                    self.with_newlines(false, |parser| {
                        parser.expression()?;
                        let close = parser.read();
                        if close.tok != Tok::CBrack {
                            return Err(error(
                                "Missing close bracket on index",
                                "The index operator must end with a closing bracket (\"]\").",
                                &close,
                            ));
                        }
                        Ok(())
                    })?;
                }
                _ => return Ok(()),
            }
        }
    }

    /// The steps of `list.*.attr.0`: attributes and legacy indexes only.
    fn attribute_splat(&mut self) -> Parsed<()> {
        while self.peek().tok == Tok::Dot {
            let dot = self.read();
            let step = self.peek();
            match step.tok {
                Tok::NumberLit => {
                    self.read();
                    self.legacy_index(&step, " with a full splat expression [*]")?;
                }
                Tok::Ident => {
                    self.read();
                }
                Tok::Star => {
                    return Err(error(
                        "Nested splat expression not allowed",
                        "A splat expression (*) cannot be used inside another attribute-only splat expression.",
                        &step,
                    ));
                }
                _ => return Err(missing_attribute_name(&dot)),
            }
        }
        Ok(())
    }

    /// `.0` after a dot: an index written as HCL 1 wrote it.
    fn legacy_index(&self, number: &Token, syntax: &str) -> Parsed<()> {
        let text = self.text(number);
        if let Some((first, second)) = text.split_once('.') {
            return Err(error(
                "Invalid legacy index syntax",
                format!(
                    "When using the legacy index syntax, chaining two indexes together is not permitted. Use the proper index syntax{syntax} instead, like [{first}][{second}]."
                ),
                number,
            ));
        }
        check_number(text, number)
    }

    /// Runs `inner` one level deeper, refusing to go past
    /// [`MAX_NESTING`].
    fn deeper<T>(&mut self, inner: impl FnOnce(&mut Self) -> Parsed<T>) -> Parsed<T> {
        if self.nesting == MAX_NESTING {
            return Err(error(
                "Nested too deeply",
                format!(
                    "tfinstall reads blocks and expressions nested up to {MAX_NESTING} levels deep."
                ),
                &self.peek(),
            ));
        }
        self.nesting += 1;
        let result = inner(self);
        self.nesting -= 1;
        result
    }

    fn term(&mut self) -> Parsed<()> {
        let start = self.peek();
        self.deeper(|parser| parser.nested_term(start))
    }

    fn nested_term(&mut self, start: Token) -> Parsed<()> {
        match start.tok {
            Tok::OParen => {
                self.read();
                self.with_newlines(false, |parser| {
                    parser.expression()?;
                    let close = parser.peek();
                    if close.tok != Tok::CParen {
                        return Err(error(
                            "Unbalanced parentheses",
                            "Expected a closing parenthesis to terminate the expression.",
                            &close,
                        ));
                    }
                    parser.read();
                    Ok(())
                })
            }
            Tok::NumberLit => {
                self.read();
                check_number(self.text(&start), &start)
            }
            Tok::Ident => {
                self.read();
                if matches!(self.peek().tok, Tok::OParen | Tok::DoubleColon) {
                    self.function_call()
                } else {
                    Ok(())
                }
            }
            Tok::OQuote | Tok::OHeredoc => {
                self.read();
                let end = if start.tok == Tok::OQuote {
                    Tok::CQuote
                } else {
                    Tok::CHeredoc
                };
                self.template(end)
            }
            Tok::Minus | Tok::Bang => {
                self.read();
                self.operand()
            }
            Tok::OBrack => self.tuple(),
            Tok::OBrace => self.object(),
            _ => Err(error(
                "Invalid expression",
                "Expected the start of an expression, but found an invalid expression token.",
                &start,
            )),
        }
    }

    /// A call, after the function's name: `(args)`, or for a provider's
    /// function `::name::name(args)`.
    fn function_call(&mut self) -> Parsed<()> {
        let mut open = self.read();
        while open.tok == Tok::DoubleColon {
            let name = self.read();
            if name.tok != Tok::Ident {
                return Err(error(
                    "Missing function name",
                    "Function scope resolution symbol :: must be followed by a function name in this scope.",
                    &name,
                ));
            }
            open = self.read();
        }
        if open.tok != Tok::OParen {
            return Err(error(
                "Missing open parenthesis",
                "Function selector must be followed by an open parenthesis to begin the function call.",
                &open,
            ));
        }
        self.with_newlines(false, |parser| {
            loop {
                if parser.peek().tok == Tok::CParen {
                    parser.read();
                    return Ok(());
                }
                parser.expression()?;
                let separator = parser.read();
                match separator.tok {
                    Tok::CParen => return Ok(()),
                    Tok::Ellipsis => {
                        if parser.peek().tok != Tok::CParen {
                            return Err(error(
                                "Missing closing parenthesis",
                                "An expanded function argument (with ...) must be immediately followed by closing parentheses.",
                                &separator,
                            ));
                        }
                        parser.read();
                        return Ok(());
                    }
                    Tok::Comma => {
                        if parser.peek().tok == Tok::CParen {
                            parser.read();
                            return Ok(());
                        }
                    }
                    _ => {
                        return Err(error(
                            "Missing argument separator",
                            "A comma is required to separate each function argument from the next.",
                            &separator,
                        ));
                    }
                }
            }
        })
    }

    fn tuple(&mut self) -> Parsed<()> {
        let open = self.read();
        self.with_newlines(false, |parser| {
            if parser.is_keyword(&parser.peek(), "for") {
                return parser.for_expression(&open);
            }
            loop {
                if parser.peek().tok == Tok::CBrack {
                    parser.read();
                    return Ok(());
                }
                parser.expression()?;
                let next = parser.peek();
                match next.tok {
                    Tok::CBrack => {
                        parser.read();
                        return Ok(());
                    }
                    Tok::Comma => {
                        parser.read();
                    }
                    _ => {
                        return Err(error(
                            "Missing item separator",
                            "Expected a comma to mark the beginning of the next item.",
                            &next,
                        ));
                    }
                }
            }
        })
    }

    fn object(&mut self) -> Parsed<()> {
        let open = self.read();
        // `for` is looked for with newlines skipped: a `for` expression
        // does not care about them, though an object constructor does.
        let is_for = self.with_newlines(false, |parser| parser.is_keyword(&parser.peek(), "for"));
        if is_for {
            return self.with_newlines(false, |parser| parser.for_expression(&open));
        }
        self.with_newlines(true, |parser| {
            loop {
                let next = parser.peek();
                match next.tok {
                    Tok::Newline => {
                        parser.read();
                        continue;
                    }
                    Tok::CBrace => {
                        parser.read();
                        return Ok(());
                    }
                    _ => {}
                }
                parser.expression()?;
                let next = parser.peek();
                if !matches!(next.tok, Tok::Equal | Tok::Colon) {
                    let (summary, detail) = match next.tok {
                        Tok::Newline | Tok::Comma => (
                            "Missing attribute value",
                            "Expected an attribute value, introduced by an equals sign (\"=\").",
                        ),
                        Tok::Ident => (
                            "Missing key/value separator",
                            "Expected an equals sign (\"=\") to mark the beginning of the attribute value. If you intended to given an attribute name containing periods or spaces, write the name in quotes to create a string literal.",
                        ),
                        _ => (
                            "Missing key/value separator",
                            "Expected an equals sign (\"=\") to mark the beginning of the attribute value.",
                        ),
                    };
                    return Err(error(summary, detail, &next));
                }
                parser.read();
                parser.expression()?;
                let next = parser.peek();
                match next.tok {
                    Tok::CBrace => {
                        parser.read();
                        return Ok(());
                    }
                    Tok::Comma | Tok::Newline => {
                        parser.read();
                    }
                    _ => {
                        return Err(error(
                            "Missing attribute separator",
                            "Expected a newline or comma to mark the beginning of the next attribute.",
                            &next,
                        ));
                    }
                }
            }
        })
    }

    /// `[for v in coll : value if cond]` or `{for k, v in coll : key =>
    /// value... if cond}`, after the opening bracket; newlines never count
    /// inside.
    fn for_expression(&mut self, open: &Token) -> Parsed<()> {
        self.with_newlines(false, |parser| {
            let invalid = |detail: &str, at: &Token| error("Invalid 'for' expression", detail, at);
            parser.read(); // for
            let name = parser.peek();
            if name.tok != Tok::Ident {
                return Err(invalid(
                    "For expression requires variable name after 'for'.",
                    &name,
                ));
            }
            parser.read();
            if parser.peek().tok == Tok::Comma {
                parser.read();
                let value = parser.peek();
                if value.tok != Tok::Ident {
                    return Err(invalid(
                        "For expression requires value variable name after comma.",
                        &value,
                    ));
                }
                parser.read();
            }
            let keyword = parser.peek();
            if !parser.is_keyword(&keyword, "in") {
                return Err(invalid(
                    "For expression requires the 'in' keyword after its name declarations.",
                    &keyword,
                ));
            }
            parser.read();
            parser.expression()?;
            let colon = parser.peek();
            if colon.tok != Tok::Colon {
                return Err(invalid(
                    "For expression requires a colon after the collection expression.",
                    &colon,
                ));
            }
            parser.read();
            let first = parser.peek();
            parser.expression()?;
            let key = if parser.peek().tok == Tok::FatArrow {
                parser.read();
                parser.expression()?;
                Some(first)
            } else {
                None
            };
            let ellipsis = if parser.peek().tok == Tok::Ellipsis {
                Some(parser.read())
            } else {
                None
            };
            if parser.is_keyword(&parser.peek(), "if") {
                parser.read();
                parser.expression()?;
            }
            let (close, makes_object) = if open.tok == Tok::OBrace {
                (Tok::CBrace, true)
            } else {
                (Tok::CBrack, false)
            };
            let end = parser.peek();
            if end.tok != close {
                return Err(invalid(
                    "Extra characters after the end of the 'for' expression.",
                    &end,
                ));
            }
            parser.read();
            match (makes_object, key, ellipsis) {
                (false, Some(key), _) => Err(invalid(
                    "Key expression is not valid when building a tuple.",
                    &key,
                )),
                (false, None, Some(ellipsis)) => Err(invalid(
                    "Grouping ellipsis (...) cannot be used when building a tuple.",
                    &ellipsis,
                )),
                (true, None, _) => Err(invalid(
                    "Key expression is required when building an object.",
                    &first,
                )),
                _ => Ok(()),
            }
        })
    }

    /// A quoted template or heredoc after its opener, through `end`.
    fn template(&mut self, end: Tok) -> Parsed<()> {
        let mut directives = Vec::new();
        loop {
            let token = self.read();
            match token.tok {
                tok if tok == end => break,
                Tok::QuotedLit => unescape(self.text(&token), token.start, &mut String::new())?,
                Tok::StringLit => {}
                Tok::TemplateInterp => self.with_newlines(false, |parser| {
                    parser.expression()?;
                    let close = parser.peek();
                    if close.tok != Tok::TemplateSeqEnd {
                        let detail = if close.tok == Tok::Colon {
                            "Template interpolation doesn't expect a colon at this location. Did you intend this to be a literal sequence to be processed as part of another language? If so, you can escape it by starting with \"$${\" instead of just \"${\"."
                        } else {
                            "Expected a closing brace to end the interpolation expression, but found extra characters.\n\nThis can happen when you include interpolation syntax for another language, such as shell scripting, but forget to escape the interpolation start token. If this is an embedded sequence for another language, escape it by starting with \"$${\" instead of just \"${\"."
                        };
                        return Err(error(
                            "Extra characters after interpolation expression",
                            detail,
                            &close,
                        ));
                    }
                    parser.read();
                    Ok(())
                })?,
                Tok::TemplateControl => {
                    let directive = self.with_newlines(false, |parser| parser.directive())?;
                    directives.push((directive, token));
                }
                _ => {
                    return Err(error(
                        "Unterminated template string",
                        "No closing marker was found for the string.",
                        &token,
                    ));
                }
            }
        }
        check_directives(&directives, self.prev_end())
    }

    /// One `%{ ... }` sequence, after its opener.
    fn directive(&mut self) -> Parsed<Directive> {
        let keyword = self.peek();
        if keyword.tok != Tok::Ident {
            return Err(error(
                "Invalid template directive",
                "A template directive keyword (\"if\", \"for\", etc) is expected at the beginning of a %{ sequence.",
                &keyword,
            ));
        }
        self.read();
        let directive = match self.text(&keyword) {
            "if" => {
                self.expression()?;
                Directive::If
            }
            "else" => Directive::Else,
            "endif" => Directive::EndIf,
            "endfor" => Directive::EndFor,
            "for" => {
                let invalid =
                    |detail: &str, at: &Token| error("Invalid 'for' directive", detail, at);
                let name = self.peek();
                if name.tok != Tok::Ident {
                    return Err(invalid(
                        "For directive requires variable name after 'for'.",
                        &name,
                    ));
                }
                self.read();
                if self.peek().tok == Tok::Comma {
                    self.read();
                    let value = self.peek();
                    if value.tok != Tok::Ident {
                        return Err(invalid(
                            "For directive requires value variable name after comma.",
                            &value,
                        ));
                    }
                    self.read();
                }
                let keyword = self.peek();
                if !self.is_keyword(&keyword, "in") {
                    return Err(invalid(
                        "For directive requires 'in' keyword after names.",
                        &keyword,
                    ));
                }
                self.read();
                self.expression()?;
                Directive::For
            }
            other => {
                return Err(error(
                    "Invalid template control keyword",
                    format!("{other:?} is not a valid template control keyword."),
                    &keyword,
                ));
            }
        };
        let close = self.peek();
        if close.tok != Tok::TemplateSeqEnd {
            return Err(error(
                format!("Extra characters in {} marker", self.text(&keyword)),
                "Expected a closing brace to end the sequence, but found extra characters.",
                &close,
            ));
        }
        self.read();
        Ok(directive)
    }
}

fn missing_attribute_name(at: &Token) -> SyntaxError {
    error(
        "Invalid attribute name",
        "An attribute name is required after a dot.",
        at,
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Directive {
    If,
    Else,
    EndIf,
    For,
    EndFor,
}

/// The `%{ if }` and `%{ for }` directives of one template must nest and
/// close, as HCL's template parser requires.
fn check_directives(directives: &[(Directive, Token)], end: usize) -> Parsed<()> {
    // Each open directive, and whether an `if` has seen its `else`.
    let mut open: Vec<(Directive, bool)> = Vec::new();
    for (directive, token) in directives {
        let unexpected = |name: &str, detail: &str| {
            Err(error(
                format!("Unexpected {name} directive"),
                detail.to_string(),
                token,
            ))
        };
        match (directive, open.last_mut()) {
            (Directive::If | Directive::For, _) => open.push((*directive, false)),
            (Directive::Else, Some((Directive::If, seen_else))) if !*seen_else => {
                *seen_else = true;
            }
            (Directive::Else, Some((Directive::If, _))) => {
                return unexpected("else", "Already in the else clause for the if.");
            }
            (Directive::Else, Some((Directive::For, _))) => {
                return unexpected(
                    "else",
                    "An else clause is not expected for a for directive.",
                );
            }
            (Directive::EndIf, Some((Directive::If, _)))
            | (Directive::EndFor, Some((Directive::For, _))) => {
                open.pop();
            }
            (Directive::EndIf, Some(_)) => {
                return unexpected("endif", "Expecting an endfor directive.");
            }
            (Directive::EndFor, Some(_)) => {
                return unexpected("endfor", "Expecting an endif directive.");
            }
            (other, _) => {
                let name = match other {
                    Directive::Else => "else",
                    Directive::EndIf => "endif",
                    _ => "endfor",
                };
                return unexpected(
                    name,
                    "The control directives within this template are unbalanced.",
                );
            }
        }
    }
    match open.last() {
        None => Ok(()),
        Some((directive, _)) => {
            let (name, closer) = if *directive == Directive::If {
                ("if", "endif")
            } else {
                ("for", "endfor")
            };
            Err(SyntaxError {
                summary: "Unexpected end of template".into(),
                detail: format!(
                    "The {name} directive is missing its corresponding {closer} directive."
                ),
                span: end..end,
            })
        }
    }
}

/// HCL's number literals are decimal numbers with an optional fraction
/// and exponent; the scanner lets through more (`1.2.3`) for this check.
fn check_number(text: &str, at: &Token) -> Parsed<()> {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(e) => (&text[..e], Some(&text[e + 1..])),
        None => (text, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((whole, fraction)) => !whole.is_empty() && digits(whole) && digits(fraction),
        None => !mantissa.is_empty() && digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    if mantissa_ok && exponent_ok {
        Ok(())
    } else {
        Err(error(
            "Invalid number literal",
            "Failed to recognize the value of this number literal.",
            at,
        ))
    }
}

/// Appends the value of quoted template text to `out`, checking its
/// escapes as HCL does. `offset` places errors in the file.
fn unescape(text: &str, offset: usize, out: &mut String) -> Parsed<()> {
    let invalid = |detail: String, at: usize, len: usize| SyntaxError {
        summary: "Invalid escape sequence".into(),
        detail,
        span: offset + at..offset + at + len,
    };
    let mut chars = text.char_indices().peekable();
    while let Some((at, ch)) = chars.next() {
        match ch {
            '\\' => {
                let Some((_, selector)) = chars.next() else {
                    return Err(invalid(
                        "Backslash must be followed by an escape sequence selector character."
                            .into(),
                        at,
                        1,
                    ));
                };
                match selector {
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    'u' | 'U' => {
                        let wanted = if selector == 'u' { 4 } else { 8 };
                        let hex: String = std::iter::from_fn(|| {
                            chars
                                .next_if(|(_, c)| c.is_ascii_hexdigit())
                                .map(|(_, c)| c)
                        })
                        .take(wanted)
                        .collect();
                        if hex.len() != wanted {
                            let which = if wanted == 4 {
                                "\\u escape sequence must be followed by four"
                            } else {
                                "\\U escape sequence must be followed by eight"
                            };
                            return Err(invalid(
                                format!("The {which} hexadecimal digits."),
                                at,
                                2 + hex.len(),
                            ));
                        }
                        let code = u32::from_str_radix(&hex, 16).unwrap_or(u32::MAX);
                        match char::from_u32(code) {
                            Some(decoded) => out.push(decoded),
                            None => {
                                return Err(invalid(
                                    format!("Cannot encode character U+{code:04x} in UTF-8."),
                                    at,
                                    2 + wanted,
                                ));
                            }
                        }
                    }
                    other => {
                        return Err(invalid(
                            format!(
                                "The symbol {:?} is not a valid escape sequence selector.",
                                other.to_string()
                            ),
                            at,
                            1 + other.len_utf8(),
                        ));
                    }
                }
            }
            '$' | '%' if text[at + 1..].starts_with(&format!("{ch}{{")) => {
                chars.next();
                chars.next();
                out.push(ch);
                out.push('{');
            }
            other => out.push(other),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(src: &str) -> bool {
        parse_body(src).is_ok()
    }

    #[test]
    fn newlines_in_an_object_for_value_are_ignored() {
        assert!(accepts(
            "locals {\n  x = { for k in y : k => a == \"n\" ? b[k] :\n    a == \"t\" ? title(b[k]) : lower(b[k])\n  }\n}\n"
        ));
    }

    #[test]
    fn newlines_count_in_object_constructors_and_bodies() {
        assert!(!accepts("a = { b = 1 ?\n 2 : 3 }\n"));
        assert!(accepts("a = [ 1 ?\n 2 : 3 ]\n"));
        assert!(!accepts("a = 1 +\n 2\n"));
        assert!(accepts("a = (1 +\n 2)\n"));
        assert!(!accepts("a = 1 b = 2\n"));
        assert!(accepts("a = 1 # note\nb = 2"));
        assert!(!accepts("a = 1 /* note */ b = 2\n"));
    }

    #[test]
    fn blocks_and_their_labels() {
        let body = parse_body("b \"x\\u0041\" y {\n  c = 1\n}\nd { e = 2 }\n").expect("parses");
        let Item::Block { labels, body, .. } = &body.items[0] else {
            panic!("block expected");
        };
        assert_eq!(labels[0].value, "xA");
        assert_eq!(labels[1].value, "y");
        assert_eq!(body.items.len(), 1);
        assert!(!accepts("b \"${x}\" {}\n"));
        assert!(accepts("b {\n}"));
        assert!(accepts("b {\n}\n"));
        assert!(!accepts("b { c = 1\n}\n"));
    }

    #[test]
    fn repeated_arguments_are_refused() {
        let err = parse_body("a = 1\na = 2\n").expect_err("refused");
        assert_eq!(err.summary, "Attribute redefined");
    }

    #[test]
    fn template_directives_must_balance() {
        assert!(accepts("a = \"%{ if x }y%{ else }z%{ endif }\"\n"));
        assert!(accepts(
            "a = <<EOT\n%{ for v in x ~}\n${v}\n%{ endfor ~}\nEOT\n"
        ));
        assert!(!accepts("a = \"%{ if x }y\"\n"));
        assert!(!accepts("a = \"%{ endif }\"\n"));
        assert!(!accepts("a = \"%{ for v in x }%{ else }%{ endfor }\"\n"));
    }

    #[test]
    fn escapes_and_numbers_are_checked() {
        assert!(accepts("a = \"\\n\\u00e9\\U0001F600$${x}\"\n"));
        assert!(!accepts("a = \"\\q\"\n"));
        assert!(!accepts("a = \"\\u12\"\n"));
        assert!(!accepts("a = 1.2.3\n"));
        assert!(!accepts("a = b.0.1\n"));
        assert!(accepts("a = b.0.c[1].*.d\n"));
        assert!(accepts("a = provider::aws::arn_parse(x)\n"));
        assert!(!accepts("a = provider::aws::\n"));
    }

    /// The bodies the differential test once found tfinstall and
    /// Terraform disagreeing on, filed under Terraform's verdict.
    #[test]
    fn regression_cases_get_terraforms_verdict() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/hcl-differential");
        let mut checked = 0;
        for (verdict, accepted) in [("accepted", true), ("rejected", false)] {
            for entry in std::fs::read_dir(root.join(verdict)).expect("regression cases") {
                let path = entry.expect("entry").path();
                let text = std::fs::read_to_string(&path).expect("read");
                assert_eq!(accepts(&text), accepted, "{}", path.display());
                checked += 1;
            }
        }
        assert!(checked >= 2);
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("a = {}1{}\n", "(".repeat(200), ")".repeat(200));
        assert!(accepts(&deep));
        let deeper = format!("a = {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            parse_body(&deeper).expect_err("refused").summary,
            "Nested too deeply"
        );
        let blocks = format!("{}{}", "b {\n".repeat(100_000), "}\n".repeat(100_000));
        assert_eq!(
            parse_body(&blocks).expect_err("refused").summary,
            "Nested too deeply"
        );
        let conditionals = format!("a = {}1\n", "x ? 1 : ".repeat(100_000));
        assert!(parse_body(&conditionals).is_err());
    }
}
