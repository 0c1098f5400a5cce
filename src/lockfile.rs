//! The dependency lock file `.terraform.lock.hcl` (Terraform's "Dependency
//! Lock File" docs; `internal/depsfile/locks_file.go`).
//!
//! Parsing goes through `hcl-edit` rather than `hcl::parse` because every
//! diagnostic must point at a source line, and only `hcl-edit` keeps spans.
//! Rendering is hand-written: Terraform users diff this file in version
//! control, so our output must be byte-identical to what `terraform init`
//! writes or every run would show spurious changes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::ops::Range;
use std::path::Path;

use hcl_edit::Span;
use hcl_edit::expr::Expression;
use hcl_edit::structure::{Attribute, Block, Body};

use crate::addr::ProviderAddr;
use crate::diag::{Diagnostic, Diagnostics, SourceText};
use crate::engine::Engine;
use crate::fsutil;
use crate::go_quote::{go_quote, is_print};
use crate::verify::hash::PackageHash;
use crate::version::{Version, VersionConstraints};

/// The header `init` writes, naming the engine's command.
fn header() -> String {
    format!(
        "# This file is maintained automatically by \"{} init\".\n# Manual edits may be lost in future updates.\n",
        Engine::current().command()
    )
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockedProvider {
    pub addr: ProviderAddr,
    pub version: Version,
    pub constraints: VersionConstraints,
    pub hashes: BTreeSet<PackageHash>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Locks {
    providers: BTreeMap<ProviderAddr, LockedProvider>,
}

impl Locks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the lock file at `path`. A file that does not exist is simply
    /// "no locks yet" (Terraform stats first for the same reason). Warnings
    /// travel with the locks because Terraform shows them even on success.
    pub fn load(path: &Path) -> (Locks, Diagnostics) {
        if let Err(err) = fs::metadata(path)
            && err.kind() == io::ErrorKind::NotFound
        {
            return (Locks::new(), Diagnostics::new());
        }
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(_) => {
                let diag = Diagnostic::error(
                    "Failed to read file",
                    format!(
                        "The configuration file {} could not be read.",
                        go_quote(&path.display().to_string())
                    ),
                );
                return (Locks::new(), diag.into());
            }
        };
        match String::from_utf8(bytes) {
            Ok(src) => Locks::parse_remembered(src, path),
            Err(err) => {
                let valid_prefix = &err.as_bytes()[..err.utf8_error().valid_up_to()];
                let line = 1 + valid_prefix.iter().filter(|&&b| b == b'\n').count();
                let diag = Diagnostic::error(
                    "Invalid character encoding",
                    "All input files must be UTF-8 encoded. Ensure that UTF-8 encoding is selected in your editor.",
                )
                .at(path, line, 1);
                (Locks::new(), diag.into())
            }
        }
    }

    /// [`Locks::parse`], remembered for the rest of the process by engine
    /// (a short provider address names its default registry) and text.
    /// `init DIR…` reads each directory's lock file twice, once to choose
    /// the engine and once to install, and the directories of a monorepo
    /// mostly share one text: parsing was a tenth of the runtime thread's
    /// time over 20 directories. Only a parse without diagnostics is kept,
    /// since diagnostics name the file; the locks themselves do not.
    fn parse_remembered(src: String, path: &Path) -> (Locks, Diagnostics) {
        type Parsed = std::sync::Mutex<HashMap<(Engine, String), Locks>>;
        static PARSED: std::sync::LazyLock<Parsed> = std::sync::LazyLock::new(Parsed::default);
        let lock = || PARSED.lock().unwrap_or_else(|e| e.into_inner());
        let key = (Engine::current(), src);
        if let Some(locks) = lock().get(&key) {
            return (locks.clone(), Diagnostics::new());
        }
        let (locks, diags) = Locks::parse(&key.1, path);
        if diags.is_empty() {
            lock().insert(key, locks.clone());
        }
        (locks, diags)
    }

    /// Decodes lock file source. On errors the returned locks hold only the
    /// entries that decoded cleanly enough to have a version; callers must
    /// not act on them when the diagnostics contain errors.
    pub fn parse(src: &str, filename: &Path) -> (Locks, Diagnostics) {
        let mut decoder = Decoder::new(src, filename);
        let text = src.strip_prefix('\u{feff}').unwrap_or(src);
        decoder.base = src.len() - text.len();
        let mut locks = Locks::new();
        match hcl_edit::parser::parse_body(text) {
            Ok(body) => decoder.decode_file(&body, &mut locks),
            Err(err) => {
                let loc = err.location();
                let offset = loc.offset() + decoder.base;
                let diag = Diagnostic::invalid_hcl_syntax(err.message())
                    .in_source(&decoder.source, offset..offset);
                decoder.diags.push(diag);
            }
        }
        (locks, decoder.diags)
    }

    /// Terraform's exact bytes (`SaveLocksToBytes` in
    /// `internal/depsfile/locks_file.go`): header, then one block per
    /// provider in address order, each preceded by an empty line.
    pub fn render(&self) -> String {
        let mut out = header();
        for lock in self.providers.values() {
            out.push('\n');
            let _ = writeln!(out, "provider {} {{", hcl_quote(&lock.addr.to_string()));
            let version = hcl_quote(&lock.version.to_string());
            let constraints = lock.constraints.to_string();
            if constraints.is_empty() {
                let _ = writeln!(out, "  version = {version}");
            } else {
                let _ = writeln!(out, "  version     = {version}");
                let _ = writeln!(out, "  constraints = {}", hcl_quote(&constraints));
            }
            if !lock.hashes.is_empty() {
                out.push_str("  hashes = [\n");
                for hash in &lock.hashes {
                    let _ = writeln!(out, "    {},", hcl_quote(&hash.to_string()));
                }
                out.push_str("  ]\n");
            }
            out.push_str("}\n");
        }
        out
    }

    /// Replaces the file atomically so editors and concurrent readers never
    /// see a half-written lock file.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let content = self.render();
        fsutil::replace_atomic(path, 0o644, |file| file.write_all(content.as_bytes()))
    }

    /// Terraform's `Locks.Equal`: constraints are deliberately ignored, so a
    /// stale `constraints` string alone never causes a rewrite.
    pub fn equivalent(&self, other: &Locks) -> bool {
        self.providers.len() == other.providers.len()
            && self.providers.iter().all(|(addr, mine)| {
                other.providers.get(addr).is_some_and(|theirs| {
                    mine.version == theirs.version && mine.hashes == theirs.hashes
                })
            })
    }

    /// Whether both lock sets cover the same providers, regardless of
    /// versions; `-lockfile=readonly` turns only this kind of change into an
    /// error ("Provider dependency changes detected"), any other into a
    /// warning.
    pub fn same_providers(&self, other: &Locks) -> bool {
        self.providers.keys().eq(other.providers.keys())
    }

    pub fn get(&self, addr: &ProviderAddr) -> Option<&LockedProvider> {
        self.providers.get(addr)
    }

    /// Adds or replaces the entry for `lock.addr`.
    pub fn insert(&mut self, lock: LockedProvider) {
        self.providers.insert(lock.addr.clone(), lock);
    }

    pub fn remove(&mut self, addr: &ProviderAddr) -> Option<LockedProvider> {
        self.providers.remove(addr)
    }

    /// Entries in address order, the order they are written in.
    pub fn iter(&self) -> impl Iterator<Item = &LockedProvider> {
        self.providers.values()
    }

    pub fn len(&self) -> usize {
        self.providers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.providers.is_empty()
    }
}

