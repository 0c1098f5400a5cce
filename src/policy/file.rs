//! Reading a policy file: HCL 2 native syntax through hcl-rs's editing
//! parser, which keeps the byte spans every error needs to name its line.
//!
//! Users commit these files, so reading is strict: an argument or block
//! this version does not know is an error rather than ignored, since a
//! misspelt `deny` that silently did nothing would let through what it was
//! written to stop. Only literal values are accepted: a policy is read
//! before anything else and evaluates nothing.

use std::ops::Range;
use std::path::Path;

use hcl::edit::Span;
use hcl::edit::expr::Expression;
use hcl::edit::structure::{Attribute, Block, BlockLabel, Body, Structure};

use super::{Effect, Policy, Rule, Setting, TrustLevel};
use crate::addr::pattern::ProviderPattern;
use crate::diag::{Diagnostic, Diagnostics, SourceText};
use crate::version::VersionConstraints;

const TOP_LEVEL: &str = "A policy file sets default, min_trust and accept_expired_keys, and holds allow and deny blocks (see docs/policy.md).";

pub(super) fn parse(src: &str, file: &Path) -> Result<Policy, Diagnostics> {
    let text = src.strip_prefix('\u{feff}').unwrap_or(src);
    let mut reader = Reader {
        source: SourceText::new(file, src),
        base: src.len() - text.len(),
        diags: Diagnostics::new(),
    };
    let mut policy = Policy {
        file: file.to_path_buf(),
        default_allows: None,
        min_trust: None,
        accept_expired_keys: None,
        rules: Vec::new(),
        warnings: Diagnostics::new(),
    };
    match hcl::edit::parser::parse_body(text) {
        Ok(body) => reader.top_level(&body, &mut policy),
        Err(err) => {
            let offset = err.location().offset() + reader.base;
            let diag = Diagnostic::invalid_hcl_syntax(err.message())
                .in_source(&reader.source, offset..offset);
            reader.diags.push(diag);
        }
    }
    if reader.diags.has_errors() {
        Err(reader.diags)
    } else {
        policy.warnings = reader.diags;
        Ok(policy)
    }
}

struct Reader {
    source: SourceText,
    /// Bytes stripped before the text handed to the parser (a UTF-8 BOM),
    /// added back so lines refer to the file as it is on disk.
    base: usize,
    diags: Diagnostics,
}

impl Reader {
    fn line(&self, span: Option<Range<usize>>) -> usize {
        span.map_or(1, |s| self.source.line_column(s.start + self.base).0)
    }

    fn warning(&mut self, summary: &str, detail: String, span: Option<Range<usize>>) {
        let span = span.map_or(0..0, |s| s.start + self.base..s.end + self.base);
        self.diags
            .push(Diagnostic::warning(summary, detail).in_source(&self.source, span));
    }

    fn error(&mut self, summary: &str, detail: String, span: Option<Range<usize>>) {
        let span = span.map_or(0..0, |s| s.start + self.base..s.end + self.base);
        self.diags
            .push(Diagnostic::error(summary, detail).in_source(&self.source, span));
    }

    fn top_level(&mut self, body: &Body, policy: &mut Policy) {
        for structure in body.iter() {
            match structure {
                Structure::Attribute(attr) => self.setting(attr, policy),
                Structure::Block(block) => match block.ident.as_str() {
                    "allow" => self.rule(block, Effect::Allow, policy),
                    "deny" => self.rule(block, Effect::Deny, policy),
                    other => self.error(
                        "Unsupported block type",
                        format!("Blocks of type \"{other}\" are not expected here. {TOP_LEVEL}"),
                        block.ident.span(),
                    ),
                },
            }
        }
    }

