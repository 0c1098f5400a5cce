//! Decoding of `provider_installation` blocks (the CLI configuration docs,
//! "Provider Installation"; Terraform's
//! `internal/command/cliconfig/provider_installation.go`).
//!
//! Terraform decodes this block from the HCL 1 tree by hand, more strictly
//! than the rest of the file, and its messages quote `line:column`
//! positions — usually the position of the *outer* block, even for a
//! problem inside a method. The messages and positions here are Terraform's,
//! because users search for them. In JSON files the checks on `=` and labels
//! do not apply (JSON has neither), as in Terraform.

use std::path::{Path, PathBuf};

use super::args::{ArgError, body_of, bool_arg, find_arg, string_arg, string_list_arg};
use super::expand::{clean_path, expand_vars};
use super::syntax::{Document, Item, Pos, Syntax, ValueKind};
use super::{CliEnv, InstallMethod, MethodLocation, ProviderInstallation};
use crate::addr::ProviderAddr;
use crate::diag::{Diagnostic, Diagnostics, SourcePos};
use crate::engine::Engine;

const BLOCK_SUMMARY: &str = "Invalid provider_installation block";
const METHOD_SUMMARY: &str = "Invalid provider_installation method block";

/// Every `provider_installation` block of one file, in order. A block with
/// labels is reported but still used, as Terraform does; one written with
/// `=` is dropped.
pub fn decode_provider_installations(
    doc: &Document,
    file: &Path,
    env: &CliEnv,
) -> (Vec<ProviderInstallation>, Diagnostics) {
    let mut decoder = Decoder {
        file,
        env,
        is_json: doc.syntax == Syntax::Json,
        diags: Diagnostics::new(),
    };
    let mut blocks = Vec::new();
    for item in doc
        .items
        .iter()
        .filter(|i| i.name == "provider_installation")
    {
        if let Some(block) = decoder.block(item) {
            blocks.extend(block);
        }
    }
    (blocks, decoder.diags)
}

struct Decoder<'a> {
    file: &'a Path,
    env: &'a CliEnv,
    is_json: bool,
    diags: Diagnostics,
}

