//! The native HCL syntax (`.tf`): the structure is read by tfinstall's own
//! reader (`native/parse.rs`, which accepts exactly what Terraform
//! accepts), and the few expressions that decide requirements are read by
//! hcl-edit, which keeps the byte spans we need for Terraform-style
//! `file:line` diagnostics and whose values hcl-rs can fold.

mod parse;
mod scan;

use std::ops::Range;

use hcl::edit::Span;
use hcl::edit::expr::{Expression, ObjectKey};
use hcl::eval::{Context, Evaluate};

use crate::diag::{Diagnostic, Diagnostics};

use super::range::{DiagnosticExt, LineIndex, SrcRange};
use super::syntax::{
    Attr, AttrSchema, Block, Body, BodySchema, Expr, ExprKind, dynamic_kind, expr_from_value,
    label_count_problem, traversal_of,
};
use parse::{Item, SyntaxError};
use scan::Tok;

/// Parses a whole `.tf` file; a syntax error ends the file, as in HCL.
pub(super) fn parse_file(
    src: &str,
    index: &LineIndex,
    schema: &BodySchema,
    diags: &mut Diagnostics,
) -> Option<Body> {
    match parse::parse_body(src) {
        Ok(body) => Some(lower_body(src, &body, schema, index, diags)),
        Err(err) => {
            diags.push(syntax_diagnostic(src, err, index));
            None
        }
    }
}

/// A file Terraform refuses gets the message tfinstall has always given
/// for it when hcl-edit refuses it too, and HCL's own message (the one
/// Terraform prints) when only Terraform's grammar refuses it.
fn syntax_diagnostic(src: &str, err: SyntaxError, index: &LineIndex) -> Diagnostic {
    if let Err(edit_err) = hcl::edit::parser::parse_body(src) {
        let offset = edit_err.location().offset();
        return Diagnostic::invalid_hcl_syntax(edit_err.message())
            .with_range(&index.range(offset..offset));
    }
    Diagnostic::error(err.summary, err.detail).with_range(&index.range(err.span))
}

/// An hcl-edit span, moved from the start of an expression's own text to
/// its place in the file.
fn range_of(span: Option<Range<usize>>, offset: usize, index: &LineIndex) -> SrcRange {
    span.map_or_else(
        || index.file_start(),
        |span| index.range(span.start + offset..span.end + offset),
    )
}

fn lower_body(
    src: &str,
    body: &parse::Body,
    schema: &BodySchema,
    index: &LineIndex,
    diags: &mut Diagnostics,
) -> Body {
    let mut out = Body {
        attrs: Vec::new(),
        blocks: Vec::new(),
    };
    for item in &body.items {
        match item {
            Item::Attr { name, expr } => {
                let name_text = &src[name.clone()];
                if schema.attrs.keeps(name_text) {
                    let expr = match schema.attrs {
                        AttrSchema::NamesOnly => Expr {
                            kind: ExprKind::Unread,
                            range: index.range(expr.clone()),
                            from_json: false,
                        },
                        _ => read_expr(src, expr.clone(), index),
                    };
                    out.attrs.push(Attr {
                        name: name_text.to_string(),
                        expr,
                        name_range: index.range(name.clone()),
                    });
                }
            }
            Item::Block {
                kind: kind_span,
                labels,
                body,
            } => {
                let kind = &src[kind_span.clone()];
                let type_range = index.range(kind_span.clone());
                if matches!(schema.attrs, AttrSchema::All | AttrSchema::NamesOnly) {
                    diags.push(
                        Diagnostic::error(
                            format!("Unexpected {kind:?} block"),
                            "Blocks are not allowed here.",
                        )
                        .with_range(&type_range),
                    );
                    continue;
                }
                let Some(block_schema) = schema.block(kind) else {
                    continue;
                };
                let def_range = labels.last().map_or_else(
                    || type_range.clone(),
                    |label| type_range.to(&index.range(label.span.clone())),
                );
                if let Some(diag) = label_count_problem(block_schema, labels.len(), &def_range) {
                    diags.push(diag);
                    continue;
                }
                out.blocks.push(Block {
                    kind: kind.to_string(),
                    labels: labels.iter().map(|label| label.value.clone()).collect(),
                    def_range,
                    body: lower_body(src, body, block_schema.body, index, diags),
                });
            }
        }
    }
    out
}

/// Reads one kept expression from its span with hcl-edit. Where hcl-edit
/// cannot read what Terraform can (the grammar is already checked), the
/// value is one tfinstall does not fold, and it says why as Terraform
/// would: every place that keeps an expression needs a static value.
fn read_expr(src: &str, span: Range<usize>, index: &LineIndex) -> Expr {
    let text = &src[span.clone()];
    match hcl::edit::parser::parse_expr(text) {
        Ok(expr) => lower_expr(&expr, span.start, index),
        Err(_) => Expr {
            kind: unreadable_kind(text),
            range: index.range(span),
            from_json: false,
        },
    }
}