type ByteSpan = Range<usize>;

struct Decoder<'a> {
    filename: &'a Path,
    source: SourceText,
    /// Bytes stripped before the text handed to the parser (a UTF-8 BOM),
    /// added back so positions refer to the file as it is on disk.
    base: usize,
    diags: Diagnostics,
}

/// A provider block whose label survived validation, with what the
/// duplicate check and its message need.
struct ProviderHeader {
    addr: ProviderAddr,
    def_range: ByteSpan,
}

impl<'a> Decoder<'a> {
    fn new(src: &'a str, filename: &'a Path) -> Self {
        Decoder {
            filename,
            source: SourceText::new(filename, src),
            base: 0,
            diags: Diagnostics::new(),
        }
    }

    fn at(&self, diag: Diagnostic, span: Option<ByteSpan>) -> Diagnostic {
        match span {
            Some(span) => {
                diag.in_source(&self.source, span.start + self.base..span.end + self.base)
            }
            None => diag,
        }
    }

    fn error(&mut self, summary: &str, detail: impl Into<String>, span: Option<ByteSpan>) {
        let diag = self.at(Diagnostic::error(summary, detail), span);
        self.diags.push(diag);
    }

    /// `file:line,col-col` like HCL's `Range.String()`, used inside detail
    /// texts that point back at an earlier declaration.
    fn range_string(&self, span: &ByteSpan) -> String {
        let (start_line, start_col) = self.source.line_column(span.start + self.base);
        let (end_line, end_col) = self.source.line_column(span.end + self.base);
        let file = self.filename.display();
        if start_line == end_line {
            format!("{file}:{start_line},{start_col}-{end_col}")
        } else {
            format!("{file}:{start_line},{start_col}-{end_line},{end_col}")
        }
    }

    /// Mirrors HCL's `Body.Content` with the lock file schema, keeping its
    /// diagnostic order: label-count problems, then unexpected arguments,
    /// then unexpected block types, then each block's own contents.
    fn decode_file(&mut self, body: &Body, locks: &mut Locks) {
        const BLOCK_TYPES: [(&str, &str); 2] = [("provider", "source_addr"), ("module", "path")];
        let mut wanted = Vec::new();
        for block in body.blocks() {
            let Some(&(ty, label_name)) = BLOCK_TYPES
                .iter()
                .find(|(ty, _)| block.ident.as_str() == *ty)
            else {
                continue;
            };
            if block.labels.len() > 1 {
                self.error(
                    &format!("Extraneous label for {ty}"),
                    format!("Only 1 labels ({label_name}) are expected for {ty} blocks."),
                    block.labels[1].span(),
                );
            } else if block.labels.is_empty() {
                let brace = self.open_brace(block);
                self.error(
                    &format!("Missing {label_name} for {ty}"),
                    format!("All {ty} blocks must have 1 labels ({label_name})."),
                    brace,
                );
            } else {
                wanted.push(block);
            }
        }
        for attr in body.attributes() {
            let name = attr.key.as_str();
            let hint = if BLOCK_TYPES.iter().any(|(ty, _)| *ty == name) {
                format!(
                    " Did you mean to define a block of type {}?",
                    go_quote(name)
                )
            } else {
                String::new()
            };
            self.error(
                "Unsupported argument",
                format!(
                    "An argument named {} is not expected here.{hint}",
                    go_quote(name)
                ),
                attr.key.span(),
            );
        }
        for block in body.blocks() {
            let ty = block.ident.as_str();
            if BLOCK_TYPES.iter().any(|(known, _)| *known == ty) {
                continue;
            }
            let hint = name_suggestion(ty, BLOCK_TYPES.iter().map(|(known, _)| *known))
                .map(|s| format!(" Did you mean {}?", go_quote(s)))
                .unwrap_or_default();
            self.error(
                "Unsupported block type",
                format!(
                    "Blocks of type {} are not expected here.{hint}",
                    go_quote(ty)
                ),
                block.ident.span(),
            );
        }

        let mut seen: HashMap<ProviderAddr, ByteSpan> = HashMap::new();
        let mut warned_about_modules = false;
        for block in wanted {
            if block.ident.as_str() == "module" {
                if !warned_about_modules {
                    let diag = self.at(
                        Diagnostic::warning(
                            "Dependency locks for modules are not yet supported",
                            format!(
                                "tfinstall v{} only supports dependency locks for providers, not for modules. This configuration may be intended for a later version of Terraform that also supports dependency locks for modules.",
                                env!("CARGO_PKG_VERSION")
                            ),
                        ),
                        block.ident.span(),
                    );
                    self.diags.push(diag);
                    warned_about_modules = true;
                }
                continue;
            }
            let Some(header) = self.decode_provider_label(block) else {
                continue;
            };
            let lock = self.decode_provider_body(&header.addr, block);
            if let Some(previous) = seen.get(&header.addr) {
                let detail = format!(
                    "This lockfile already declared a lock for provider {} at {}.",
                    header.addr,
                    self.range_string(previous)
                );
                self.error("Duplicate provider lock", detail, block.ident.span());
                continue;
            }
            seen.insert(header.addr.clone(), header.def_range);
            if let Some(lock) = lock {
                locks.insert(lock);
            }
        }
    }

