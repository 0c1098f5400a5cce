//! One small syntax tree for both configuration syntaxes, so the
//! requirement rules are written once and behave the same for `.tf` and
//! `.tf.json` files.
//!
//! Only the parts of a file that can affect provider requirements are kept
//! (chosen by [`TOP_LEVEL`]); expressions are folded to constants where
//! Terraform would evaluate them without any variables or functions.

use hcl::edit::expr::{Expression, TraversalOperator};

use crate::diag::{Diagnostic, Diagnostics};

use super::range::{DiagnosticExt, SrcRange};

#[derive(Debug)]
pub(super) struct Body {
    pub attrs: Vec<Attr>,
    pub blocks: Vec<Block>,
}

impl Body {
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|attr| attr.name == name)
    }
}

#[derive(Debug)]
pub(super) struct Attr {
    pub name: String,
    pub expr: Expr,
    pub name_range: SrcRange,
}

#[derive(Debug)]
pub(super) struct Block {
    pub kind: String,
    pub labels: Vec<String>,
    /// Type name through last label, like HCL's DefRange.
    pub def_range: SrcRange,
    pub body: Body,
}

#[derive(Debug)]
pub(super) struct Expr {
    pub kind: ExprKind,
    pub range: SrcRange,
    /// JSON strings are templates that may hold references; native quoted
    /// strings holding references are a deprecated legacy form.
    pub from_json: bool,
}

#[derive(Debug)]
pub(super) enum ExprKind {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    List(Vec<Expr>),
    Object(Vec<(Expr, Expr)>),
    /// A reference such as `aws.west` or `aws_instance.web["a"]`.
    Traversal(Traversal),
    /// Something that needs variables or functions; carries the HCL
    /// diagnostic Terraform reports when such a value is required.
    Dynamic {
        summary: String,
        detail: String,
    },
    /// Not read: a `locals` value, whose name matters (it must be unique in
    /// its module) and whose value never does.
    Unread,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Traversal {
    pub root: String,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Attr(String),
    Index,
}

impl Expr {
    /// The error Terraform reports when this expression has to be known
    /// without an evaluation context, if it cannot be.
    pub fn static_problem(&self) -> Option<Diagnostic> {
        match &self.kind {
            ExprKind::Traversal(_) => Some(
                Diagnostic::error("Variables not allowed", "Variables may not be used here.")
                    .with_range(&self.range),
            ),
            ExprKind::Dynamic { summary, detail } => {
                Some(Diagnostic::error(summary.clone(), detail.clone()).with_range(&self.range))
            }
            ExprKind::List(items) => items.iter().find_map(Expr::static_problem),
            ExprKind::Object(items) => items
                .iter()
                .find_map(|(key, value)| key.static_problem().or_else(|| value.static_problem())),
            ExprKind::Null
            | ExprKind::Bool(_)
            | ExprKind::Number(_)
            | ExprKind::String(_)
            | ExprKind::Unread => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            ExprKind::String(value) => Some(value),
            _ => None,
        }
    }

    /// A bool, number or string converted to a string as cty's conversion
    /// does; `None` for anything else (null included: a bare `null` has no
    /// primitive type in HCL).
    pub fn primitive_string(&self) -> Option<String> {
        match &self.kind {
            ExprKind::Bool(value) => Some(value.to_string()),
            ExprKind::Number(value) => Some(format_number(*value)),
            ExprKind::String(value) => Some(value.clone()),
            _ => None,
        }
    }

    /// Reads the expression as an absolute traversal (HCL's
    /// AbsTraversalForExpr). A quoted native string is accepted with
    /// Terraform's deprecation warning, as its compatibility shim does.
    pub fn traversal(&self, diags: &mut Diagnostics) -> Option<Traversal> {
        match &self.kind {
            ExprKind::Traversal(traversal) => Some(traversal.clone()),
            ExprKind::String(text) => {
                let traversal = parse_traversal(text)?;
                if !self.from_json {
                    diags.push(
                        Diagnostic::warning(
                            "Quoted references are deprecated",
                            "In this context, references are expected literally rather than in quotes. Terraform 0.11 and earlier required quotes, but quoted references are now deprecated and will be removed in a future version of Terraform. Remove the quotes surrounding this reference to silence this warning.",
                        )
                        .with_range(&self.range),
                    );
                }
                Some(traversal)
            }
            _ => None,
        }
    }
}

/// Numbers become strings the way cty converts them: integral values
/// without a fraction, others in shortest round-trip form.
fn format_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        value.to_string()
    }
}

