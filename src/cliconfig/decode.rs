//! The settings of one CLI configuration file, decoded with HCL 1's decoder
//! semantics wherever a user could notice: setting names match without
//! regard to ASCII case (HCL 1 matches Go struct fields that way), a setting
//! given twice keeps the last value, and unknown settings are ignored
//! silently. Terraform's decoder is silent about unknown settings too, and
//! staying silent matters because one `.terraformrc` is shared by Terraform
//! and OpenTofu versions that each add settings of their own.
//!
//! `disable_checkpoint` and `disable_checkpoint_signature` do nothing in
//! tfinstall but are kept, so that the configuration handed to Terraform
//! after an install (`crate::handoff`) still has them; the legacy
//! `providers` and `provisioners` maps get a warning because a user might
//! expect them to influence installation.

use std::collections::BTreeMap;
use std::path::Path;

use super::args::{ArgError, body_of, bool_arg, find_arg, string_arg, string_list_arg};
use super::expand::expand_vars;
use super::provider_installation::decode_provider_installations;
use super::syntax::{Item, Pos, Value, ValueKind, parse};
use super::{CliEnv, CredentialsHelper, OciCredentials, OciDefaultCredentials, RawConfig};
use crate::diag::{Diagnostic, Diagnostics, SourcePos, SourceText};

fn parse_error(file: &Path, err: &ArgError) -> Diagnostic {
    Diagnostic::error(format!("Error parsing {}: {err}", file.display()), "").at(
        file,
        err.pos.line,
        err.pos.column,
    )
}

