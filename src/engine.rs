//! Which program's rules an install follows. Terraform and OpenTofu read the
//! same configurations and lock files, but differ exactly where an installer
//! acts: the registry that a bare `hashicorp/aws` names, which files make up
//! a module, where the CLI configuration lives, when a provider may be
//! installed without a signature, and the words on screen. Installing with
//! the wrong rules records providers the other program does not consider the
//! same, so the engine is chosen for a working directory before anything in
//! it is read (`workdir::engine` decides which).

use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Engine {
    #[default]
    Terraform,
    #[value(name = "opentofu")]
    OpenTofu,
}

/// One engine at a time: `main` selects it before any configuration, lock
/// file or address is read, and provider addresses parsed anywhere after
/// that take its default registry. A command over several working
/// directories whose engines differ (`init DIR…`, `cache warm DIR…`) runs
/// one engine's directories, then selects the other and runs the rest:
/// nothing of one group is still running when the engine changes.
static SELECTED: AtomicU8 = AtomicU8::new(0);

impl Engine {
    /// The engine of this run; Terraform until one is selected.
    pub fn current() -> Engine {
        match SELECTED.load(Ordering::Relaxed) {
            1 => Engine::OpenTofu,
            _ => Engine::Terraform,
        }
    }

    /// Makes `self` the engine from now on; see [`SELECTED`] for when it
    /// may change.
    pub fn select(self) {
        let value = match self {
            Engine::Terraform => 0,
            Engine::OpenTofu => 1,
        };
        SELECTED.store(value, Ordering::Relaxed);
    }

    /// Whether `dir` holds any `*.tofu` or `*.tofu.json` file, which only
    /// OpenTofu reads.
    pub fn has_tofu_files(dir: &Path) -> bool {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                !name.starts_with('.')
                    && (name.ends_with(".tofu") || name.ends_with(".tofu.json"))
                    && entry.path().is_file()
            })
    }

    /// The other engine.
    pub fn other(self) -> Engine {
        match self {
            Engine::Terraform => Engine::OpenTofu,
            Engine::OpenTofu => Engine::Terraform,
        }
    }

    /// The registry host of addresses that name none.
    pub fn default_registry_host(self) -> &'static str {
        match self {
            Engine::Terraform => "registry.terraform.io",
            Engine::OpenTofu => "registry.opentofu.org",
        }
    }

    /// The program's name in prose.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Terraform => "Terraform",
            Engine::OpenTofu => "OpenTofu",
        }
    }

    /// The program's command, for advice such as "run `tofu init`".
    pub fn command(self) -> &'static str {
        match self {
            Engine::Terraform => "terraform",
            Engine::OpenTofu => "tofu",
        }
    }

    /// The name `-engine` and `-json` output use.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Terraform => "terraform",
            Engine::OpenTofu => "opentofu",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tofu_files_count() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("main.tf"), "").unwrap();
        assert!(!Engine::has_tofu_files(root));
        std::fs::write(root.join(".hidden.tofu"), "").unwrap();
        std::fs::create_dir(root.join("dir.tofu")).unwrap();
        assert!(!Engine::has_tofu_files(root));
        std::fs::write(root.join("versions.tofu.json"), "{}").unwrap();
        assert!(Engine::has_tofu_files(root));
        assert!(!Engine::has_tofu_files(&root.join("missing")));
    }
}
