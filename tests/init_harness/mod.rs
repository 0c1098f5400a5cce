// Each test binary that includes this module uses only part of it.
#![allow(dead_code)]

//! A working directory, a home directory and provider packages on disk, for
//! tests that run `tfinstall init` against local mirrors only.
//!
//! Every package is one of Terraform's own `init_test.go` fakes (a single
//! executable whose text names the provider), so expected `h1:` values can be
//! checked against the upstream vectors as well as computed independently.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::SystemTime;

use crate::support::{
    Compression, ZipEntry, build_zip, current_platform, h1_hash, tfinstall_command, zh_hash,
};

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
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(not(unix))]
pub fn set_mode(_path: &Path, _mode: u32) {}

#[cfg(unix)]
pub fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// A fresh home directory and working directory under one temp dir.
pub struct Case {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
}

impl Case {
    pub fn new() -> Case {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        let work = root.join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        Case {
            _tmp: tmp,
            root,
            home,
            work,
        }
    }

    /// Writes `content` to `rel` below the working directory.
    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.work.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// A mirror directory `name` below the temp root (outside the working dir).
    pub fn mirror(&self, name: &str) -> PathBuf {
        let dir = self.root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `tfinstall init ARGS` in the working directory, no CLI config.
    pub fn command(&self, args: &[&str]) -> assert_cmd::Command {
        let mut command = tfinstall_command(&self.home);
        command.current_dir(&self.work).arg("init").args(args);
        command
    }

    pub fn init(&self, args: &[&str]) -> Run {
        Run::from(self.command(args).output().unwrap())
    }

    pub fn lock_path(&self) -> PathBuf {
        self.work.join(".terraform.lock.hcl")
    }

    pub fn lock(&self) -> String {
        std::fs::read_to_string(self.lock_path()).unwrap()
    }

    pub fn data(&self) -> PathBuf {
        self.work.join(".terraform")
    }

    /// Everything init may write: the data directory and the lock file.
    pub fn snapshot(&self) -> Snapshot {
        let mut entries = BTreeMap::new();
        collect(&self.work, &self.data(), &mut entries);
        collect(&self.work, &self.lock_path(), &mut entries);
        Snapshot(entries)
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(output: Output) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    }
}

impl Run {
    #[track_caller]
    pub fn success(&self) -> &Run {
        assert_eq!(
            self.code, 0,
            "expected success\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn failure(&self) -> &Run {
        assert_eq!(
            self.code, 1,
            "expected exit 1\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// The `- …` progress lines, in order.
    pub fn progress(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|line| line.starts_with("- "))
            .collect()
    }

    #[track_caller]
    pub fn stderr_has(&self, text: &str) -> &Run {
        assert!(
            self.stderr.contains(text),
            "stderr lacks {text:?}\n--- stderr\n{}",
            self.stderr
        );
        self
    }

    #[track_caller]
    pub fn stdout_has(&self, text: &str) -> &Run {
        assert!(
            self.stdout.contains(text),
            "stdout lacks {text:?}\n--- stdout\n{}",
            self.stdout
        );
        self
    }
}

/// Paths with their kind, permission bits, content (or link target) and, for
/// files, modification time: equal snapshots mean nothing was touched.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<PathBuf, Entry>);

#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    Dir {
        mode: u32,
    },
    File {
        mode: u32,
        content: Vec<u8>,
        modified: SystemTime,
    },
    Symlink {
        target: PathBuf,
    },
}

fn collect(base: &Path, path: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    let rel = path.strip_prefix(base).unwrap().to_path_buf();
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt as _;
        meta.permissions().mode() & 0o7777
    };
    #[cfg(not(unix))]
    let mode = 0;
    if meta.file_type().is_symlink() {
        out.insert(
            rel,
            Entry::Symlink {
                target: std::fs::read_link(path).unwrap(),
            },
        );
    } else if meta.is_dir() {
        out.insert(rel, Entry::Dir { mode });
        for entry in std::fs::read_dir(path).unwrap() {
            collect(base, &entry.unwrap().path(), out);
        }
    } else {
        out.insert(
            rel,
            Entry::File {
                mode,
                content: std::fs::read(path).unwrap(),
                modified: meta.modified().unwrap(),
            },
        );
    }
}

/// The lock file Terraform writes for `entries`, in the order given:
/// (address, version, canonical constraints or "", hashes already sorted).
pub fn lock_text(entries: &[(&str, &str, &str, &[&str])]) -> String {
    let mut text = String::from(
        "# This file is maintained automatically by \"terraform init\".\n# Manual edits may be lost in future updates.\n",
    );
    for (addr, version, constraints, hashes) in entries {
        text.push_str(&format!("\nprovider \"{addr}\" {{\n"));
        if constraints.is_empty() {
            text.push_str(&format!("  version = \"{version}\"\n"));
        } else {
            text.push_str(&format!(
                "  version     = \"{version}\"\n  constraints = \"{constraints}\"\n"
            ));
        }
        if !hashes.is_empty() {
            text.push_str("  hashes = [\n");
            for hash in *hashes {
                text.push_str(&format!("    \"{hash}\",\n"));
            }
            text.push_str("  ]\n");
        }
        text.push_str("}\n");
    }
    text
}

pub const CREATED: &str = "\nTerraform has created a lock file .terraform.lock.hcl to record the provider\nselections it made above. Include this file in your version control repository\nso that Terraform can guarantee to make the same selections by default when\nyou run \"terraform init\" in the future.\n";

pub const CHANGED: &str = "\nTerraform has made some changes to the provider dependency selections recorded\nin the .terraform.lock.hcl file. Review those changes and commit them to your\nversion control system if they represent changes you intended to make.\n";
