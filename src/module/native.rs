//! The native HCL syntax (`.tf`), read with hcl-edit because it keeps the
//! byte spans we need for Terraform-style `file:line` diagnostics.

use hcl::edit::Span;
use hcl::edit::expr::{Expression, ObjectKey};
use hcl::edit::structure::{self, Structure};
use hcl::eval::{Context, Evaluate};

use crate::diag::{Diagnostic, Diagnostics};

use super::range::{DiagnosticExt, LineIndex, SrcRange};
use super::syntax::{
    Attr, AttrSchema, Block, Body, BodySchema, Expr, ExprKind, dynamic_kind, expr_from_value,
    label_count_problem, traversal_of,
};

/// Parses a whole `.tf` file; a syntax error ends the file, as in HCL.
pub(super) fn parse_file(
    src: &str,
    index: &LineIndex,
    schema: &BodySchema,
    diags: &mut Diagnostics,
) -> Option<Body> {
    match hcl::edit::parser::parse_body(src) {
        Ok(body) => Some(lower_body(&body, schema, index, diags)),
        Err(err) => {
            let location = err.location();
            let range = index.range(location.offset()..location.offset());
            diags.push(Diagnostic::invalid_hcl_syntax(err.message()).with_range(&range));
            None
        }
    }
}

fn range_of(span: Option<std::ops::Range<usize>>, index: &LineIndex) -> SrcRange {
    span.map_or_else(|| index.file_start(), |span| index.range(span))
}

fn lower_body(
    body: &structure::Body,
    schema: &BodySchema,
    index: &LineIndex,
    diags: &mut Diagnostics,
) -> Body {
    let mut out = Body {
        attrs: Vec::new(),
        blocks: Vec::new(),
    };
    for structure in body.iter() {
        match structure {
            Structure::Attribute(attr) => {
                if schema.attrs.keeps(attr.key.as_str()) {
                    out.attrs.push(Attr {
                        name: attr.key.as_str().to_string(),
                        expr: lower_expr(&attr.value, index),
                        name_range: range_of(attr.key.span(), index),
                    });
                }
            }
            Structure::Block(block) => {
                let kind = block.ident.as_str();
                let type_range = range_of(block.ident.span(), index);
                if matches!(schema.attrs, AttrSchema::All) {
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
                let def_range = block.labels.last().map_or_else(
                    || type_range.clone(),
                    |label| type_range.to(&range_of(label.span(), index)),
                );
                if let Some(diag) =
                    label_count_problem(block_schema, block.labels.len(), &def_range)
                {
                    diags.push(diag);
                    continue;
                }
                out.blocks.push(Block {
                    kind: kind.to_string(),
                    labels: block
                        .labels
                        .iter()
                        .map(|label| label.as_str().to_string())
                        .collect(),
                    def_range,
                    body: lower_body(&block.body, block_schema.body, index, diags),
                });
            }
        }
    }
    out
}

fn lower_expr(expr: &Expression, index: &LineIndex) -> Expr {
    let range = range_of(expr.span(), index);
    let kind = match expr {
        Expression::Null(_) => ExprKind::Null,
        Expression::Bool(value) => ExprKind::Bool(*value.value()),
        Expression::Number(value) => ExprKind::Number(value.value().as_f64().unwrap_or(f64::NAN)),
        Expression::String(value) => ExprKind::String(value.value().clone()),
        Expression::Array(array) => {
            ExprKind::List(array.iter().map(|item| lower_expr(item, index)).collect())
        }
        Expression::Object(object) => ExprKind::Object(
            object
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        ObjectKey::Ident(ident) => Expr {
                            kind: ExprKind::String(ident.as_str().to_string()),
                            range: range_of(ident.span(), index),
                            from_json: false,
                        },
                        ObjectKey::Expression(key) => lower_expr(key, index),
                    };
                    (key, lower_expr(value.expr(), index))
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
}