/// What Terraform reports for an expression evaluated without variables
/// or functions: its first function call or reference decides.
fn unreadable_kind(text: &str) -> ExprKind {
    let tokens = scan::scan(text);
    let mut names = tokens.iter().enumerate().filter(|(_, token)| {
        token.tok == Tok::Ident
            && !matches!(
                &text[token.start..token.end],
                "true" | "false" | "null" | "for" | "in" | "if"
            )
    });
    let call = names.clone().any(|(i, _)| {
        tokens[i + 1..]
            .iter()
            .find(|token| !matches!(token.tok, Tok::Comment | Tok::Newline))
            .is_some_and(|token| token.tok == Tok::OParen)
    });
    let (summary, detail) = if call {
        (
            "Function calls not allowed",
            "Functions may not be called here.",
        )
    } else if names.next().is_some() {
        ("Variables not allowed", "Variables may not be used here.")
    } else {
        (
            "Invalid expression",
            "A static value is required here: write it as a literal string, number, list or object.",
        )
    };
    ExprKind::Dynamic {
        summary: summary.to_string(),
        detail: detail.to_string(),
    }
}

fn lower_expr(expr: &Expression, offset: usize, index: &LineIndex) -> Expr {
    let range = range_of(expr.span(), offset, index);
    let kind = match expr {
        Expression::Null(_) => ExprKind::Null,
        Expression::Bool(value) => ExprKind::Bool(*value.value()),
        Expression::Number(value) => ExprKind::Number(value.value().as_f64().unwrap_or(f64::NAN)),
        Expression::String(value) => ExprKind::String(value.value().clone()),
        Expression::Array(array) => ExprKind::List(
            array
                .iter()
                .map(|item| lower_expr(item, offset, index))
                .collect(),
        ),
        Expression::Object(object) => ExprKind::Object(
            object
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        ObjectKey::Ident(ident) => Expr {
                            kind: ExprKind::String(ident.as_str().to_string()),
                            range: range_of(ident.span(), offset, index),
                            from_json: false,
                        },
                        ObjectKey::Expression(key) => lower_expr(key, offset, index),
                    };
                    (key, lower_expr(value.expr(), offset, index))
                })
                .collect(),
        ),
        Expression::Variable(_) | Expression::Traversal(_) => match traversal_of(expr) {
            Some(traversal) => ExprKind::Traversal(traversal),
            None => return evaluate(expr, &range),
        },
        _ => return evaluate(expr, &range),
    };
    Expr {
        kind,
        range,
        from_json: false,
    }
}