    fn setting(&mut self, attr: &Attribute, policy: &mut Policy) {
        let name = attr.key.as_str();
        let line = self.line(attr.key.span());
        match name {
            "default" => {
                let Some(value) = self.string(&attr.value, name) else {
                    return;
                };
                let allows = match value.as_str() {
                    "allow" => true,
                    "deny" => false,
                    other => {
                        self.error(
                            "Invalid default",
                            format!(
                                "default must be \"allow\" or \"deny\", not \"{other}\": what happens to a provider no allow block names."
                            ),
                            attr.value.span(),
                        );
                        return;
                    }
                };
                policy.default_allows = Some(Setting {
                    value: allows,
                    line,
                });
            }
            "min_trust" => {
                if let Some(value) = self.trust(&attr.value) {
                    policy.min_trust = Some(Setting { value, line });
                }
            }
            "accept_expired_keys" => {
                if let Some(value) = self.bool(&attr.value, name) {
                    policy.accept_expired_keys = Some(Setting { value, line });
                }
            }
            _ => self.error(
                "Unsupported argument",
                format!("An argument named \"{name}\" is not expected here. {TOP_LEVEL}"),
                attr.key.span(),
            ),
        }
    }

    fn rule(&mut self, block: &Block, effect: Effect, policy: &mut Policy) {
        // How the messages name the block, show one, and list what it takes.
        let (kind, kind_first, example, accepted, takes) = match effect {
            Effect::Allow => (
                "an allow block",
                "An allow block",
                "allow \"registry.terraform.io/hashicorp/*\" { }",
                "An allow block takes versions, min_trust and key_ids.",
                ["versions", "min_trust", "key_ids"].as_slice(),
            ),
            Effect::Deny => (
                "a deny block",
                "A deny block",
                "deny \"registry.terraform.io/hashicorp/aws\" { versions = \"5.31.0\" }",
                "A deny block takes versions only: it refuses those versions whatever their trust.",
                ["versions"].as_slice(),
            ),
        };
        let written = match block.labels.as_slice() {
            [BlockLabel::String(label)] => label.value().clone(),
            [] | [BlockLabel::Ident(_)] => {
                self.error(
                    "Missing provider pattern",
                    format!(
                        "{kind_first} takes one quoted label, the providers it covers, as in {example}."
                    ),
                    block.ident.span(),
                );
                return;
            }
            [_, extra, ..] => {
                self.error(
                    "Extraneous label",
                    format!(
                        "{kind_first} takes one label, the providers it covers, as in {example}."
                    ),
                    extra.span(),
                );
                return;
            }
        };
        let label_span = block.labels[0].span();
        let pattern = match ProviderPattern::parse(&written) {
            Ok(pattern) => pattern,
            Err(err) => {
                self.error(
                    "Invalid provider pattern",
                    format!(
                        "{}. Write HOSTNAME/NAMESPACE/TYPE (or NAMESPACE/TYPE for registry.terraform.io), with * for any type or any namespace and type, as the include and exclude patterns of provider_installation are written.",
                        err.detail()
                    ),
                    label_span,
                );
                return;
            }
        };
        let mut rule = Rule {
            effect,
            pattern,
            written,
            line: self.line(block.ident.span()),
            versions: None,
            min_trust: None,
            key_ids: None,
        };
        for structure in block.body.iter() {
            let attr = match structure {
                Structure::Attribute(attr) => attr,
                Structure::Block(nested) => {
                    self.error(
                        "Unsupported block type",
                        format!(
                            "Blocks of type \"{}\" are not expected in {kind}. {accepted}",
                            nested.ident.as_str()
                        ),
                        nested.ident.span(),
                    );
                    continue;
                }
            };
            let name = attr.key.as_str();
            let line = self.line(attr.key.span());
            if !takes.contains(&name) {
                self.error(
                    "Unsupported argument",
                    format!("An argument named \"{name}\" is not expected in {kind}. {accepted}"),
                    attr.key.span(),
                );
                continue;
            }
            match name {
                "versions" => {
                    if let Some(value) = self.versions(&attr.value) {
                        rule.versions = Some(Setting { value, line });
                    }
                }
                "min_trust" => {
                    if let Some(value) = self.trust(&attr.value) {
                        rule.min_trust = Some(Setting { value, line });
                    }
                }
                _ => {
                    if let Some(value) = self.key_ids(&attr.value) {
                        rule.key_ids = Some(Setting { value, line });
                    }
                }
            }
        }
        policy.rules.push(rule);
    }

