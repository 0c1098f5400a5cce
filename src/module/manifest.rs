//! The module manifest `terraform init`/`terraform get` writes to
//! `<data_dir>/modules/modules.json`: where each installed module call's
//! files are. Read here for the requirements of installed modules, and
//! written here (in Terraform's bytes) by module installation.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::diag::{Diagnostic, Diagnostics};
use crate::go_json;

/// The file name inside `<data_dir>/modules`.
pub const MANIFEST_FILE: &str = "modules.json";

#[derive(Deserialize, Serialize)]
struct ManifestFile {
    #[serde(rename = "Modules")]
    modules: Vec<ManifestRecord>,
}

/// One module call's record, with its fields in the order Terraform's
/// `modsdir.Record` marshals them.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct ManifestRecord {
    /// Module call names from the root joined with `.` (`a.b`); `""` is the
    /// root module.
    #[serde(rename = "Key")]
    pub key: String,
    #[serde(rename = "Source")]
    pub source: String,
    /// The registry module's version; empty (and left out) for others.
    #[serde(rename = "Version", default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Relative to the directory Terraform ran in, i.e. the root module.
    #[serde(rename = "Dir")]
    pub dir: String,
}

/// The records by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest(pub BTreeMap<String, ManifestRecord>);

impl Manifest {
    /// A missing manifest is an empty one: the configuration may simply
    /// have no remote modules.
    pub fn load(data_dir: &Path, diags: &mut Diagnostics) -> Manifest {
        Manifest::load_from(&data_dir.join("modules"), diags)
    }

    /// The manifest in the modules directory `modules_dir`.
    pub fn load_from(modules_dir: &Path, diags: &mut Diagnostics) -> Manifest {
        let path = modules_dir.join(MANIFEST_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Manifest::default(),
            Err(err) => {
                diags.push(Diagnostic::error(
                    "Failed to read module manifest",
                    format!(
                        "The module manifest {} could not be read: {err}.",
                        path.display()
                    ),
                ));
                return Manifest::default();
            }
        };
        match go_json::from_slice::<ManifestFile>(&bytes) {
            Ok(file) => Manifest(
                file.modules
                    .into_iter()
                    .map(|record| (record.key.clone(), record))
                    .collect(),
            ),
            Err(err) => {
                diags.push(Diagnostic::error(
                    "Failed to read module manifest",
                    format!(
                        "The module manifest {} is not valid: {err}. Run \"terraform init\" to reinstall the modules.",
                        path.display()
                    ),
                ));
                Manifest::default()
            }
        }
    }

    pub fn get(&self, key: &str) -> Option<&ManifestRecord> {
        self.0.get(key)
    }

    /// The file as Terraform writes it: Go's `json.Marshal` of the records
    /// sorted by key (compact, `<`, `>` and `&` escaped, no final newline).
    pub fn render(&self) -> String {
        let file = ManifestFile {
            modules: self.0.values().cloned().collect(),
        };
        let text = serde_json::to_string(&file).unwrap_or_default();
        text.replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_records_by_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join("modules")).expect("mkdir");
        fs::write(
            dir.path().join("modules/modules.json"),
            r#"{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"vpc.subnets","Source":"registry.terraform.io/acme/subnets/aws","Version":"1.2.0","Dir":".terraform/modules/vpc.subnets"}]}"#,
        )
        .expect("write");
        let mut diags = Diagnostics::new();
        let manifest = Manifest::load(dir.path(), &mut diags);
        assert!(diags.is_empty());
        assert_eq!(
            manifest.get("vpc.subnets").map(|r| r.dir.as_str()),
            Some(".terraform/modules/vpc.subnets")
        );
        assert!(manifest.get("vpc").is_none());
    }

    #[test]
    fn renders_as_terraform_writes_it() {
        let mut manifest = Manifest::default();
        for (key, source, version, dir) in [
            ("", "", "", "."),
            (
                "a",
                "registry.terraform.io/x/y/z",
                "1.0.0",
                ".terraform/modules/a",
            ),
            ("a.b", "./b<&>", "", ".terraform/modules/a/b<&>"),
        ] {
            manifest.0.insert(
                key.to_string(),
                ManifestRecord {
                    key: key.to_string(),
                    source: source.to_string(),
                    version: version.to_string(),
                    dir: dir.to_string(),
                },
            );
        }
        assert_eq!(
            manifest.render(),
            r#"{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"a","Source":"registry.terraform.io/x/y/z","Version":"1.0.0","Dir":".terraform/modules/a"},{"Key":"a.b","Source":"./b\u003c\u0026\u003e","Dir":".terraform/modules/a/b\u003c\u0026\u003e"}]}"#
        );
    }

    #[test]
    fn missing_manifest_is_empty_and_corrupt_one_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut diags = Diagnostics::new();
        assert!(Manifest::load(dir.path(), &mut diags).get("").is_none());
        assert!(diags.is_empty());

        fs::create_dir_all(dir.path().join("modules")).expect("mkdir");
        fs::write(dir.path().join("modules/modules.json"), "{").expect("write");
        Manifest::load(dir.path(), &mut diags);
        assert_eq!(diags.0[0].summary, "Failed to read module manifest");
    }
}