/// Parses reference text like `aws.west` (the JSON syntax's way to write
/// references, and the legacy quoted form).
pub(super) fn parse_traversal(text: &str) -> Option<Traversal> {
    let expr = hcl::edit::parser::parse_expr(text.trim()).ok()?;
    traversal_of(&expr)
}

/// A reference rooted at a name, keeping attribute steps by name; indexes
/// (literal or not) only mark their place, which is all callers need.
pub(super) fn traversal_of(expr: &Expression) -> Option<Traversal> {
    match expr {
        Expression::Variable(root) => Some(Traversal {
            root: root.as_str().to_string(),
            steps: Vec::new(),
        }),
        Expression::Traversal(traversal) => {
            let Expression::Variable(root) = &traversal.expr else {
                return None;
            };
            let steps = traversal
                .operators
                .iter()
                .map(|operator| match operator.value() {
                    TraversalOperator::GetAttr(name) => Some(Step::Attr(name.as_str().to_string())),
                    TraversalOperator::Index(_) | TraversalOperator::LegacyIndex(_) => {
                        Some(Step::Index)
                    }
                    TraversalOperator::AttrSplat(_) | TraversalOperator::FullSplat(_) => None,
                })
                .collect::<Option<Vec<_>>>()?;
            Some(Traversal {
                root: root.as_str().to_string(),
                steps,
            })
        }
        _ => None,
    }
}

/// Which block types and arguments a body keeps; everything else in a file
/// has no bearing on provider requirements and is skipped.
pub(super) struct BodySchema {
    pub attrs: AttrSchema,
    pub blocks: &'static [BlockSchema],
}

pub(super) enum AttrSchema {
    Named(&'static [&'static str]),
    /// Every argument is kept and nested blocks are errors (HCL's
    /// JustAttributes, used for `required_providers`).
    All,
    /// Every argument's name and place are kept, its value is not read
    /// (`locals`: Terraform refuses a name defined twice in a module).
    NamesOnly,
}

impl AttrSchema {
    pub fn keeps(&self, name: &str) -> bool {
        match self {
            AttrSchema::Named(names) => names.contains(&name),
            AttrSchema::All | AttrSchema::NamesOnly => true,
        }
    }
}

pub(super) struct BlockSchema {
    pub kind: &'static str,
    pub labels: &'static [&'static str],
    pub body: &'static BodySchema,
}

impl BodySchema {
    pub fn block(&self, kind: &str) -> Option<&'static BlockSchema> {
        self.blocks.iter().find(|block| block.kind == kind)
    }
}

const RESOURCE_BODY: BodySchema = BodySchema {
    attrs: AttrSchema::Named(&["provider"]),
    blocks: &[],
};

const DATA_BLOCK: BlockSchema = BlockSchema {
    kind: "data",
    labels: &["type", "name"],
    body: &RESOURCE_BODY,
};

pub(super) const TOP_LEVEL: BodySchema = BodySchema {
    attrs: AttrSchema::Named(&[]),
    blocks: &[
        BlockSchema {
            kind: "terraform",
            labels: &[],
            body: &BodySchema {
                attrs: AttrSchema::Named(&[]),
                blocks: &[BlockSchema {
                    kind: "required_providers",
                    labels: &[],
                    body: &BodySchema {
                        attrs: AttrSchema::All,
                        blocks: &[],
                    },
                }],
            },
        },
        BlockSchema {
            kind: "provider",
            labels: &["name"],
            body: &BodySchema {
                attrs: AttrSchema::Named(&["alias", "version"]),
                blocks: &[],
            },
        },
        BlockSchema {
            kind: "resource",
            labels: &["type", "name"],
            body: &RESOURCE_BODY,
        },
        DATA_BLOCK,
        BlockSchema {
            kind: "ephemeral",
            labels: &["type", "name"],
            body: &RESOURCE_BODY,
        },
        BlockSchema {
            kind: "module",
            labels: &["name"],
            body: &BodySchema {
                attrs: AttrSchema::Named(&["source", "version"]),
                blocks: &[],
            },
        },
        BlockSchema {
            kind: "import",
            labels: &[],
            body: &BodySchema {
                attrs: AttrSchema::Named(&["to", "provider"]),
                blocks: &[],
            },
        },
        BlockSchema {
            kind: "locals",
            labels: &[],
            body: &BodySchema {
                attrs: AttrSchema::NamesOnly,
                blocks: &[],
            },
        },
        BlockSchema {
            kind: "check",
            labels: &["name"],
            body: &BodySchema {
                attrs: AttrSchema::Named(&[]),
                blocks: &[DATA_BLOCK],
            },
        },
    ],
};

