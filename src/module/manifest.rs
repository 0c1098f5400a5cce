//! The module manifest `terraform init`/`terraform get` writes to
//! `<data_dir>/modules/modules.json`: where each installed module call's
//! files are. Provider installation reads installed modules, it does not
//! install them.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use serde::Deserialize;

use crate::diag::{Diagnostic, Diagnostics};
use crate::go_json;

#[derive(Deserialize)]
struct ManifestFile {
    #[serde(rename = "Modules")]
    modules: Vec<ManifestRecord>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub(super) struct ManifestRecord {
    /// Module call names from the root joined with `.` (`a.b`); `""` is the
    /// root module.
    #[serde(rename = "Key")]
    pub key: String,
    #[serde(rename = "Source")]
    pub source: String,
    /// Relative to the directory Terraform ran in, i.e. the root module.
    #[serde(rename = "Dir")]
    pub dir: String,
}

#[derive(Debug, Default)]
pub(super) struct Manifest(BTreeMap<String, ManifestRecord>);

impl Manifest {
    /// A missing manifest is an empty one: the configuration may simply
    /// have no remote modules.
    pub fn load(data_dir: &Path, diags: &mut Diagnostics) -> Manifest {
        let path = data_dir.join("modules").join("modules.json");
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