    fn decode_provider_label(&mut self, block: &Block) -> Option<ProviderHeader> {
        let label = block.labels.first()?;
        let label_span = label.span();
        let raw = label.as_str();
        let Ok(addr) = ProviderAddr::parse(raw) else {
            self.error(
                "Invalid provider source address",
                "The provider source address for a provider lock must be a valid, fully-qualified address of the form \"hostname/namespace/type\".",
                label_span,
            );
            return None;
        };
        if addr.is_builtin() {
            self.error(
                "Invalid provider source address",
                format!(
                    "Cannot lock a version for built-in provider {addr}. Built-in providers are bundled inside Terraform itself, so you can't select a version for them independently of the Terraform release you are currently running."
                ),
                label_span,
            );
            return None;
        }
        if addr.is_legacy() {
            self.error(
                "Invalid provider source address",
                format!(
                    "Provider source address {addr} is a special provider that is not eligible for dependency locking."
                ),
                label_span,
            );
            return None;
        }
        let canonical = addr.to_string();
        if canonical != raw {
            self.error(
                "Non-normalized provider source address",
                format!(
                    "The provider source address for this provider lock must be written as {}, the fully-qualified and normalized form.",
                    go_quote(&canonical)
                ),
                label_span,
            );
            return None;
        }
        let start = block.ident.span().map_or(0, |s| s.start);
        let end = label_span.map_or(start, |s| s.end);
        Some(ProviderHeader {
            addr,
            def_range: start..end,
        })
    }

    fn decode_provider_body(
        &mut self,
        addr: &ProviderAddr,
        block: &Block,
    ) -> Option<LockedProvider> {
        const ARGUMENTS: [&str; 3] = ["version", "constraints", "hashes"];
        let body = &block.body;
        let find = |name: &str| body.attributes().find(|attr| attr.key.as_str() == name);
        let version_attr = find("version");
        let constraints_attr = find("constraints");
        let hashes_attr = find("hashes");

        if version_attr.is_none() {
            let brace = self.open_brace(block);
            self.error(
                "Missing required argument",
                "The argument \"version\" is required, but no definition was found.",
                brace,
            );
        }
        for attr in body.attributes() {
            let name = attr.key.as_str();
            if ARGUMENTS.contains(&name) {
                continue;
            }
            let undefined = ARGUMENTS
                .iter()
                .copied()
                .filter(|known| find(known).is_none());
            let hint = name_suggestion(name, undefined)
                .map(|s| format!(" Did you mean {}?", go_quote(s)))
                .unwrap_or_default();
            self.error(
                "Unsupported argument",
                format!(
                    "An argument named {} is not expected here.{hint}",
                    go_quote(name)
                ),
                attr.key.span(),
            );
        }
        for nested in body.blocks() {
            let ty = nested.ident.as_str();
            let hint = if ARGUMENTS.contains(&ty) {
                format!(
                    " Did you mean to define argument {}? If so, use the equals sign to assign it a value.",
                    go_quote(ty)
                )
            } else {
                String::new()
            };
            self.error(
                "Unsupported block type",
                format!(
                    "Blocks of type {} are not expected here.{hint}",
                    go_quote(ty)
                ),
                nested.ident.span(),
            );
        }

        let version = version_attr.and_then(|attr| self.decode_version(addr, attr));
        let constraints = constraints_attr
            .and_then(|attr| self.decode_constraints(addr, attr))
            .unwrap_or_else(VersionConstraints::empty);
        let hashes = hashes_attr
            .map(|attr| self.decode_hashes(attr))
            .unwrap_or_default();
        Some(LockedProvider {
            addr: addr.clone(),
            version: version?,
            constraints,
            hashes,
        })
    }

