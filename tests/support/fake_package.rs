//! Terraform's own fake provider packages (`internal/command/init_test.go`):
//! one executable whose text names the provider, so expected `h1:` values
//! can be checked against the upstream vectors as well as computed
//! independently. For tests of local mirrors, which need no registry.

use std::path::{Path, PathBuf};

use super::{Compression, ZipEntry, build_zip, current_platform, h1_hash, zh_hash};

/// One provider version, with the files of its package.
#[derive(Clone, Debug)]
pub struct Pkg {
    pub host: String,
    pub namespace: String,
    pub type_name: String,
    pub version: String,
    /// (name, content, mode)
    pub files: Vec<(String, Vec<u8>, u32)>,
}

impl Pkg {
    /// Terraform's fake provider package for `[host/]namespace/type` at
    /// `version`: one executable `terraform-provider-TYPE_VERSION` saying
    /// what it is (`internal/command/init_test.go`).
    pub fn fake(source: &str, version: &str) -> Pkg {
        let parts: Vec<&str> = source.split('/').collect();
        let (host, namespace, type_name) = match parts.as_slice() {
            [ns, ty] => ("registry.terraform.io", *ns, *ty),
            [host, ns, ty] => (*host, *ns, *ty),
            _ => panic!("bad test source {source}"),
        };
        let content = format!(
            "This is a fake provider package for {host}/{namespace}/{type_name} {version}, not a real provider.\n"
        );
        Pkg {
            host: host.to_owned(),
            namespace: namespace.to_owned(),
            type_name: type_name.to_owned(),
            version: version.to_owned(),
            files: vec![(
                format!("terraform-provider-{type_name}_{version}"),
                content.into_bytes(),
                0o755,
            )],
        }
    }

    pub fn with_file(mut self, name: &str, content: &[u8], mode: u32) -> Pkg {
        self.files.push((name.to_owned(), content.to_vec(), mode));
        self
    }

    /// `host/namespace/type`, as the lock file labels it.
    pub fn addr(&self) -> String {
        format!("{}/{}/{}", self.host, self.namespace, self.type_name)
    }

    /// How Terraform's UI names the provider (no default hostname).
    pub fn display(&self) -> String {
        if self.host == "registry.terraform.io" {
            format!("{}/{}", self.namespace, self.type_name)
        } else {
            self.addr()
        }
    }

    pub fn h1(&self) -> String {
        let files: Vec<(&str, &[u8])> = self
            .files
            .iter()
            .map(|(name, content, _)| (name.as_str(), content.as_slice()))
            .collect();
        h1_hash(&files)
    }

    pub fn zip(&self) -> Vec<u8> {
        let entries: Vec<ZipEntry> = self
            .files
            .iter()
            .map(|(name, content, mode)| ZipEntry::new(name.clone(), content.clone(), *mode))
            .collect();
        build_zip(&entries, Compression::Deflated)
    }

    pub fn zh(&self) -> String {
        zh_hash(&self.zip())
    }

    fn type_dir(&self, base: &Path) -> PathBuf {
        base.join(&self.host)
            .join(&self.namespace)
            .join(&self.type_name)
    }

    /// Writes the packed layout into mirror `base`; returns the zip's path.
    pub fn write_packed(&self, base: &Path) -> PathBuf {
        let dir = self.type_dir(base);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!(
            "terraform-provider-{}_{}_{}.zip",
            self.type_name,
            self.version,
            current_platform()
        ));
        std::fs::write(&path, self.zip()).unwrap();
        path
    }

    /// Writes the unpacked layout into mirror `base`; returns the package dir.
    pub fn write_unpacked(&self, base: &Path) -> PathBuf {
        let dir = self.package_dir(base);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, content, mode) in &self.files {
            let path = dir.join(name);
            std::fs::write(&path, content).unwrap();
            set_mode(&path, *mode);
        }
        dir
    }

    /// `base/HOST/NS/TYPE/VERSION/OS_ARCH`: where an unpacked mirror keeps it
    /// and where it is installed below `.terraform/plugins` or `providers`.
    pub fn package_dir(&self, base: &Path) -> PathBuf {
        self.type_dir(base)
            .join(&self.version)
            .join(current_platform())
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) {}
