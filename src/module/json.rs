//! The JSON configuration syntax (`.tf.json`).
//!
//! A small scanner of our own instead of serde_json because HCL's JSON
//! syntax needs what a generic JSON value drops: byte positions for
//! diagnostics, property order, and repeated property names (two `resource`
//! keys in one object are two sets of blocks).

use std::ops::Range;

use hcl::eval::{Context, Evaluate};
use hcl::expr::TemplateExpr;

use crate::diag::{Diagnostic, Diagnostics};

use super::range::{DiagnosticExt, LineIndex};
use super::syntax::{
    Attr, AttrSchema, Block, BlockSchema, Body, BodySchema, Expr, ExprKind, dynamic_kind,
    expr_from_value,
};

/// Deep enough for any real configuration, shallow enough that hostile
/// input cannot exhaust the stack.
const MAX_DEPTH: usize = 256;

#[derive(Debug)]
struct Value {
    kind: Kind,
    span: Range<usize>,
}

#[derive(Debug)]
enum Kind {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    Object(Vec<Property>),
}

#[derive(Debug)]
struct Property {
    key: String,
    key_span: Range<usize>,
    value: Value,
}

#[derive(Debug)]
struct SyntaxError {
    message: String,
    offset: usize,
}

/// Parses a whole `.tf.json` file; malformed JSON ends the file.
pub(super) fn parse_file(
    src: &str,
    index: &LineIndex,
    schema: &BodySchema,
    diags: &mut Diagnostics,
) -> Option<Body> {
    let root = match Scanner::new(src).document() {
        Ok(root) => root,
        Err(err) => {
            diags.push(
                Diagnostic::error("Invalid JSON syntax", err.message)
                    .with_range(&index.range(err.offset..err.offset)),
            );
            return None;
        }
    };
    let lowerer = Lowerer { index };
    let mut body = Body {
        attrs: Vec::new(),
        blocks: Vec::new(),
    };
    match &root.kind {
        Kind::Object(props) => lowerer.body_into(props, schema, &mut body, diags),
        Kind::Array(items)
            if items
                .iter()
                .all(|item| matches!(item.kind, Kind::Object(_))) =>
        {
            for item in items {
                if let Kind::Object(props) = &item.kind {
                    lowerer.body_into(props, schema, &mut body, diags);
                }
            }
        }
        _ => {
            diags.push(
                Diagnostic::error(
                    "Root value must be object",
                    "The root value in a JSON-based configuration must be either a JSON object or a JSON array of objects.",
                )
                .with_range(&index.range(root.span.clone())),
            );
            return None;
        }
    }
    Some(body)
}

struct Lowerer<'a> {
    index: &'a LineIndex,
}