    /// Only the first problem with a version is reported: Terraform also
    /// adds a second "normalized form" error quoting the zero version
    /// "0.0.0" after a parse failure, which would only confuse.
    fn decode_version(&mut self, addr: &ProviderAddr, attr: &Attribute) -> Option<Version> {
        let span = attr.value.span();
        let raw = match self.static_string(&attr.value, true)? {
            Some(raw) => raw,
            None => {
                self.error(
                    "Missing required argument",
                    "A provider lock block must contain a \"version\" argument.",
                    span,
                );
                return None;
            }
        };
        match Version::parse(&raw) {
            Err(err) => {
                self.error(
                    "Invalid provider version number",
                    format!("The selected version number for provider {addr} is invalid: {err}."),
                    span,
                );
                None
            }
            Ok(version) => {
                let canonical = version.to_string();
                if canonical != raw {
                    self.error(
                        "Invalid provider version number",
                        format!(
                            "The selected version number for provider {addr} must be written in normalized form: {}.",
                            go_quote(&canonical)
                        ),
                        span,
                    );
                    return None;
                }
                Some(version)
            }
        }
    }

    fn decode_constraints(
        &mut self,
        addr: &ProviderAddr,
        attr: &Attribute,
    ) -> Option<VersionConstraints> {
        let span = attr.value.span();
        let raw = self.static_string(&attr.value, false)??;
        match VersionConstraints::parse(&raw) {
            Err(err) => {
                self.error(
                    "Invalid provider version constraints",
                    format!(
                        "The recorded version constraints for provider {addr} are invalid: {err}."
                    ),
                    span,
                );
                None
            }
            Ok(constraints) => {
                let canonical = constraints.to_string();
                if canonical != raw {
                    self.error(
                        "Invalid provider version constraints",
                        format!(
                            "The recorded version constraints for provider {addr} must be written in normalized form: {}.",
                            go_quote(&canonical)
                        ),
                        span,
                    );
                    return None;
                }
                Some(constraints)
            }
        }
    }

    /// Each bad hash is reported on its own line (Terraform points every
    /// such error at the start of the whole list).
    fn decode_hashes(&mut self, attr: &Attribute) -> BTreeSet<PackageHash> {
        let mut hashes = BTreeSet::new();
        let Some(list) = unwrap_parens(&attr.value).as_array() else {
            self.error(
                "Invalid expression",
                "A static list expression is required.",
                attr.value.span(),
            );
            return hashes;
        };
        if list.is_empty() {
            self.error(
                "Invalid provider hash set",
                "The \"hashes\" argument must either be omitted or contain at least one hash value.",
                attr.value.span(),
            );
            return hashes;
        }
        for element in list.iter() {
            let Some(Some(raw)) = self.static_string(element, false) else {
                continue;
            };
            match PackageHash::parse(&raw) {
                Ok(hash) => {
                    hashes.insert(hash);
                }
                Err(err) => self.error(
                    "Invalid provider hash string",
                    format!(
                        "Cannot interpret {} as a provider hash: {err}.",
                        go_quote(&raw)
                    ),
                    element.span(),
                ),
            }
        }
        hashes
    }

    /// Evaluates `expr` without variables or functions and converts the
    /// result to a string the way HCL's `gohcl.DecodeExpression` does
    /// (numbers and bools become their text). `Some(None)` is a null that
    /// the caller allowed; `None` means an error was reported.
    fn static_string(&mut self, expr: &Expression, allow_null: bool) -> Option<Option<String>> {
        let span = expr.span();
        match unwrap_parens(expr) {
            Expression::Null(_) if allow_null => Some(None),
            Expression::Null(_) => {
                self.error(
                    "Unsuitable value type",
                    "Unsuitable value: null value is not allowed",
                    span,
                );
                None
            }
            Expression::String(s) => Some(Some(s.value().clone())),
            Expression::Bool(b) => Some(Some(b.value().to_string())),
            Expression::Number(n) => Some(Some(number_as_string(n.value()))),
            Expression::Array(_) | Expression::Object(_) => {
                self.error(
                    "Unsuitable value type",
                    "Unsuitable value: string required",
                    span,
                );
                None
            }
            other => {
                let (summary, detail, span) = match find_dynamic_part(other) {
                    Some((DynamicPart::Variable, at)) => (
                        "Variables not allowed",
                        "Variables may not be used here.",
                        at,
                    ),
                    Some((DynamicPart::Function, at)) => (
                        "Function calls not allowed",
                        "Functions may not be called here.",
                        at,
                    ),
                    None => (
                        "Invalid expression",
                        "A literal value is required here.",
                        span,
                    ),
                };
                self.error(summary, detail, span);
                None
            }
        }
    }

    /// HCL reports a missing label or argument at the block's opening brace,
    /// which `hcl-edit` has no span for, so find it after the header.
    fn open_brace(&self, block: &Block) -> Option<ByteSpan> {
        let header_end = block
            .labels
            .last()
            .and_then(|label| label.span())
            .or_else(|| block.ident.span())?
            .end;
        let src = self.source.text().get(header_end + self.base..)?;
        let mut rest = src;
        loop {
            let trimmed = rest.trim_start_matches([' ', '\t']);
            if let Some(comment) = trimmed.strip_prefix("/*") {
                rest = comment.split_once("*/").map_or("", |(_, after)| after);
            } else {
                rest = trimmed;
                break;
            }
        }
        let offset = header_end + (src.len() - rest.len());
        Some(offset..offset + 1)
    }
}

enum DynamicPart {
    Variable,
    Function,
}

fn find_dynamic_part(expr: &Expression) -> Option<(DynamicPart, Option<ByteSpan>)> {
    match expr {
        Expression::Variable(v) => Some((DynamicPart::Variable, v.span())),
        Expression::FuncCall(f) => Some((DynamicPart::Function, f.span())),
        Expression::Traversal(t) => find_dynamic_part(&t.expr),
        Expression::Parenthesis(p) => find_dynamic_part(p.inner()),
        _ => None,
    }
}