impl Decoder<'_> {
    fn error(&mut self, summary: &str, detail: String, pos: Pos) {
        self.diags
            .push(Diagnostic::error(summary, detail).at(self.file, pos.line, pos.column));
    }

    fn source_pos(&self, pos: Pos) -> SourcePos {
        SourcePos::new(self.file.to_path_buf(), pos.line, pos.column)
    }

    fn block(&mut self, block: &Item) -> Option<Vec<ProviderInstallation>> {
        let at = block.pos;
        let equals_error = format!(
            "The provider_installation block at {at} must not be introduced with an equals sign."
        );
        if block.assign && !self.is_json {
            self.error(BLOCK_SUMMARY, equals_error, at);
            return None;
        }
        if !block.labels.is_empty() && !self.is_json {
            self.error(
                BLOCK_SUMMARY,
                format!("The provider_installation block at {at} must not have any labels."),
                at,
            );
        }
        // JSON may give several blocks as an array of objects, as HCL 1's JSON
        // reader does for any key.
        let bodies = match &block.value.kind {
            ValueKind::Object(body) => vec![body.as_slice()],
            ValueKind::List(elements) if self.is_json => {
                match elements.iter().map(body_of).collect::<Option<Vec<_>>>() {
                    Some(bodies) => bodies,
                    None => {
                        self.error(BLOCK_SUMMARY, equals_error, at);
                        return None;
                    }
                }
            }
            _ => {
                self.error(BLOCK_SUMMARY, equals_error, at);
                return None;
            }
        };
        Some(bodies.into_iter().map(|body| self.body(at, body)).collect())
    }

    fn body(&mut self, at: Pos, body: &[Item]) -> ProviderInstallation {
        let mut installation = ProviderInstallation::default();
        for method in body {
            if method.assign && !self.is_json {
                self.error(
                    METHOD_SUMMARY,
                    format!(
                        "The items inside the provider_installation block at {at} must all be blocks."
                    ),
                    at,
                );
                continue;
            }
            if !method.labels.is_empty() && !self.is_json {
                self.error(
                    METHOD_SUMMARY,
                    format!(
                        "The blocks inside the provider_installation block at {at} may not have any labels."
                    ),
                    at,
                );
            }
            let method_bodies = match method_bodies(method, self.is_json) {
                Some(bodies) => bodies,
                None => {
                    self.error(
                        METHOD_SUMMARY,
                        format!(
                            "The items inside the provider_installation block at {at} must all be blocks."
                        ),
                        at,
                    );
                    continue;
                }
            };
            for method_body in method_bodies {
                self.method(at, method, method_body, &mut installation);
            }
        }
        installation
    }

    fn method(
        &mut self,
        at: Pos,
        method: &Item,
        body: &[Item],
        installation: &mut ProviderInstallation,
    ) {
        let kind = method.name.as_str();
        let location_arg = match kind {
            "direct" => None,
            "filesystem_mirror" => Some("path"),
            "network_mirror" => Some("url"),
            "oci_mirror" => Some("repository_template"),
            "dev_overrides" => {
                if installation.methods.is_empty() {
                    self.dev_overrides(at, body, installation);
                } else {
                    self.error(
                        METHOD_SUMMARY,
                        format!(
                            "The dev_overrides block at {} must appear before all other installation methods, because development overrides always have the highest priority.",
                            method.pos
                        ),
                        method.pos,
                    );
                }
                return;
            }
            _ => {
                self.error(
                    METHOD_SUMMARY,
                    format!(
                        "Unknown provider installation method {kind:?} at {}.",
                        method.pos
                    ),
                    method.pos,
                );
                return;
            }
        };
        let args = match MethodArgs::decode(body, location_arg, self.env.engine) {
            Ok(args) => args,
            Err(err) => {
                self.error(
                    METHOD_SUMMARY,
                    format!("Invalid {kind} block at {at}: {err}."),
                    at,
                );
                return;
            }
        };
        let location = match (location_arg, args.location) {
            (None, _) => MethodLocation::Direct,
            (Some(arg), location) if location.is_empty() => {
                self.error(
                    METHOD_SUMMARY,
                    format!("Invalid {kind} block at {at}: \"{arg}\" argument is required."),
                    at,
                );
                return;
            }
            (Some("path"), path) => MethodLocation::FilesystemMirror(PathBuf::from(path)),
            (Some("repository_template"), template) => MethodLocation::OciMirror(template),
            (Some(_), url) => MethodLocation::NetworkMirror(url),
        };
        installation.methods.push(InstallMethod {
            location,
            include: args.include,
            exclude: args.exclude,
            trust_all_hashes: args.trust_all_hashes,
            pos: self.source_pos(method.pos),
        });
    }

    /// Entries map provider source strings to local directories; the paths
    /// get `$VAR` expansion (an unset variable is an error, since silently
    /// pointing at the wrong directory would be worse) and are cleaned.
    fn dev_overrides(&mut self, at: Pos, body: &[Item], installation: &mut ProviderInstallation) {
        let mut entries = Vec::new();
        for entry in body {
            match entry.value.as_str() {
                Some(path) if entry.labels.is_empty() => entries.push((entry, path)),
                _ => {
                    self.error(
                        METHOD_SUMMARY,
                        format!(
                            "Invalid dev_overrides block at {at}: At {}: the entry {:?} must be a string.",
                            entry.pos, entry.name
                        ),
                        at,
                    );
                    return;
                }
            }
        }
        for (entry, raw_path) in entries {
            let addr = match ProviderAddr::parse(&entry.name) {
                Ok(addr) => addr,
                Err(err) => {
                    self.error(
                        "Invalid provider installation dev overrides",
                        format!(
                            "The entry {:?} in {at} is not a valid provider source string.\n\n{err}",
                            entry.name
                        ),
                        at,
                    );
                    continue;
                }
            };
            let mut unset: Vec<String> = Vec::new();
            let expanded = expand_vars(raw_path, |name| match self.env.var(name) {
                Some(value) => value.to_string(),
                None => {
                    if !unset.iter().any(|u| u == name) {
                        unset.push(name.to_string());
                    }
                    String::new()
                }
            });
            for name in unset {
                self.error(
                    "Interpolated environment variable not set",
                    format!(
                        "The environment variable {name} is not set or empty and can result in undesired behavior"
                    ),
                    entry.pos,
                );
            }
            let dir = PathBuf::from(clean_path(&expanded));
            match installation
                .dev_overrides
                .iter_mut()
                .find(|(a, _)| *a == addr)
            {
                Some(existing) => existing.1 = dir,
                None => installation.dev_overrides.push((addr, dir)),
            }
        }
    }
}