pub fn decode_file(file: &Path, src: &str, env: &CliEnv) -> (RawConfig, Diagnostics) {
    let mut diags = Diagnostics::new();
    let doc = match parse(src) {
        Ok(doc) => doc,
        Err(err) => {
            let err = ArgError {
                pos: err.pos,
                message: err.message,
            };
            diags.push(parse_error(file, &err));
            diags.quote_from(&SourceText::new(file, src));
            return (RawConfig::default(), diags);
        }
    };
    let mut config = RawConfig::default();
    for item in &doc.items {
        let result = match item.name.to_ascii_lowercase().as_str() {
            "plugin_cache_dir" => string_arg(item).map(|dir| config.plugin_cache_dir = dir),
            "plugin_cache_may_break_dependency_lock_file" => {
                bool_arg(item).map(|on| config.plugin_cache_may_break_lock_file = on)
            }
            "disable_checkpoint" => bool_arg(item).map(|on| config.disable_checkpoint = on),
            "disable_checkpoint_signature" => {
                bool_arg(item).map(|on| config.disable_checkpoint_signature = on)
            }
            "host" => decode_hosts(item, &mut config.hosts),
            "credentials" => decode_credentials(item, &mut config.credentials),
            "credentials_helper" => {
                decode_credentials_helpers(item, file, &mut config.credentials_helpers)
            }
            "oci_credentials" => decode_oci_credentials(item, &mut config.oci_credentials),
            "oci_default_credentials" => decode_oci_default_credentials(item).map(|defaults| {
                config.oci_default_credentials.push(defaults);
            }),
            "providers" => {
                diags.push(legacy_warning(
                    file,
                    item,
                    "locates provider plugins the way Terraform v0.12 did. tfinstall does not use it; a provider_installation block chooses where providers are installed from.",
                ));
                Ok(())
            }
            "provisioners" => {
                diags.push(legacy_warning(
                    file,
                    item,
                    "locates provisioner plugins. tfinstall installs only providers and does not use it.",
                ));
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(err) = result {
            diags.push(parse_error(file, &err));
        }
    }
    if !config.plugin_cache_dir.is_empty() {
        config.plugin_cache_dir = expand_vars(&config.plugin_cache_dir, |name| {
            env.var(name).unwrap_or_default().to_string()
        });
    }
    let (installations, more) = decode_provider_installations(&doc, file, env);
    config.provider_installation = installations;
    diags.extend(more);
    // Positions kept for later errors (a method's bad URL, a helper that
    // is not found) quote the file too.
    let source = SourceText::new(file, src);
    diags.quote_from(&source);
    for installation in &mut config.provider_installation {
        for method in &mut installation.methods {
            method.pos.quote_from(&source);
        }
    }
    for helper in config.credentials_helpers.values_mut() {
        helper.pos.quote_from(&source);
    }
    (config, diags)
}

fn legacy_warning(file: &Path, item: &Item, what_it_does: &str) -> Diagnostic {
    Diagnostic::warning(
        format!("Legacy {} setting ignored", item.name),
        format!(
            "The {:?} setting at {}:{} {what_it_does}",
            item.name,
            file.display(),
            item.pos
        ),
    )
    .at(file, item.pos.line, item.pos.column)
}

/// Services whose value is not a string (such as `login.v1`, an object)
/// matter only to `terraform login`, so they are left out.
fn decode_hosts(
    item: &Item,
    hosts: &mut BTreeMap<String, BTreeMap<String, String>>,
) -> Result<(), ArgError> {
    for block in labelled_blocks(item)? {
        let mut services = BTreeMap::new();
        if let Some(arg) = find_arg(block.body, "services") {
            let entries = body_of(&arg.value).ok_or_else(|| ArgError {
                pos: arg.pos,
                message: format!("{:?} must be an object", arg.name),
            })?;
            for entry in entries {
                if let Some(url) = entry.value.as_str() {
                    services.insert(entry.name.clone(), url.to_string());
                }
            }
        }
        hosts.insert(block.label.to_string(), services);
    }
    Ok(())
}

/// Only a string `token` makes usable credentials; other keys (a username,
/// a future setting) are tolerated, and such a block yields none.
fn decode_credentials(
    item: &Item,
    credentials: &mut BTreeMap<String, Option<String>>,
) -> Result<(), ArgError> {
    for block in labelled_blocks(item)? {
        let token = block
            .body
            .iter()
            .rev()
            .find(|arg| arg.name == "token")
            .and_then(|arg| arg.value.as_str())
            .map(str::to_string);
        credentials.insert(block.label.to_string(), token);
    }
    Ok(())
}

fn decode_credentials_helpers(
    item: &Item,
    file: &Path,
    helpers: &mut BTreeMap<String, CredentialsHelper>,
) -> Result<(), ArgError> {
    for block in labelled_blocks(item)? {
        let args = find_arg(block.body, "args").map_or(Ok(Vec::new()), string_list_arg)?;
        let helper = CredentialsHelper {
            name: block.label.to_string(),
            args,
            pos: SourcePos::new(file.to_path_buf(), block.pos.line, block.pos.column),
        };
        helpers.insert(block.label.to_string(), helper);
    }
    Ok(())
}

/// A block sets either `username` and `password` or
/// `docker_credentials_helper`, as OpenTofu requires.
fn decode_oci_credentials(
    item: &Item,
    credentials: &mut BTreeMap<String, OciCredentials>,
) -> Result<(), ArgError> {
    for block in labelled_blocks(item)? {
        let arg = |name: &str| -> Result<Option<String>, ArgError> {
            find_arg(block.body, name)
                .map(string_arg)
                .transpose()
                .map(|value| value.filter(|v| !v.is_empty()))
        };
        let shape_error = |message: &str| ArgError {
            pos: block.pos,
            message: format!("oci_credentials {:?}: {message}", block.label),
        };
        let found = match (
            arg("username")?,
            arg("password")?,
            arg("docker_credentials_helper")?,
        ) {
            (Some(username), Some(password), None) => OciCredentials::Basic { username, password },
            (None, None, Some(helper)) => OciCredentials::Helper(helper),
            (Some(_), None, None) | (None, Some(_), None) => {
                return Err(shape_error(
                    "\"username\" and \"password\" must be set together",
                ));
            }
            _ if find_arg(block.body, "access_token").is_some() => {
                return Err(shape_error(
                    "OAuth credentials (\"access_token\", \"refresh_token\") are not supported by tfinstall; use \"username\" and \"password\", or \"docker_credentials_helper\"",
                ));
            }
            _ => {
                return Err(shape_error(
                    "set either \"username\" and \"password\", or \"docker_credentials_helper\"",
                ));
            }
        };
        credentials.insert(block.label.to_string(), found);
    }
    Ok(())
}

fn decode_oci_default_credentials(item: &Item) -> Result<OciDefaultCredentials, ArgError> {
    let body = body_of(&item.value).ok_or_else(|| ArgError {
        pos: item.pos,
        message: "\"oci_default_credentials\" must be a block".to_string(),
    })?;
    let mut defaults = OciDefaultCredentials::default();
    if let Some(arg) = find_arg(body, "discover_ambient_credentials") {
        defaults.discover_ambient_credentials = bool_arg(arg)?;
    }
    if let Some(arg) = find_arg(body, "docker_style_config_files") {
        defaults.docker_style_config_files =
            Some(string_list_arg(arg)?.into_iter().map(Into::into).collect());
    }
    if let Some(arg) = find_arg(body, "docker_credentials_helper") {
        defaults.docker_credentials_helper = Some(string_arg(arg)?).filter(|h| !h.is_empty());
    }
    Ok(defaults)
}

struct LabelledBlock<'a> {
    label: &'a str,
    body: &'a [Item],
    pos: Pos,
}

/// Blocks with one label, in every spelling HCL 1 accepts for a map of
/// objects: `credentials "h" { … }`, `credentials { "h" { … } }`,
/// `credentials = { h = { … } }`, and JSON's
/// `"credentials": {"h": {…}}` (where an array of objects repeats a block).
fn labelled_blocks(item: &Item) -> Result<Vec<LabelledBlock<'_>>, ArgError> {
    let shape_error = || ArgError {
        pos: item.pos,
        message: format!(
            "{:?} must be a block with one label, like {} \"example.com\" {{ … }}",
            item.name, item.name
        ),
    };
    match item.labels.as_slice() {
        [label] => {
            let body = body_of(&item.value).ok_or_else(shape_error)?;
            Ok(vec![LabelledBlock {
                label,
                body,
                pos: item.pos,
            }])
        }
        [] => {
            let mut blocks = Vec::new();
            for outer in bodies_of(&item.value).ok_or_else(shape_error)? {
                for inner in outer {
                    if !inner.labels.is_empty() {
                        return Err(shape_error());
                    }
                    for body in bodies_of(&inner.value).ok_or_else(shape_error)? {
                        blocks.push(LabelledBlock {
                            label: &inner.name,
                            body,
                            pos: inner.pos,
                        });
                    }
                }
            }
            Ok(blocks)
        }
        _ => Err(shape_error()),
    }
}