fn unwrap_parens(expr: &Expression) -> &Expression {
    match expr {
        Expression::Parenthesis(p) => unwrap_parens(p.inner()),
        other => other,
    }
}

/// cty renders numbers as the shortest exact decimal without an exponent,
/// which is what Rust's `Display` for `f64` does too.
fn number_as_string(number: &hcl_edit::Number) -> String {
    if let Some(n) = number.as_u64() {
        n.to_string()
    } else if let Some(n) = number.as_i64() {
        n.to_string()
    } else {
        number
            .as_f64()
            .map_or_else(|| number.to_string(), |f| f.to_string())
    }
}

/// HCL's "did you mean" rule: the first candidate within edit distance 2.
fn name_suggestion<'c>(
    given: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    candidates
        .into_iter()
        .find(|candidate| levenshtein(given, candidate) < 3)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// A quoted HCL string literal as `hclwrite` produces it: template
/// introducers are doubled so `${` and `%{` stay literal text.
fn hcl_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '$' | '%' => {
                out.push(c);
                if chars.peek() == Some(&'{') {
                    out.push(c);
                }
            }
            c if !is_print(c) => {
                let code = u32::from(c);
                if code < 0x10000 {
                    let _ = write!(out, "\\u{code:04x}");
                } else {
                    let _ = write!(out, "\\U{code:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Hostname;
    use crate::diag::Severity;
    use std::path::PathBuf;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/lockfile")
            .join(name)
    }

    fn provider(source: &str) -> ProviderAddr {
        ProviderAddr::parse(source).unwrap()
    }

    fn lock(source: &str, version: &str, constraints: &str, hashes: &[&str]) -> LockedProvider {
        LockedProvider {
            addr: provider(source),
            version: Version::parse(version).unwrap(),
            constraints: VersionConstraints::parse(constraints).unwrap(),
            hashes: hashes
                .iter()
                .map(|h| PackageHash::parse(h).unwrap())
                .collect(),
        }
    }

    fn parse_str(src: &str) -> (Locks, Diagnostics) {
        Locks::parse(src, Path::new(".terraform.lock.hcl"))
    }

    /// (severity, line, summary, detail) for compact assertions.
    fn summarize(diags: &Diagnostics) -> Vec<(Severity, usize, String, String)> {
        diags
            .iter()
            .map(|d| {
                let line = d.subject.as_ref().map_or(0, |s| s.line);
                (d.severity, line, d.summary.clone(), d.detail.clone())
            })
            .collect()
    }

    /// Terraform's TestLoadLocksFromFile: every `# ERROR: <summary>` or
    /// `# WARNING: <summary>` comment names the diagnostic expected on its
    /// line, and nothing else may be reported.
    #[test]
    fn fixture_files_report_exactly_the_annotated_diagnostics() {
        let mut checked = 0;
        for entry in fs::read_dir(fixture("")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|ext| ext != "hcl") {
                continue;
            }
            let src = fs::read_to_string(&path).unwrap();
            let mut want_errors = BTreeMap::new();
            let mut want_warnings = BTreeMap::new();
            for (index, line) in src.lines().enumerate() {
                if let Some((_, summary)) = line.split_once("# ERROR: ") {
                    want_errors.insert(index + 1, summary.to_string());
                }
                if let Some((_, summary)) = line.split_once("# WARNING: ") {
                    want_warnings.insert(index + 1, summary.to_string());
                }
            }
            let (_, diags) = Locks::load(&path);
            let mut got_errors = BTreeMap::new();
            let mut got_warnings = BTreeMap::new();
            for diag in diags.iter() {
                let subject = diag
                    .subject
                    .as_ref()
                    .unwrap_or_else(|| panic!("{}: sourceless diagnostic {diag}", path.display()));
                assert_eq!(subject.file, path);
                let target = match diag.severity {
                    Severity::Error => &mut got_errors,
                    Severity::Warning => &mut got_warnings,
                };
                target.insert(subject.line, diag.summary.clone());
            }
            assert_eq!(got_errors, want_errors, "errors in {}", path.display());
            assert_eq!(
                got_warnings,
                want_warnings,
                "warnings in {}",
                path.display()
            );
            checked += 1;
        }
        assert_eq!(checked, 5);
    }

    #[test]
    fn valid_provider_locks_content() {
        let (locks, diags) = Locks::load(&fixture("valid-provider-locks.hcl"));
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(locks.len(), 3);

        let version_only = locks
            .get(&provider("terraform.io/test/version-only"))
            .unwrap();
        assert_eq!(version_only.version.to_string(), "1.0.0");
        assert_eq!(version_only.constraints.to_string(), "");
        assert!(version_only.hashes.is_empty());

        let with_constraints = locks
            .get(&provider("terraform.io/test/version-and-constraints"))
            .unwrap();
        assert_eq!(with_constraints.version.to_string(), "1.2.0");
        assert_eq!(with_constraints.constraints.to_string(), "~> 1.2");
        assert!(with_constraints.hashes.is_empty());

        let everything = locks
            .get(&provider("terraform.io/test/all-the-things"))
            .unwrap();
        assert_eq!(everything.version.to_string(), "3.0.10");
        assert_eq!(everything.constraints.to_string(), ">= 3.0.2");
        let hashes: Vec<String> = everything.hashes.iter().map(ToString::to_string).collect();
        assert_eq!(
            hashes,
            [
                "test:placeholder-hash-1",
                "test:placeholder-hash-2",
                "test:placeholder-hash-3"
            ]
        );
    }

    #[test]
    fn empty_file_has_no_locks() {
        let (locks, diags) = Locks::load(&fixture("empty.hcl"));
        assert!(diags.is_empty());
        assert!(locks.is_empty());
        assert_eq!(locks.render(), header());
    }

    #[test]
    fn missing_file_is_empty_locks_and_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (locks, diags) = Locks::load(&dir.path().join(".terraform.lock.hcl"));
        assert!(locks.is_empty());
        assert!(diags.is_empty());

        let (locks, diags) = Locks::load(dir.path());
        assert!(locks.is_empty());
        assert_eq!(diags.0.len(), 1);
        let diag = &diags.0[0];
        assert!(diag.is_error());
        assert_eq!(diag.summary, "Failed to read file");
        assert_eq!(
            diag.detail,
            format!(
                "The configuration file \"{}\" could not be read.",
                dir.path().display()
            )
        );
    }

    /// Terraform's TestSaveLocksToFile, byte for byte.
    #[test]
    fn save_writes_terraform_format_vector() {
        let hashes = [
            "test:cccccccccccccccccccccccccccccccccccccccccccccccc",
            "test:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            "test:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ];
        let mut locks = Locks::new();
        locks.insert(lock("test/foo", "1.0.0", ">= 1.0.0", &hashes));
        locks.insert(lock("test/bar", "1.2.0", "~> 1", &[]));
        locks.insert(lock("test/baz", "1.2.0", "", &[]));
        locks.insert(lock("test/boo", "1.2.0", "1.2", &[]));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".terraform.lock.hcl");
        locks.save(&path).unwrap();

        let want = r#"# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/test/bar" {
  version     = "1.2.0"
  constraints = "~> 1.0"
}