/// The bodies one method item stands for: a block, or in JSON also an
/// array of objects (how JSON writes repeated blocks). `None` when it is
/// not block-shaped at all.
fn method_bodies(method: &Item, is_json: bool) -> Option<Vec<&[Item]>> {
    match &method.value.kind {
        ValueKind::Object(body) => Some(vec![body.as_slice()]),
        ValueKind::List(elements) if is_json => elements.iter().map(body_of).collect(),
        _ => None,
    }
}

struct MethodArgs {
    /// `path`, `url` or `repository_template`; empty when absent, which Terraform treats the same
    /// as an empty string.
    location: String,
    include: Vec<String>,
    exclude: Vec<String>,
    trust_all_hashes: bool,
}

impl MethodArgs {
    /// Unknown arguments are ignored, as HCL 1's decoder does; OpenTofu's
    /// `trust_all_hashes` is one for Terraform.
    fn decode(body: &[Item], location_arg: Option<&str>, engine: Engine) -> Result<Self, ArgError> {
        let location = match location_arg.and_then(|name| find_arg(body, name)) {
            Some(item) => string_arg(item)?,
            None => String::new(),
        };
        let list = |name: &str| -> Result<Vec<String>, ArgError> {
            find_arg(body, name).map_or(Ok(Vec::new()), string_list_arg)
        };
        let trust_all_hashes = match find_arg(body, "trust_all_hashes") {
            Some(item) if engine == Engine::OpenTofu && location_arg == Some("url") => {
                bool_arg(item)?
            }
            _ => false,
        };
        Ok(MethodArgs {
            location,
            include: list("include")?,
            exclude: list("exclude")?,
            trust_all_hashes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Hostname;
    use crate::cliconfig::syntax::parse;
    use std::collections::BTreeMap;

    fn testdata(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/cliconfig")
            .join(name)
    }

    fn decode_src(src: &str, env: &CliEnv) -> (Vec<ProviderInstallation>, Diagnostics) {
        let doc = parse(src).unwrap();
        decode_provider_installations(&doc, Path::new("test.tfrc"), env)
    }

    fn decode_fixture(name: &str) -> (Vec<ProviderInstallation>, Diagnostics) {
        let path = testdata(name);
        let src = std::fs::read_to_string(&path).unwrap();
        let doc = parse(&src).unwrap();
        decode_provider_installations(&doc, &path, &CliEnv::default())
    }

    fn provider(ns: &str, ty: &str) -> ProviderAddr {
        ProviderAddr::new(Hostname::default_registry(), ns, ty)
    }

    fn method_summary(method: &InstallMethod) -> (MethodLocation, Vec<String>, Vec<String>) {
        (
            method.location.clone(),
            method.include.clone(),
            method.exclude.clone(),
        )
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn native_and_json_fixtures_decode_to_the_same_methods() {
        for name in ["provider-installation", "provider-installation.json"] {
            let (blocks, diags) = decode_fixture(name);
            assert!(diags.is_empty(), "{name}: {diags}");
            assert_eq!(blocks.len(), 1, "{name}");
            let block = &blocks[0];
            let methods: Vec<_> = block.methods.iter().map(method_summary).collect();
            assert_eq!(
                methods,
                vec![
                    (
                        MethodLocation::FilesystemMirror("/tmp/example1".into()),
                        strings(&["example.com/*/*"]),
                        vec![],
                    ),
                    (
                        MethodLocation::NetworkMirror("https://tf-Mirror.example.com/".into()),
                        strings(&["registry.terraform.io/*/*"]),
                        strings(&["registry.Terraform.io/foobar/*"]),
                    ),
                    (
                        MethodLocation::FilesystemMirror("/tmp/example2".into()),
                        vec![],
                        vec![],
                    ),
                    (
                        MethodLocation::Direct,
                        vec![],
                        strings(&["example.com/*/*"]),
                    ),
                ],
                "{name}"
            );
            assert_eq!(
                block.dev_overrides,
                vec![
                    (provider("hashicorp", "boop"), PathBuf::from("/tmp/boop")),
                    (provider("hashicorp", "blorp"), PathBuf::from("/tmp/blorp")),
                ],
                "{name}"
            );
        }
    }

    #[test]
    fn method_positions_point_at_the_method_name() {
        let (blocks, _) = decode_fixture("provider-installation");
        let positions: Vec<_> = blocks[0]
            .methods
            .iter()
            .map(|m| (m.pos.line, m.pos.column))
            .collect();
        assert_eq!(positions, [(6, 3), (10, 3), (15, 3), (18, 3)]);
        assert_eq!(
            blocks[0].methods[0].pos.file,
            testdata("provider-installation")
        );
    }

    #[test]
    fn the_seven_terraform_errors_with_positions() {
        let (blocks, diags) = decode_fixture("provider-installation-errors");
        let got: Vec<String> = diags
            .iter()
            .map(|d| format!("{}: {}", d.summary, d.detail))
            .collect();
        assert_eq!(
            got,
            [
                "Invalid provider_installation method block: Unknown provider installation method \"not_a_thing\" at 2:3.",
                "Invalid provider_installation method block: Invalid filesystem_mirror block at 1:1: \"path\" argument is required.",
                "Invalid provider_installation method block: Invalid network_mirror block at 1:1: \"url\" argument is required.",
                "Invalid provider_installation method block: The items inside the provider_installation block at 1:1 must all be blocks.",
                "Invalid provider_installation method block: The blocks inside the provider_installation block at 1:1 may not have any labels.",
                "Invalid provider_installation block: The provider_installation block at 9:1 must not have any labels.",
                "Invalid provider_installation block: The provider_installation block at 11:1 must not be introduced with an equals sign.",
            ]
        );
        assert!(diags.iter().all(|d| d.is_error()));
        let subjects: Vec<_> = diags
            .iter()
            .map(|d| d.subject.as_ref().map(|s| (s.line, s.column)))
            .collect();
        assert_eq!(
            subjects,
            [
                Some((2, 3)),
                Some((1, 1)),
                Some((1, 1)),
                Some((1, 1)),
                Some((1, 1)),
                Some((9, 1)),
                Some((11, 1)),
            ]
        );
        // As in Terraform, the labelled `direct "what"` and the labelled
        // second block are still used; the `=` one is not.
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].methods.len(), 1);
        assert_eq!(blocks[0].methods[0].location, MethodLocation::Direct);
    }

    #[test]
    fn oci_mirror_blocks_keep_their_template() {
        let (blocks, diags) = decode_src(
            "provider_installation {\n  oci_mirror {\n    repository_template = \"r.example/${namespace}/${type}\"\n    include = [\"registry.opentofu.org/*/*\"]\n  }\n  oci_mirror {\n    include = [\"a/b\"]\n  }\n}\n",
            &CliEnv::default(),
        );
        assert_eq!(
            blocks[0]
                .methods
                .iter()
                .map(method_summary)
                .collect::<Vec<_>>(),
            [(
                MethodLocation::OciMirror("r.example/${namespace}/${type}".into()),
                strings(&["registry.opentofu.org/*/*"]),
                vec![],
            )]
        );
        let details: Vec<_> = diags.iter().map(|d| d.detail.as_str()).collect();
        assert_eq!(
            details,
            ["Invalid oci_mirror block at 1:1: \"repository_template\" argument is required."]
        );
    }

    #[test]
    fn dev_overrides_must_come_first() {
        let (blocks, diags) = decode_src(
            "provider_installation {\n  direct {}\n  dev_overrides {\n    \"hashicorp/x\" = \"/x\"\n  }\n}\n",
            &CliEnv::default(),
        );
        assert_eq!(diags.0.len(), 1);
        assert_eq!(
            diags.0[0].detail,
            "The dev_overrides block at 3:3 must appear before all other installation methods, because development overrides always have the highest priority."
        );
        assert!(blocks[0].dev_overrides.is_empty());
        assert_eq!(blocks[0].methods.len(), 1);
    }

    #[test]
    fn dev_overrides_expand_variables_and_report_unset_ones() {
        let env = CliEnv {
            vars: BTreeMap::from([("GOBIN".to_string(), "/go/bin".to_string())]),
            profile_dir: None,
            engine: Default::default(),
        };
        let (blocks, diags) = decode_src(
            "provider_installation {\n  dev_overrides {\n    \"example.com/ns/a\" = \"${GOBIN}/./a/\"\n    \"ns/b\" = \"$MISSING/b/$MISSING\"\n  }\n}\n",
            &env,
        );
        assert_eq!(
            blocks[0].dev_overrides,
            vec![
                (
                    ProviderAddr::new(Hostname::parse("example.com").unwrap(), "ns", "a"),
                    PathBuf::from("/go/bin/a")
                ),
                (provider("ns", "b"), PathBuf::from("/b")),
            ]
        );
        assert_eq!(diags.0.len(), 1, "{diags}");
        assert_eq!(
            diags.0[0].summary,
            "Interpolated environment variable not set"
        );
        assert_eq!(
            diags.0[0].detail,
            "The environment variable MISSING is not set or empty and can result in undesired behavior"
        );
        let subject = diags.0[0].subject.as_ref().unwrap();
        assert_eq!((subject.line, subject.column), (4, 5));
    }

    #[test]
    fn invalid_dev_override_keys_are_reported_and_skipped() {
        let (blocks, diags) = decode_src(
            "provider_installation {\n  dev_overrides {\n    \"a/b/c/d\" = \"/x\"\n    \"ns/ok\" = \"/ok\"\n  }\n}\n",
            &CliEnv::default(),
        );
        assert_eq!(diags.0.len(), 1);
        assert_eq!(
            diags.0[0].summary,
            "Invalid provider installation dev overrides"
        );
        assert!(
            diags.0[0].detail.starts_with(
                "The entry \"a/b/c/d\" in 1:1 is not a valid provider source string.\n\n"
            ),
            "{}",
            diags.0[0].detail
        );
        assert_eq!(
            blocks[0].dev_overrides,
            vec![(provider("ns", "ok"), "/ok".into())]
        );
    }

    #[test]
    fn bad_argument_types_name_the_block_and_position() {
        let (blocks, diags) = decode_src(
            "provider_installation {\n  filesystem_mirror {\n    path = [\"/a\"]\n  }\n  direct {\n    exclude = \"x/y\"\n  }\n  network_mirror {\n    url = \"https://m.example/\"\n    unknown = 1\n  }\n}\n",
            &CliEnv::default(),
        );
        let details: Vec<_> = diags.iter().map(|d| d.detail.as_str()).collect();
        assert_eq!(
            details,
            [
                "Invalid filesystem_mirror block at 1:1: At 3:5: \"path\" must be a string.",
                "Invalid direct block at 1:1: At 6:5: \"exclude\" must be a list of strings.",
            ]
        );
        assert_eq!(blocks[0].methods.len(), 1);
    }

    #[test]
    fn json_blocks_may_be_objects_or_arrays() {
        let (blocks, diags) = decode_src(
            r#"{"provider_installation": [{"direct": {"exclude": ["a/b"]}, "filesystem_mirror": {"path": "/m"}}]}"#,
            &CliEnv::default(),
        );
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].methods.len(), 2);
        let (_, diags) = decode_src(
            r#"{"provider_installation": {"direct": "nope"}}"#,
            &CliEnv::default(),
        );
        assert_eq!(
            diags.0[0].detail,
            "The items inside the provider_installation block at 1:2 must all be blocks."
        );
        let (blocks, diags) = decode_src(r#"{"provider_installation": 1}"#, &CliEnv::default());
        assert!(blocks.is_empty());
        assert_eq!(
            diags.0[0].detail,
            "The provider_installation block at 1:2 must not be introduced with an equals sign."
        );
    }

    #[test]
    fn trust_all_hashes_is_opentofus_and_only_on_network_mirrors() {
        let src = "provider_installation {\n  network_mirror {\n    url = \"https://m.example/\"\n    trust_all_hashes = true\n  }\n  direct {\n    trust_all_hashes = true\n  }\n}\n";
        let trusted = |engine| {
            let env = CliEnv {
                engine,
                ..CliEnv::default()
            };
            let (blocks, diags) = decode_src(src, &env);
            assert!(diags.is_empty(), "{diags}");
            blocks[0]
                .methods
                .iter()
                .map(|m| m.trust_all_hashes)
                .collect::<Vec<_>>()
        };
        assert_eq!(trusted(Engine::OpenTofu), [true, false]);
        assert_eq!(trusted(Engine::Terraform), [false, false]);

        let env = CliEnv {
            engine: Engine::OpenTofu,
            ..CliEnv::default()
        };
        let (blocks, diags) = decode_src(
            "provider_installation {\n  network_mirror {\n    url = \"https://m.example/\"\n    trust_all_hashes = \"yes\"\n  }\n}\n",
            &env,
        );
        assert!(blocks[0].methods.is_empty());
        assert_eq!(
            diags.0[0].detail,
            "Invalid network_mirror block at 1:1: At 4:5: \"trust_all_hashes\" must be true or false."
        );
    }
}