/// HCL's diagnostic for a block with the wrong number of labels, or `None`
/// when the count is right.
pub(super) fn label_count_problem(
    schema: &BlockSchema,
    found: usize,
    range: &SrcRange,
) -> Option<Diagnostic> {
    let wanted = schema.labels.len();
    let diag = if found < wanted {
        Diagnostic::error(
            format!("Missing {} for {}", schema.labels[found], schema.kind),
            format!(
                "All {} blocks must have {} labels ({}).",
                schema.kind,
                wanted,
                schema.labels.join(", ")
            ),
        )
    } else if found > wanted {
        let detail = if wanted == 0 {
            format!("No labels are expected for {} blocks.", schema.kind)
        } else {
            format!(
                "Only {} labels ({}) are expected for {} blocks.",
                wanted,
                schema.labels.join(", "),
                schema.kind
            )
        };
        Diagnostic::error(format!("Extraneous label for {}", schema.kind), detail)
    } else {
        return None;
    };
    Some(diag.with_range(range))
}

/// Maps an hcl-rs evaluation failure to the diagnostic HCL gives when an
/// expression is evaluated with no variables and no functions.
pub(super) fn dynamic_kind(err: &hcl::eval::Error) -> ExprKind {
    use hcl::eval::ErrorKind;
    let (summary, detail) = match err.kind() {
        ErrorKind::UndefinedVar(_) => (
            "Variables not allowed",
            "Variables may not be used here.".to_string(),
        ),
        ErrorKind::UndefinedFunc(_) => (
            "Function calls not allowed",
            "Functions may not be called here.".to_string(),
        ),
        other => ("Invalid expression", format!("{other}.")),
    };
    ExprKind::Dynamic {
        summary: summary.to_string(),
        detail,
    }
}

/// Turns an evaluated constant back into the tree, keeping the range of
/// the expression it came from.
pub(super) fn expr_from_value(value: hcl::Value, range: &SrcRange, from_json: bool) -> Expr {
    let kind = match value {
        hcl::Value::Null => ExprKind::Null,
        hcl::Value::Bool(b) => ExprKind::Bool(b),
        hcl::Value::Number(n) => ExprKind::Number(n.as_f64().unwrap_or(f64::NAN)),
        hcl::Value::String(s) => ExprKind::String(s),
        hcl::Value::Array(items) => ExprKind::List(
            items
                .into_iter()
                .map(|item| expr_from_value(item, range, from_json))
                .collect(),
        ),
        hcl::Value::Object(map) => ExprKind::Object(
            map.into_iter()
                .map(|(key, item)| {
                    (
                        Expr {
                            kind: ExprKind::String(key),
                            range: range.clone(),
                            from_json,
                        },
                        expr_from_value(item, range, from_json),
                    )
                })
                .collect(),
        ),
    };
    Expr {
        kind,
        range: range.clone(),
        from_json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_convert_like_cty() {
        assert_eq!(format_number(2.0), "2");
        assert_eq!(format_number(1000.0), "1000");
        assert_eq!(format_number(2.5), "2.5");
    }

    #[test]
    fn reference_text_parses_to_traversal() {
        assert_eq!(
            parse_traversal("aws.west"),
            Some(Traversal {
                root: "aws".into(),
                steps: vec![Step::Attr("west".into())],
            })
        );
        assert_eq!(parse_traversal("aws..west"), None);
        assert_eq!(parse_traversal("\"aws\""), None);
    }
}
