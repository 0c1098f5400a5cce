//! Which program's rules an install follows. Terraform and OpenTofu read the
//! same configurations and lock files, but differ exactly where an installer
//! acts: the registry that a bare `hashicorp/aws` names, which files make up
//! a module, where the CLI configuration lives, when a provider may be
//! installed without a signature, and the words on screen. Installing with
//! the wrong rules records providers the other program does not consider the
//! same, so the engine is chosen once, before anything is read.

use std::path::Path;
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    #[default]
    Terraform,
    #[value(name = "opentofu")]
    OpenTofu,
}

/// One engine per process: `main` selects it before any configuration,
/// lock file or address is read, and provider addresses parsed anywhere
/// after that take its default registry.
static SELECTED: OnceLock<Engine> = OnceLock::new();

impl Engine {
    /// The engine of this run; Terraform until one is selected.
    pub fn current() -> Engine {
        SELECTED.get().copied().unwrap_or_default()
    }

    /// Makes `self` the engine of this run. Only the first call counts.
    pub fn select(self) {
        let _ = SELECTED.set(self);
    }

    /// OpenTofu when a root module directory holds any `*.tofu` or
    /// `*.tofu.json` file, which only OpenTofu reads; Terraform otherwise.
    pub fn detect<'a>(root_modules: impl IntoIterator<Item = &'a Path>) -> Engine {
        let has_tofu_files = |dir: &Path| {
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
        };
        if root_modules.into_iter().any(has_tofu_files) {
            Engine::OpenTofu
        } else {
            Engine::Terraform
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
    fn tofu_files_in_a_root_module_choose_opentofu() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("main.tf"), "").unwrap();
        assert_eq!(Engine::detect([root]), Engine::Terraform);
        std::fs::write(root.join(".hidden.tofu"), "").unwrap();
        std::fs::create_dir(root.join("dir.tofu")).unwrap();
        assert_eq!(Engine::detect([root]), Engine::Terraform);
        std::fs::write(root.join("versions.tofu.json"), "{}").unwrap();
        assert_eq!(Engine::detect([root]), Engine::OpenTofu);
        let other = tempfile::tempdir().unwrap();
        assert_eq!(Engine::detect([other.path(), root]), Engine::OpenTofu);
        assert_eq!(Engine::detect([other.path()]), Engine::Terraform);
    }
}