    fn versions(&mut self, expr: &Expression) -> Option<VersionConstraints> {
        let text = self.string(expr, "versions")?;
        match VersionConstraints::parse_config(&text) {
            Ok(constraints) => Some(constraints),
            Err(err) => {
                self.error(
                    "Invalid version constraints",
                    format!(
                        "{} versions takes Terraform's version constraints, as in \">= 5.0.0, < 6.0.0\" or \"5.31.0\".",
                        err.detail
                    ),
                    expr.span(),
                );
                None
            }
        }
    }

    fn trust(&mut self, expr: &Expression) -> Option<TrustLevel> {
        let text = self.string(expr, "min_trust")?;
        let level = TrustLevel::parse(&text);
        if level.is_none() {
            let levels: Vec<String> = TrustLevel::ALL
                .iter()
                .map(|level| format!("\"{level}\""))
                .collect();
            self.error(
                "Invalid trust level",
                format!(
                    "\"{text}\" is not a trust level. min_trust takes one of, lowest first: {}.",
                    levels.join(", ")
                ),
                expr.span(),
            );
        }
        level
    }

    fn key_ids(&mut self, expr: &Expression) -> Option<Vec<String>> {
        let Expression::Array(items) = expr else {
            self.error(
                "Invalid key_ids",
                "key_ids takes a list of key fingerprints, as in [\"C874011F0AB405110D02105534365D9472D7468F\"].".to_owned(),
                expr.span(),
            );
            return None;
        };
        if items.is_empty() {
            self.error(
                "Invalid key_ids",
                "key_ids lists no key, which would refuse every package. List the signing keys to accept, or leave key_ids out to accept any key.".to_owned(),
                expr.span(),
            );
            return None;
        }
        let mut keys = Vec::new();
        for item in items.iter() {
            let text = self.string(item, "each key")?;
            // A fingerprint may be written in the groups gpg prints.
            let digits: String = text.chars().filter(|c| *c != ' ').collect();
            if !matches!(digits.len(), 16 | 40) || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                self.error(
                    "Invalid key ID",
                    format!(
                        "\"{text}\" is not a key fingerprint or ID: write the key's fingerprint, 40 hexadecimal digits (gpg --fingerprint prints it), as in \"C874011F0AB405110D02105534365D9472D7468F\"."
                    ),
                    item.span(),
                );
                return None;
            }
            if digits.len() == 16 {
                self.warning(
                    "Key pinned by its 64-bit ID",
                    format!(
                        "key_ids pins the key {} by its 64-bit key ID, which another key can be made to share. Pin its full fingerprint instead (40 hexadecimal digits, which gpg --fingerprint prints, and which end with this ID).",
                        digits.to_ascii_uppercase()
                    ),
                    item.span(),
                );
            }
            keys.push(digits.to_ascii_uppercase());
        }
        Some(keys)
    }

    fn string(&mut self, expr: &Expression, what: &str) -> Option<String> {
        match expr {
            Expression::String(text) => Some(text.value().clone()),
            _ => {
                self.error(
                    "Invalid value",
                    format!(
                        "{what} takes a quoted string, written out: a policy file evaluates no expressions."
                    ),
                    expr.span(),
                );
                None
            }
        }
    }

    fn bool(&mut self, expr: &Expression, what: &str) -> Option<bool> {
        match expr {
            Expression::Bool(value) => Some(*value.value()),
            _ => {
                self.error(
                    "Invalid value",
                    format!("{what} takes true or false, unquoted."),
                    expr.span(),
                );
                None
            }
        }
    }
}