/// An object, or a list of objects (how JSON and HCL 1 repeat a block).
fn bodies_of(value: &Value) -> Option<Vec<&[Item]>> {
    match &value.kind {
        ValueKind::Object(items) => Some(vec![items.as_slice()]),
        ValueKind::List(elements) => elements.iter().map(body_of).collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn testdata(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/cliconfig")
            .join(name)
    }

    fn decode_fixture(name: &str) -> (RawConfig, Diagnostics) {
        let path = testdata(name);
        let src = std::fs::read_to_string(&path).unwrap();
        decode_file(&path, &src, &CliEnv::default())
    }

    fn decode_src(src: &str, env: &CliEnv) -> (RawConfig, Diagnostics) {
        decode_file(Path::new("/home/u/.terraformrc"), src, env)
    }

    #[test]
    fn hosts_fixture() {
        let (config, diags) = decode_fixture("hosts");
        assert!(diags.is_empty(), "{diags}");
        let services =
            BTreeMap::from([("modules.v1".to_string(), "https://example.com/".to_string())]);
        assert_eq!(
            config.hosts,
            BTreeMap::from([("example.com".to_string(), services)])
        );
    }

    #[test]
    fn credentials_fixture() {
        let (config, diags) = decode_fixture("credentials");
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(
            config.credentials,
            BTreeMap::from([
                (
                    "example.com".to_string(),
                    Some("foo the bar baz".to_string())
                ),
                ("example.net".to_string(), None),
            ])
        );
        let helper = &config.credentials_helpers["foo"];
        assert_eq!(helper.args, ["bar", "baz"]);
        assert_eq!((helper.pos.line, helper.pos.column), (15, 1));
    }

    #[test]
    fn legacy_maps_are_ignored_with_a_warning() {
        for name in ["config", "config-env"] {
            let (config, diags) = decode_fixture(name);
            assert_eq!(config, RawConfig::default(), "{name}");
            assert!(!diags.has_errors(), "{name}: {diags}");
            assert!(diags.iter().all(|d| d.summary.starts_with("Legacy ")));
        }
        let (_, diags) = decode_fixture("config-env");
        let summaries: Vec<_> = diags.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "Legacy providers setting ignored",
                "Legacy provisioners setting ignored"
            ]
        );
        let subject = diags.0[1].subject.as_ref().unwrap();
        assert_eq!((subject.line, subject.column), (6, 1));
    }

    #[test]
    fn plugin_cache_settings_and_var_expansion() {
        let env = CliEnv {
            vars: BTreeMap::from([("HOME".to_string(), "/home/u".to_string())]),
            profile_dir: None,
            engine: Default::default(),
        };
        let (config, diags) = decode_src(
            "plugin_cache_dir = \"$HOME/.cache/${UNSET}tf\"\nPlugin_Cache_May_Break_Dependency_Lock_File = true\ndisable_checkpoint = true\nsome_future_setting { x = 1 }\n",
            &env,
        );
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(config.plugin_cache_dir, "/home/u/.cache/tf");
        assert!(config.plugin_cache_may_break_lock_file);
        assert!(config.disable_checkpoint);
        assert!(!config.disable_checkpoint_signature);
    }

    #[test]
    fn alternative_spellings_of_labelled_blocks() {
        let (config, diags) = decode_src(
            "credentials { \"a.example\" { token = \"1\" } }\ncredentials = { b.example = { token = \"2\" } }\nhost \"c.example\" { services { \"providers.v1\" = \"/p/\", \"login.v1\" = { client = \"x\" } } }\n",
            &CliEnv::default(),
        );
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(config.credentials["a.example"].as_deref(), Some("1"));
        assert_eq!(config.credentials["b.example"].as_deref(), Some("2"));
        assert_eq!(
            config.hosts["c.example"],
            BTreeMap::from([("providers.v1".to_string(), "/p/".to_string())])
        );
    }

    #[test]
    fn json_nulls_read_as_hcl_1_reads_them() {
        // As Terraform 1.0.3 reads them: a null string is empty, a null
        // token is no token, a null where a block belongs is an error.
        let (config, diags) = decode_src(
            r#"{"plugin_cache_dir": null, "credentials": {"a.example": {"token": null}}}"#,
            &CliEnv::default(),
        );
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(config.plugin_cache_dir, "");
        assert_eq!(config.credentials["a.example"], None);
        for src in [
            r#"{"credentials": null}"#,
            r#"{"provider_installation": null}"#,
        ] {
            let (_, diags) = decode_src(src, &CliEnv::default());
            assert!(diags.has_errors(), "{src}");
        }
    }

    #[test]
    fn json_config() {
        let (config, diags) = decode_src(
            r#"{
  "plugin_cache_dir": "/cache",
  "credentials": {"app.terraform.io": {"token": "abc"}, "x.example": {"token": 5}},
  "credentials_helper": {"vault": {"args": ["--x"]}},
  "host": {"h.example": {"services": {"providers.v1": "https://h.example/p/"}}},
  "provider_installation": {"direct": [{}]}
}"#,
            &CliEnv::default(),
        );
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(config.plugin_cache_dir, "/cache");
        assert_eq!(
            config.credentials["app.terraform.io"].as_deref(),
            Some("abc")
        );
        assert_eq!(config.credentials["x.example"], None);
        assert_eq!(config.credentials_helpers["vault"].args, ["--x"]);
        assert_eq!(
            config.hosts["h.example"]["providers.v1"],
            "https://h.example/p/"
        );
        assert_eq!(config.provider_installation.len(), 1);
    }

    #[test]
    fn malformed_files_report_file_line_and_column() {
        let (config, diags) = decode_src(
            "plugin_cache_dir = \"/x\"\ncredentials \"h\" {\n  token = \n}\n",
            &CliEnv::default(),
        );
        assert_eq!(config, RawConfig::default());
        assert_eq!(diags.0.len(), 1);
        let diag = &diags.0[0];
        assert!(diag.is_error());
        assert_eq!(
            diag.summary,
            "Error parsing /home/u/.terraformrc: At 4:1: expected a value, found \"}\""
        );
        let subject = diag.subject.as_ref().unwrap();
        assert_eq!(subject.file, Path::new("/home/u/.terraformrc"));
        assert_eq!((subject.line, subject.column), (4, 1));
        assert!(diag.to_string().contains("on /home/u/.terraformrc line 4"));
    }

    #[test]
    fn wrongly_typed_settings_are_errors_that_spare_the_rest() {
        let (config, diags) = decode_src(
            "plugin_cache_dir = [\"/x\"]\nplugin_cache_may_break_dependency_lock_file = \"yes\"\ncredentials = \"x\"\ncredentials \"ok.example\" { token = \"t\" }\n",
            &CliEnv::default(),
        );
        let summaries: Vec<_> = diags.iter().map(|d| d.summary.as_str()).collect();
        assert_eq!(
            summaries,
            [
                "Error parsing /home/u/.terraformrc: At 1:1: \"plugin_cache_dir\" must be a string",
                "Error parsing /home/u/.terraformrc: At 2:1: \"plugin_cache_may_break_dependency_lock_file\" must be true or false",
                "Error parsing /home/u/.terraformrc: At 3:1: \"credentials\" must be a block with one label, like credentials \"example.com\" { … }",
            ]
        );
        assert_eq!(config.credentials["ok.example"].as_deref(), Some("t"));
    }
}