provider "registry.terraform.io/test/baz" {
  version = "1.2.0"
}

provider "registry.terraform.io/test/boo" {
  version     = "1.2.0"
  constraints = "1.2.0"
}

provider "registry.terraform.io/test/foo" {
  version     = "1.0.0"
  constraints = ">= 1.0.0"
  hashes = [
    "test:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "test:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    "test:cccccccccccccccccccccccccccccccccccccccccccccccc",
  ]
}
"#;
        assert_eq!(fs::read_to_string(&path).unwrap(), want);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644);
        }
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [".terraform.lock.hcl"]);
    }

    const REALISTIC: &str = r#"# This file is maintained automatically by "terraform init".
# Manual edits may be lost in future updates.

provider "registry.terraform.io/hashicorp/aws" {
  version     = "5.31.0"
  constraints = "~> 5.0"
  hashes = [
    "h1:ltxyuBWIy9cq0kIKDJH1jeWJy/y7XJLjS4QrsQK4plA=",
    "h1:uFqkIpSZs9ZfZG5zMX6UFWyyNd6FvdJkFb0AvDyrNDc=",
    "zh:0cdb9c2083bf0902442384f7309367791e4640581652dda456f2d6d7abf0de8d",
    "zh:2fe4884cb9642f48a5889f8dff8f5f511418a18537a9dfa77ada3bcdad391e4e",
    "zh:36d8bdd72fe61d816d0049c179f495bc6f1e54d8d7b07c45b62e5e1696882a89",
  ]
}

provider "registry.terraform.io/hashicorp/random" {
  version = "3.6.0+local.1"
  hashes = [
    "h1:R5Ucn26riKIEijcsiOMBR3uOAjuOMfI1x7XvH4P6B1w=",
  ]
}