/// Folds an expression to a constant the way HCL's `Value(nil)` does: it
/// succeeds only if no variable or function is needed.
fn evaluate(expr: &Expression, range: &SrcRange) -> Expr {
    match hcl::Expression::from(expr.clone()).evaluate(&Context::new()) {
        Ok(value) => expr_from_value(value, range, false),
        Err(err) => Expr {
            kind: dynamic_kind(&err),
            range: range.clone(),
            from_json: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::syntax::{Step, TOP_LEVEL};
    use super::*;

    fn parse(src: &str) -> (Option<Body>, Diagnostics) {
        let index = LineIndex::new(Path::new("main.tf"), src);
        let mut diags = Diagnostics::new();
        let body = parse_file(src, &index, &TOP_LEVEL, &mut diags);
        (body, diags)
    }

    #[test]
    fn keeps_only_blocks_that_matter() {
        let (body, diags) = parse(
            "variable \"x\" {}\nresource \"aws_instance\" \"web\" {\n  ami = var.x\n  provider = aws.west\n}\n",
        );
        assert!(diags.is_empty(), "{diags}");
        let body = body.expect("parsed");
        assert_eq!(body.blocks.len(), 1);
        let resource = &body.blocks[0];
        assert_eq!(resource.labels, ["aws_instance", "web"]);
        assert_eq!(resource.def_range.to_string(), "main.tf:2,1-30");
        let provider = resource.body.attr("provider").expect("provider kept");
        assert!(resource.body.attr("ami").is_none());
        assert!(matches!(
            &provider.expr.kind,
            ExprKind::Traversal(t) if t.root == "aws" && t.steps == [Step::Attr("west".into())]
        ));
    }

    #[test]
    fn folds_constant_expressions_only() {
        let (body, _) = parse(
            "module \"a\" {\n  source = \"./m${\"od\"}\"\n}\nmodule \"b\" {\n  source = format(\"%s\", \"x\")\n}\n",
        );
        let body = body.expect("parsed");
        let first = body.blocks[0].body.attr("source").expect("source");
        assert_eq!(first.expr.as_str(), Some("./mod"));
        let second = body.blocks[1].body.attr("source").expect("source");
        let problem = second.expr.static_problem().expect("needs a function");
        assert_eq!(problem.summary, "Function calls not allowed");
        assert_eq!(problem.subject.map(|pos| pos.line), Some(5));
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let (body, diags) = parse("provider \"aws\" {\n  region = \n}\n");
        assert!(body.is_none());
        let diag = &diags.0[0];
        assert_eq!(diag.summary, "Invalid HCL syntax");
        assert!(diag.subject.as_ref().is_some_and(|pos| pos.line >= 2));
    }

    #[test]
    fn wrong_label_count_is_reported() {
        let (body, diags) = parse("resource \"aws_instance\" {\n}\n");
        assert!(body.is_some_and(|b| b.blocks.is_empty()));
        assert_eq!(diags.0[0].summary, "Missing name for resource");
        assert_eq!(
            diags.0[0].detail,
            "All resource blocks must have 2 labels (type, name)."
        );
    }

    #[test]
    fn reads_what_hcl_edit_refuses() {
        let src = "locals {\n  x = { for k in y : k => a == \"n\" ? b[k] :\n    lower(b[k])\n  }\n}\nprovider \"aws\" {\n  alias = \"west\"\n}\n";
        assert!(hcl::edit::parser::parse_body(src).is_err());
        let (body, diags) = parse(src);
        assert!(diags.is_empty(), "{diags}");
        let body = body.expect("parsed");
        // The local's name is kept, its value is not read.
        assert_eq!(body.blocks[0].kind, "locals");
        let local = body.blocks[0].body.attr("x").expect("local kept");
        assert!(matches!(local.expr.kind, ExprKind::Unread));
        assert_eq!(body.blocks[1].labels, ["aws"]);
        let alias = body.blocks[1].body.attr("alias").expect("alias kept");
        assert_eq!(alias.expr.as_str(), Some("west"));
        assert_eq!(alias.expr.range.to_string(), "main.tf:7,11-17");
    }

    #[test]
    fn what_only_terraform_refuses_gets_hcls_message() {
        let src = "locals {\n  a = 1.2.3\n}\n";
        assert!(hcl::edit::parser::parse_body(src).is_ok());
        let (body, diags) = parse(src);
        assert!(body.is_none());
        assert_eq!(diags.0[0].summary, "Invalid number literal");
        assert_eq!(
            diags.0[0].detail,
            "Failed to recognize the value of this number literal."
        );
        assert_eq!(
            diags.0[0]
                .subject
                .as_ref()
                .map(|pos| (pos.line, pos.column)),
            Some((2, 7))
        );
    }

    #[test]
    fn what_both_refuse_keeps_its_message() {
        let src = "locals {\n  a = 1\n  a = 2\n}\n";
        let expected = hcl::edit::parser::parse_body(src).expect_err("refused");
        let (body, diags) = parse(src);
        assert!(body.is_none());
        assert_eq!(diags.0[0].summary, "Invalid HCL syntax");
        assert_eq!(
            diags.0[0].detail,
            Diagnostic::invalid_hcl_syntax(expected.message()).detail
        );
    }

    #[test]
    fn heredoc_values_are_read() {
        let (body, diags) = parse("module \"m\" {\n  source = <<EOT\n./mod\nEOT\n}\n");
        assert!(diags.is_empty(), "{diags}");
        let body = body.expect("parsed");
        let source = body.blocks[0].body.attr("source").expect("source");
        assert_eq!(source.expr.as_str(), Some("./mod\n"));
    }

    #[test]
    fn expressions_hcl_edit_cannot_read_need_what_terraform_says() {
        let (body, diags) = parse(
            "provider \"aws\" {\n  version = { for k in x : k => a ?\n    b : c }\n  alias = lower({ for k in [1] : k => 1 ?\n    2 : 3 })\n}\n",
        );
        assert!(diags.is_empty(), "{diags}");
        let body = body.expect("parsed");
        let provider = &body.blocks[0].body;
        let version = provider.attr("version").expect("version");
        let problem = version.expr.static_problem().expect("not static");
        assert_eq!(problem.summary, "Variables not allowed");
        assert_eq!(
            problem.subject.map(|pos| (pos.line, pos.column)),
            Some((2, 13))
        );
        let alias = provider.attr("alias").expect("alias");
        let problem = alias.expr.static_problem().expect("not static");
        assert_eq!(problem.summary, "Function calls not allowed");
    }
}