impl Lowerer<'_> {
    fn body_into(
        &self,
        props: &[Property],
        schema: &BodySchema,
        out: &mut Body,
        diags: &mut Diagnostics,
    ) {
        for prop in props {
            // HCL's JSON syntax reserves "//" for comments.
            if prop.key == "//" {
                continue;
            }
            let block_schema = match schema.attrs {
                AttrSchema::All | AttrSchema::NamesOnly => None,
                AttrSchema::Named(_) => schema.block(&prop.key),
            };
            if let Some(block_schema) = block_schema {
                let def_range = self.index.range(prop.key_span.clone());
                self.blocks_into(
                    block_schema,
                    &prop.value,
                    Vec::new(),
                    &def_range,
                    out,
                    diags,
                );
            } else if schema.attrs.keeps(&prop.key) {
                out.attrs.push(Attr {
                    name: prop.key.clone(),
                    expr: self.expr(&prop.value),
                    name_range: self.index.range(prop.key_span.clone()),
                });
            }
        }
    }

    /// Unwraps one JSON object level per block label; an array at any level
    /// stands for several blocks.
    fn blocks_into(
        &self,
        schema: &BlockSchema,
        value: &Value,
        labels: Vec<String>,
        def_range: &super::range::SrcRange,
        out: &mut Body,
        diags: &mut Diagnostics,
    ) {
        match &value.kind {
            Kind::Array(items) => {
                for item in items {
                    self.blocks_into(schema, item, labels.clone(), def_range, out, diags);
                }
            }
            Kind::Object(props) if labels.len() < schema.labels.len() => {
                for prop in props {
                    let mut labels = labels.clone();
                    labels.push(prop.key.clone());
                    let def_range = def_range.to(&self.index.range(prop.key_span.clone()));
                    self.blocks_into(schema, &prop.value, labels, &def_range, out, diags);
                }
            }
            Kind::Object(props) => {
                let mut body = Body {
                    attrs: Vec::new(),
                    blocks: Vec::new(),
                };
                self.body_into(props, schema.body, &mut body, diags);
                out.blocks.push(Block {
                    kind: schema.kind.to_string(),
                    labels,
                    def_range: def_range.clone(),
                    body,
                });
            }
            _ => {
                let detail = match schema.labels.get(labels.len()) {
                    Some(label) => format!(
                        "A JSON object is required, whose keys represent the {label} of the \"{}\" block.",
                        schema.kind
                    ),
                    None => format!(
                        "Either a JSON object or a JSON array of objects is required, representing the contents of one or more \"{}\" blocks.",
                        schema.kind
                    ),
                };
                diags.push(
                    Diagnostic::error("Incorrect JSON value type", detail)
                        .with_range(&self.index.range(value.span.clone())),
                );
            }
        }
    }

    fn expr(&self, value: &Value) -> Expr {
        let range = self.index.range(value.span.clone());
        let kind = match &value.kind {
            Kind::Null => ExprKind::Null,
            Kind::Bool(b) => ExprKind::Bool(*b),
            Kind::Number(n) => ExprKind::Number(*n),
            Kind::String(text) if text.contains("${") || text.contains("%{") => {
                return match TemplateExpr::QuotedString(text.clone()).evaluate(&Context::new()) {
                    Ok(value) => expr_from_value(value, &range, true),
                    Err(err) => Expr {
                        kind: dynamic_kind(&err),
                        range,
                        from_json: true,
                    },
                };
            }
            Kind::String(text) => ExprKind::String(text.clone()),
            Kind::Array(items) => {
                ExprKind::List(items.iter().map(|item| self.expr(item)).collect())
            }
            Kind::Object(props) => ExprKind::Object(
                props
                    .iter()
                    .map(|prop| {
                        let key = Expr {
                            kind: ExprKind::String(prop.key.clone()),
                            range: self.index.range(prop.key_span.clone()),
                            from_json: true,
                        };
                        (key, self.expr(&prop.value))
                    })
                    .collect(),
            ),
        };
        Expr {
            kind,
            range,
            from_json: true,
        }
    }
}