provider "tf.example.com/acme/widget" {
  version     = "0.1.0-beta.2"
  constraints = ">= 0.1.0-beta.1, < 1.0.0"
}
"#;

    #[test]
    fn realistic_lock_round_trips_byte_for_byte() {
        let (locks, diags) = parse_str(REALISTIC);
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(locks.len(), 3);
        assert_eq!(locks.render(), REALISTIC);

        let (again, diags) = parse_str(&locks.render());
        assert!(diags.is_empty());
        assert_eq!(again, locks);
    }

    #[test]
    fn hashes_are_sorted_and_deduplicated_on_render() {
        let (locks, diags) = parse_str(
            "provider \"registry.terraform.io/hashicorp/null\" {\n  version = \"3.2.2\"\n  hashes = [\"zh:b\", \"h1:a\", \"zh:b\", \"other:x\"]\n}\n",
        );
        assert!(diags.is_empty(), "{diags}");
        let rendered = locks.render();
        assert!(rendered.ends_with(
            "  version = \"3.2.2\"\n  hashes = [\n    \"h1:a\",\n    \"other:x\",\n    \"zh:b\",\n  ]\n}\n"
        ));
    }

    #[test]
    fn unicode_hostname_label_is_written_in_unicode_and_sorted_by_ascii() {
        let unicode_host = Hostname::parse("ä.example").unwrap();
        assert_eq!(unicode_host.as_ascii(), "xn--4ca.example");
        let mut locks = Locks::new();
        locks.insert(LockedProvider {
            addr: ProviderAddr::new(Hostname::parse("zz.example").unwrap(), "ns", "last"),
            ..lock("test/placeholder", "1.0.0", "", &[])
        });
        locks.insert(LockedProvider {
            addr: ProviderAddr::new(unicode_host, "ns", "first"),
            ..lock("test/placeholder", "1.0.0", "", &[])
        });
        let rendered = locks.render();
        let first = rendered.find("provider \"ä.example/ns/first\" {").unwrap();
        let last = rendered.find("provider \"zz.example/ns/last\" {").unwrap();
        assert!(first < last, "{rendered}");

        let (parsed, diags) = parse_str(&rendered);
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(parsed, locks);

        let (_, diags) =
            parse_str("provider \"xn--4ca.example/ns/first\" {\n  version = \"1.0.0\"\n}\n");
        assert_eq!(
            summarize(&diags),
            [(
                Severity::Error,
                1,
                "Invalid provider source address".to_string(),
                "The provider source address for a provider lock must be a valid, fully-qualified address of the form \"hostname/namespace/type\".".to_string()
            )]
        );
    }

    #[test]
    fn strings_are_escaped_like_hclwrite() {
        assert_eq!(hcl_quote("plain"), r#""plain""#);
        assert_eq!(hcl_quote("a${b}%{c}$d%e"), r#""a$${b}%%{c}$d%e""#);
        assert_eq!(hcl_quote("q\"b\\n\nr\rt\t"), r#""q\"b\\n\nr\rt\t""#);
        assert_eq!(hcl_quote("\u{1}\u{a0}é"), r#""\u0001\u00a0é""#);
        assert_eq!(hcl_quote("\u{f0000}"), r#""\U000f0000""#);

        let hash = "test:${not-a-template}%{nor-this}";
        let mut locks = Locks::new();
        locks.insert(lock("test/escape", "1.0.0", "", &[hash]));
        let rendered = locks.render();
        assert!(rendered.contains(r#"    "test:$${not-a-template}%%{nor-this}","#));
        let (parsed, diags) = parse_str(&rendered);
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(parsed, locks);
    }

    #[test]
    fn equivalent_ignores_constraints_only() {
        let base = {
            let mut locks = Locks::new();
            locks.insert(lock("test/foo", "2.0.0", ">= 1.0.0", &["h1:a", "zh:b"]));
            locks
        };
        let mut other_constraints = Locks::new();
        other_constraints.insert(lock("test/foo", "2.0.0", "~> 2.0", &["zh:b", "h1:a"]));
        assert!(base.equivalent(&other_constraints));

        let mut with_metadata = Locks::new();
        with_metadata.insert(lock(
            "test/foo",
            "2.0.0+awesomecorp.1",
            ">= 1.0.0",
            &["h1:a", "zh:b"],
        ));
        assert!(!base.equivalent(&with_metadata));

        let mut fewer_hashes = Locks::new();
        fewer_hashes.insert(lock("test/foo", "2.0.0", ">= 1.0.0", &["h1:a"]));
        assert!(!base.equivalent(&fewer_hashes));
        assert!(base.same_providers(&fewer_hashes));

        let mut extra = base.clone();
        extra.insert(lock("test/bar", "1.0.0", "", &[]));
        assert!(!base.equivalent(&extra));
        assert!(!extra.equivalent(&base));
        assert!(!base.same_providers(&extra));
        extra.remove(&provider("test/bar"));
        assert!(base.equivalent(&extra));
    }

    #[test]
    fn save_replaces_the_file_leaves_no_temp_and_needs_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".terraform.lock.hcl");
        fs::write(&path, "old content\n").unwrap();

        Locks::new().save(&path).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), header());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [".terraform.lock.hcl"]);

        assert!(
            Locks::new()
                .save(&dir.path().join("missing/.terraform.lock.hcl"))
                .is_err()
        );
    }

    #[test]
    fn rename_failure_removes_the_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".terraform.lock.hcl");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("keep"), "x").unwrap();
        assert!(Locks::new().save(&path).is_err());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [".terraform.lock.hcl"]);
        assert!(path.join("keep").exists());
    }

    /// `init DIR…` loads the same text from many directories, and each
    /// directory's twice: one parse serves them all, but a parse with
    /// problems is not shared, so each file's diagnostics name that file.
    #[test]
    fn the_same_text_loads_alike_from_every_file_and_problems_name_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let valid = fs::read_to_string(fixture("valid-provider-locks.hcl")).unwrap();
        let invalid = fs::read_to_string(fixture("invalid-provider-addrs.hcl")).unwrap();
        let mut loaded = Vec::new();
        for name in ["a", "b"] {
            fs::create_dir(dir.path().join(name)).unwrap();
            let good = dir.path().join(name).join(".terraform.lock.hcl");
            fs::write(&good, &valid).unwrap();
            let (locks, diags) = Locks::load(&good);
            assert!(diags.is_empty(), "{diags:?}");
            loaded.push(locks);
            let bad = dir.path().join(name).join("bad.lock.hcl");
            fs::write(&bad, &invalid).unwrap();
            let (_, diags) = Locks::load(&bad);
            assert!(diags.has_errors());
            assert!(
                diags
                    .iter()
                    .all(|d| d.subject.as_ref().is_some_and(|at| at.file == bad)),
                "{diags:?}"
            );
        }
        assert_eq!(loaded[0], loaded[1]);
        assert_eq!(
            loaded[0],
            Locks::load(&fixture("valid-provider-locks.hcl")).0
        );
    }

    #[test]
    fn diagnostic_details_match_terraform() {
        let (_, diags) = Locks::load(&fixture("invalid-provider-addrs.hcl"));
        let details: Vec<(usize, String)> = summarize(&diags)
            .into_iter()
            .map(|(_, l, _, d)| (l, d))
            .collect();
        let file = fixture("invalid-provider-addrs.hcl");
        assert!(details.contains(&(
            5,
            "The provider source address for this provider lock must be written as \"registry.terraform.io/hashicorp/aws\", the fully-qualified and normalized form.".into()
        )));
        assert!(details.contains(&(
            33,
            format!(
                "This lockfile already declared a lock for provider this/one/okay at {}:29,1-25.",
                file.display()
            )
        )));
        assert!(details.contains(&(
            38,
            "Provider source address registry.terraform.io/-/null is a special provider that is not eligible for dependency locking.".into()
        )));
        assert!(details.contains(&(
            43,
            "Cannot lock a version for built-in provider terraform.io/builtin/foo. Built-in providers are bundled inside Terraform itself, so you can't select a version for them independently of the Terraform release you are currently running.".into()
        )));

        let (_, diags) = Locks::load(&fixture("invalid-versions.hcl"));
        let details: Vec<(usize, String)> = summarize(&diags)
            .into_iter()
            .map(|(_, l, _, d)| (l, d))
            .collect();
        assert!(details.contains(&(
            12,
            "The selected version number for provider terraform.io/test/baz must be written in normalized form: \"1.0.0\".".into()
        )));
        assert!(details.contains(&(
            25,
            "The argument \"version\" is required, but no definition was found.".into()
        )));
        assert!(details.contains(&(
            29,
            "A provider lock block must contain a \"version\" argument.".into()
        )));

        let (_, diags) = Locks::load(&fixture("unsupported-block.hcl"));
        assert_eq!(
            diags.0[0].detail,
            "Blocks of type \"doodad\" are not expected here."
        );
    }

    #[test]
    fn attribute_and_structure_errors() {
        let src = r#"module "x" {
}
module "y" {
}
providr "registry.terraform.io/a/b" {
}
stray = 1
provider "registry.terraform.io/a/one" "two" {
}
provider {
}
provider "registry.terraform.io/a/b" {
  version = "1.0.0"
  versions = "2"
  constraints = ">=1.0"
  hashes = []
  version {}
}
provider "registry.terraform.io/a/c" {
  version = 1.0
  constraints = null
  hashes = ["h1:ok", "nocolon", 7, ["x"]]
}
provider "registry.terraform.io/a/d" {
  version = var.v
  hashes = "h1:x"
  extra = true
}
provider "registry.terraform.io/a/e" { version = upper("1.0.0") }
"#;
        let (locks, diags) = parse_str(src);
        let got: Vec<(Severity, usize, String, String)> = summarize(&diags);
        let e = |line: usize, summary: &str, detail: &str| {
            (
                Severity::Error,
                line,
                summary.to_string(),
                detail.to_string(),
            )
        };
        let want = vec![
            e(
                8,
                "Extraneous label for provider",
                "Only 1 labels (source_addr) are expected for provider blocks.",
            ),
            e(
                10,
                "Missing source_addr for provider",
                "All provider blocks must have 1 labels (source_addr).",
            ),
            e(
                7,
                "Unsupported argument",
                "An argument named \"stray\" is not expected here.",
            ),
            e(
                5,
                "Unsupported block type",
                "Blocks of type \"providr\" are not expected here. Did you mean \"provider\"?",
            ),
            (
                Severity::Warning,
                1,
                "Dependency locks for modules are not yet supported".to_string(),
                format!(
                    "tfinstall v{} only supports dependency locks for providers, not for modules. This configuration may be intended for a later version of Terraform that also supports dependency locks for modules.",
                    env!("CARGO_PKG_VERSION")
                ),
            ),
            e(
                14,
                "Unsupported argument",
                "An argument named \"versions\" is not expected here.",
            ),
            e(
                17,
                "Unsupported block type",
                "Blocks of type \"version\" are not expected here. Did you mean to define argument \"version\"? If so, use the equals sign to assign it a value.",
            ),
            e(
                15,
                "Invalid provider version constraints",
                "The recorded version constraints for provider registry.terraform.io/a/b must be written in normalized form: \">= 1.0.0\".",
            ),
            e(
                16,
                "Invalid provider hash set",
                "The \"hashes\" argument must either be omitted or contain at least one hash value.",
            ),
            e(
                20,
                "Invalid provider version number",
                "The selected version number for provider registry.terraform.io/a/c must be written in normalized form: \"1.0.0\".",
            ),
            e(
                21,
                "Unsuitable value type",
                "Unsuitable value: null value is not allowed",
            ),
            e(
                22,
                "Invalid provider hash string",
                "Cannot interpret \"nocolon\" as a provider hash: hash string must start with a scheme keyword followed by a colon.",
            ),
            e(
                22,
                "Invalid provider hash string",
                "Cannot interpret \"7\" as a provider hash: hash string must start with a scheme keyword followed by a colon.",
            ),
            e(
                22,
                "Unsuitable value type",
                "Unsuitable value: string required",
            ),
            e(
                27,
                "Unsupported argument",
                "An argument named \"extra\" is not expected here.",
            ),
            e(
                25,
                "Variables not allowed",
                "Variables may not be used here.",
            ),
            e(
                26,
                "Invalid expression",
                "A static list expression is required.",
            ),
            e(
                29,
                "Function calls not allowed",
                "Functions may not be called here.",
            ),
        ];
        assert_eq!(got, want);
        assert_eq!(locks.len(), 1);
        assert!(locks.get(&provider("registry.terraform.io/a/b")).is_some());
    }

    #[test]
    fn syntax_errors_point_at_their_line() {
        let (locks, diags) = parse_str(
            "provider \"registry.terraform.io/a/b\" {\n  version = \"1.0.0\"\n  version = \"1.0.0\"\n}\n",
        );
        assert!(locks.is_empty());
        assert_eq!(diags.0.len(), 1);
        assert_eq!(diags.0[0].summary, "Invalid HCL syntax");
        assert_eq!(diags.0[0].subject.as_ref().unwrap().line, 3);
    }

    #[test]
    fn positions_count_characters_and_skip_a_bom() {
        let src = "\u{feff}provider \"registry.terraform.io/a/b\" {\n}\n";
        let (_, diags) = parse_str(src);
        let subject = diags.0[0].subject.clone().unwrap();
        assert_eq!(diags.0[0].summary, "Missing required argument");
        assert_eq!((subject.line, subject.column), (1, 39));
    }
}
