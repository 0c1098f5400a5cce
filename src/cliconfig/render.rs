//! Writes a [`CliConfig`] back out as a CLI configuration file, in HCL 1's
//! native syntax, which every Terraform and OpenTofu release reads.
//!
//! The hand-off (`crate::handoff`) needs it: Terraform reads one main file
//! named by `TF_CLI_CONFIG_FILE` and then skips `~/.terraform.d/*.tfrc` and
//! `credentials.tfrc.json`, so the file it is given must carry everything
//! the user's files said (credentials, `host` blocks, the credentials
//! helper, the plugin cache) beside the installation methods that changed.
//! What is written is what tfinstall understood: settings it does not read
//! (the legacy `providers` map, a `credentials` block's attributes other
//! than `token`) are not carried.

use std::fmt::Write as _;

use super::{CliConfig, InstallMethod, MethodLocation, OciCredentials};
use crate::go_quote::go_quote;

/// The configuration as a file Terraform reads back to the same settings.
/// Strings are written with Go's quoting, which HCL 1 unquotes (HCL 1 keeps
/// `${…}` as written, as it read it).
pub fn render(config: &CliConfig) -> String {
    let mut out = String::new();
    if let Some(dir) = &config.plugin_cache_dir {
        setting(&mut out, "plugin_cache_dir", &q(&dir.to_string_lossy()));
    }
    for (on, name) in [
        (
            config.plugin_cache_may_break_lock_file,
            "plugin_cache_may_break_dependency_lock_file",
        ),
        (config.disable_checkpoint, "disable_checkpoint"),
        (
            config.disable_checkpoint_signature,
            "disable_checkpoint_signature",
        ),
    ] {
        if on {
            setting(&mut out, name, "true");
        }
    }
    for (host, token) in &config.credentials {
        let _ = writeln!(out, "\ncredentials {} {{", q(&host.to_string()));
        if let Some(token) = token {
            let _ = writeln!(out, "  token = {}", q(token));
        }
        out.push_str("}\n");
    }
    if let Some(helper) = &config.credentials_helper {
        let _ = writeln!(out, "\ncredentials_helper {} {{", q(&helper.name));
        let _ = writeln!(out, "  args = {}", list(&helper.args));
        out.push_str("}\n");
    }
    for (host, services) in &config.hosts {
        let _ = writeln!(out, "\nhost {} {{\n  services = {{", q(&host.to_string()));
        for (service, url) in services {
            let _ = writeln!(out, "    {} = {}", q(service), q(url));
        }
        out.push_str("  }\n}\n");
    }
    for (label, credentials) in &config.oci_credentials {
        let _ = writeln!(out, "\noci_credentials {} {{", q(label));
        match credentials {
            OciCredentials::Basic { username, password } => {
                let _ = writeln!(
                    out,
                    "  username = {}\n  password = {}",
                    q(username),
                    q(password)
                );
            }
            OciCredentials::Helper(helper) => {
                let _ = writeln!(out, "  docker_credentials_helper = {}", q(helper));
            }
        }
        out.push_str("}\n");
    }
    let defaults = &config.oci_default_credentials;
    if *defaults != Default::default() {
        out.push_str("\noci_default_credentials {\n");
        let _ = writeln!(
            out,
            "  discover_ambient_credentials = {}",
            defaults.discover_ambient_credentials
        );
        if let Some(files) = &defaults.docker_style_config_files {
            let files: Vec<String> = files
                .iter()
                .map(|f| f.to_string_lossy().into_owned())
                .collect();
            let _ = writeln!(out, "  docker_style_config_files = {}", list(&files));
        }
        if let Some(helper) = &defaults.docker_credentials_helper {
            let _ = writeln!(out, "  docker_credentials_helper = {}", q(helper));
        }
        out.push_str("}\n");
    }
    if let Some(installation) = &config.provider_installation {
        out.push_str("\nprovider_installation {\n");
        if !installation.dev_overrides.is_empty() {
            out.push_str("  dev_overrides {\n");
            for (addr, path) in &installation.dev_overrides {
                let _ = writeln!(
                    out,
                    "    {} = {}",
                    q(&addr.to_string()),
                    q(&path.to_string_lossy())
                );
            }
            out.push_str("  }\n");
        }
        for method in &installation.methods {
            render_method(&mut out, method);
        }
        out.push_str("}\n");
    }
    out
}