struct Scanner<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Scanner<'a> {
    fn new(src: &'a str) -> Self {
        Scanner {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            depth: 0,
        }
    }

    fn error<T>(&self, message: impl Into<String>) -> Result<T, SyntaxError> {
        Err(SyntaxError {
            message: message.into(),
            offset: self.pos,
        })
    }

    fn document(&mut self) -> Result<Value, SyntaxError> {
        let value = self.value()?;
        self.skip_whitespace();
        if self.pos < self.bytes.len() {
            return self.error("Extraneous data after value: only one JSON value is allowed.");
        }
        Ok(value)
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        self.skip_whitespace();
        if self.bytes.get(self.pos) == Some(&byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Value, SyntaxError> {
        self.skip_whitespace();
        let start = self.pos;
        let kind = match self.bytes.get(self.pos) {
            None => return self.error("Unexpected end of file: a JSON value is expected."),
            Some(b'{') => self.nested(Self::object)?,
            Some(b'[') => self.nested(Self::array)?,
            Some(b'"') => Kind::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => Kind::Number(self.number()?),
            Some(_) => self.keyword()?,
        };
        Ok(Value {
            kind,
            span: start..self.pos,
        })
    }

    fn nested(
        &mut self,
        parse: fn(&mut Self) -> Result<Kind, SyntaxError>,
    ) -> Result<Kind, SyntaxError> {
        if self.depth >= MAX_DEPTH {
            return self.error("Nesting too deep: JSON values are nested too deeply.");
        }
        self.depth += 1;
        let kind = parse(self);
        self.depth -= 1;
        kind
    }

    fn object(&mut self) -> Result<Kind, SyntaxError> {
        self.pos += 1;
        let mut props = Vec::new();
        if self.eat(b'}') {
            return Ok(Kind::Object(props));
        }
        loop {
            self.skip_whitespace();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return self.error(
                    "Invalid object property name: a JSON object property name must be a string.",
                );
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = key_start..self.pos;
            if !self.eat(b':') {
                return self.error(
                    "Missing property value colon: a colon is required after a property name.",
                );
            }
            let value = self.value()?;
            props.push(Property {
                key,
                key_span,
                value,
            });
            if self.eat(b',') {
                continue;
            }
            if self.eat(b'}') {
                return Ok(Kind::Object(props));
            }
            return self.error("Missing attribute seperator comma: a comma or a closing brace is required after a property value.");
        }
    }

    fn array(&mut self) -> Result<Kind, SyntaxError> {
        self.pos += 1;
        let mut items = Vec::new();
        if self.eat(b']') {
            return Ok(Kind::Array(items));
        }
        loop {
            items.push(self.value()?);
            if self.eat(b',') {
                continue;
            }
            if self.eat(b']') {
                return Ok(Kind::Array(items));
            }
            return self.error("Missing array element separator: a comma or a closing bracket is required after an array element.");
        }
    }

    fn keyword(&mut self) -> Result<Kind, SyntaxError> {
        let rest = &self.src[self.pos..];
        for (word, kind) in [
            ("null", Kind::Null),
            ("true", Kind::Bool(true)),
            ("false", Kind::Bool(false)),
        ] {
            if rest.starts_with(word) {
                self.pos += word.len();
                return Ok(kind);
            }
        }
        self.error(
            "Invalid JSON value: expected a string, number, object, array, true, false or null.",
        )
    }

    fn number(&mut self) -> Result<f64, SyntaxError> {
        let start = self.pos;
        let digits = |scanner: &mut Self| {
            let from = scanner.pos;
            while scanner
                .bytes
                .get(scanner.pos)
                .is_some_and(u8::is_ascii_digit)
            {
                scanner.pos += 1;
            }
            scanner.pos > from
        };
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        if !digits(self) {
            return self.error("Invalid number: digits are required.");
        }
        if self.bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if !digits(self) {
                return self.error("Invalid number: digits are required after the decimal point.");
            }
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
            if !digits(self) {
                return self.error("Invalid number: digits are required in the exponent.");
            }
        }
        match self.src[start..self.pos].parse() {
            Ok(number) => Ok(number),
            Err(_) => self.error("Invalid number."),
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = &self.src[self.pos..];
            let Some(c) = rest.chars().next() else {
                return self.error("Unterminated string: a closing quote is required.");
            };
            match c {
                '"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                '\\' => {
                    self.pos += 1;
                    out.push(self.escape()?);
                }
                c if (c as u32) < 0x20 => {
                    return self.error("Invalid string: control characters must be escaped.");
                }
                c => {
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    fn escape(&mut self) -> Result<char, SyntaxError> {
        let Some(&byte) = self.bytes.get(self.pos) else {
            return self.error("Unterminated string: a closing quote is required.");
        };
        self.pos += 1;
        Ok(match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = self.hex4()?;
                if (0xD800..0xDC00).contains(&high) && self.src[self.pos..].starts_with("\\u") {
                    self.pos += 2;
                    let low = self.hex4()?;
                    let combined =
                        0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF);
                    char::from_u32(combined).unwrap_or(char::REPLACEMENT_CHARACTER)
                } else {
                    char::from_u32(high).unwrap_or(char::REPLACEMENT_CHARACTER)
                }
            }
            _ => return self.error("Invalid escape sequence in string."),
        })
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let digits = self.src.get(self.pos..self.pos + 4);
        match digits.and_then(|d| u32::from_str_radix(d, 16).ok()) {
            Some(value) if digits.is_some_and(|d| d.bytes().all(|b| b.is_ascii_hexdigit())) => {
                self.pos += 4;
                Ok(value)
            }
            _ => self.error("Invalid escape sequence: \\u needs four hexadecimal digits."),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::syntax::{ExprKind, TOP_LEVEL};
    use super::*;

    fn parse(src: &str) -> (Option<Body>, Diagnostics) {
        let index = LineIndex::new(Path::new("main.tf.json"), src);
        let mut diags = Diagnostics::new();
        let body = parse_file(src, &index, &TOP_LEVEL, &mut diags);
        (body, diags)
    }

    #[test]
    fn scans_values_with_positions() {
        let mut scanner =
            Scanner::new("{\"a\": [1, -2.5e1, true, null, \"x\\u00e9\\ud83d\\ude00\"], \"a\": {}}");
        let value = scanner.document().expect("valid");
        let Kind::Object(props) = value.kind else {
            panic!("object expected")
        };
        assert_eq!(props.len(), 2, "repeated keys are kept");
        assert_eq!(props[0].key_span, 1..4);
        let Kind::Array(items) = &props[0].value.kind else {
            panic!("array expected")
        };
        assert!(matches!(items[1].kind, Kind::Number(n) if n == -25.0));
        assert!(matches!(&items[4].kind, Kind::String(s) if s == "xé😀"));
    }

    #[test]
    fn rejects_malformed_json_with_position() {
        let (body, diags) =
            parse("{\n  \"provider\": {\n    \"aws\": {\"region\" \"x\"}\n  }\n}\n");
        assert!(body.is_none());
        let diag = &diags.0[0];
        assert_eq!(diag.summary, "Invalid JSON syntax");
        assert_eq!(diag.subject.as_ref().map(|pos| pos.line), Some(3));
    }

    #[test]
    fn hostile_nesting_is_an_error_not_a_crash() {
        let src = "[".repeat(100_000);
        let (body, diags) = parse(&src);
        assert!(body.is_none());
        assert!(diags.has_errors());
    }

    #[test]
    fn expands_labels_and_block_lists() {
        let (body, diags) = parse(
            r#"{
  "//": "comment",
  "resource": {
    "aws_instance": {
      "web": [{"provider": "aws.west"}, {"ami": "x"}]
    }
  },
  "terraform": [{"required_providers": {"aws": {"source": "hashicorp/aws"}}}]
}"#,
        );
        assert!(diags.is_empty(), "{diags}");
        let body = body.expect("parsed");
        let resources: Vec<_> = body
            .blocks
            .iter()
            .filter(|b| b.kind == "resource")
            .collect();
        assert_eq!(resources.len(), 2);
        assert_eq!(resources[0].labels, ["aws_instance", "web"]);
        assert_eq!(resources[0].def_range.start.line, 3);
        let provider = resources[0].body.attr("provider").expect("provider");
        assert_eq!(provider.expr.as_str(), Some("aws.west"));
        assert!(provider.expr.from_json);
        let terraform = body
            .blocks
            .iter()
            .find(|b| b.kind == "terraform")
            .expect("terraform");
        let required = &terraform.body.blocks[0];
        assert!(matches!(
            required.body.attrs[0].expr.kind,
            ExprKind::Object(_)
        ));
    }

    #[test]
    fn interpolated_strings_are_evaluated_or_rejected() {
        let (body, _) = parse(
            r#"{"module": {"a": {"source": "./m${\"od\"}"}, "b": {"source": "${var.dir}"}}}"#,
        );
        let body = body.expect("parsed");
        assert_eq!(body.blocks[0].body.attrs[0].expr.as_str(), Some("./mod"));
        let problem = body.blocks[1].body.attrs[0]
            .expr
            .static_problem()
            .expect("dynamic");
        assert_eq!(problem.summary, "Variables not allowed");
    }
}