fn render_method(out: &mut String, method: &InstallMethod) {
    let (name, location) = match &method.location {
        MethodLocation::FilesystemMirror(path) => (
            "filesystem_mirror",
            Some(("path", path.to_string_lossy().into_owned())),
        ),
        MethodLocation::NetworkMirror(url) => ("network_mirror", Some(("url", url.clone()))),
        MethodLocation::OciMirror(template) => (
            "oci_mirror",
            Some(("repository_template", template.clone())),
        ),
        MethodLocation::Direct => ("direct", None),
    };
    let _ = writeln!(out, "  {name} {{");
    if let Some((argument, value)) = location {
        let _ = writeln!(out, "    {argument} = {}", q(&value));
    }
    if !method.include.is_empty() {
        let _ = writeln!(out, "    include = {}", list(&method.include));
    }
    if !method.exclude.is_empty() {
        let _ = writeln!(out, "    exclude = {}", list(&method.exclude));
    }
    if method.trust_all_hashes {
        out.push_str("    trust_all_hashes = true\n");
    }
    out.push_str("  }\n");
}

fn setting(out: &mut String, name: &str, value: &str) {
    let _ = writeln!(out, "{name} = {value}");
}

fn q(text: &str) -> String {
    go_quote(text)
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| q(item)).collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::addr::{Hostname, ProviderAddr};
    use crate::cliconfig::{
        CliEnv, CredentialsHelper, OciDefaultCredentials, ProviderInstallation, load,
    };
    use crate::diag::SourcePos;

    fn pos() -> SourcePos {
        SourcePos::new(PathBuf::new(), 0, 0)
    }

    fn method(location: MethodLocation, include: &[&str], exclude: &[&str]) -> InstallMethod {
        InstallMethod {
            location,
            include: include.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            trust_all_hashes: false,
            pos: pos(),
        }
    }

    /// Every setting survives a write and a read with Terraform's rules:
    /// the hand-off loses nothing that tfinstall understood.
    #[test]
    fn a_rendered_configuration_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let host = |name: &str| Hostname::parse(name).unwrap();
        let config = CliConfig {
            plugin_cache_dir: Some(dir.path().to_path_buf()),
            plugin_cache_may_break_lock_file: true,
            disable_checkpoint: true,
            disable_checkpoint_signature: false,
            credentials: BTreeMap::from([
                (host("app.terraform.io"), Some("t\"ok\\en ${x}".to_string())),
                (host("registry.example:8443"), None),
            ]),
            hosts: BTreeMap::from([(
                host("modules.example"),
                BTreeMap::from([(
                    "modules.v1".to_string(),
                    "https://m.example/v1/modules/".to_string(),
                )]),
            )]),
            provider_installation: Some(ProviderInstallation {
                dev_overrides: vec![(
                    ProviderAddr::parse("example.com/acme/dev").unwrap(),
                    PathBuf::from("/src/dev"),
                )],
                methods: vec![
                    method(
                        MethodLocation::FilesystemMirror("/mirror dir/ü".into()),
                        &["example.com/*/*"],
                        &[],
                    ),
                    method(
                        MethodLocation::NetworkMirror("https://mirror.example/".into()),
                        &[],
                        &["registry.terraform.io/hashicorp/aws"],
                    ),
                    method(MethodLocation::Direct, &[], &["example.com/*/*"]),
                ],
            }),
            credentials_helper: Some(CredentialsHelper {
                name: "vault".into(),
                args: vec!["--path".into(), "a b".into()],
                pos: pos(),
            }),
            oci_credentials: BTreeMap::from([
                (
                    "ghcr.io/acme".to_string(),
                    OciCredentials::Basic {
                        username: "u".into(),
                        password: "p".into(),
                    },
                ),
                (
                    "ecr.example".to_string(),
                    OciCredentials::Helper("ecr-login".into()),
                ),
            ]),
            oci_default_credentials: OciDefaultCredentials {
                discover_ambient_credentials: false,
                docker_style_config_files: Some(vec![PathBuf::from("/etc/auth.json")]),
                docker_credentials_helper: Some("pass".into()),
            },
            netrc: None,
        };
        let file = dir.path().join("handoff.tfrc");
        std::fs::write(&file, render(&config)).unwrap();
        let env = CliEnv {
            vars: BTreeMap::from([("TF_CLI_CONFIG_FILE".into(), file.display().to_string())]),
            profile_dir: None,
            engine: Default::default(),
        };
        let (mut read, diags) = load(&env);
        assert!(diags.is_empty(), "{diags}\n{}", render(&config));
        // Positions name the file they were read from.
        let strip = |c: &mut CliConfig| {
            c.credentials_helper.as_mut().unwrap().pos = pos();
            for m in &mut c.provider_installation.as_mut().unwrap().methods {
                m.pos = pos();
            }
        };
        strip(&mut read);
        assert_eq!(read, config);
    }

    #[test]
    fn an_empty_configuration_is_an_empty_file() {
        assert_eq!(render(&CliConfig::default()), "");
    }
}
