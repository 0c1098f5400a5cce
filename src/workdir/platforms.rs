//! The platforms a working directory's lock file is to cover: the list a
//! team commits so that every `init`, on every machine, records the same
//! platforms' hashes without anyone remembering a flag.
//!
//! Three places can give it, the first that does deciding:
//!
//! 1. `-platform` flags on the command line;
//! 2. the environment variable `TFINSTALL_LOCK_PLATFORMS` (platforms
//!    separated by commas or spaces; set but empty, it says "none" and the
//!    file is not read), for a CI system that sets it once for every
//!    repository it builds;
//! 3. the file `.tfinstall-platforms` in the configuration directory or the
//!    nearest parent holding one (up to the repository root, the first
//!    directory with a `.git`), one platform a line, `#` starting a comment:
//!    committed beside the code, so one file at a repository's root covers
//!    all its root modules.
//!
//! Why a file of its own: the lock file cannot hold the list (Terraform
//! writes that file anew on every change and keeps nothing it did not
//! write, comments included), Terraform refuses unknown settings in `.tf`
//! files, and the CLI configuration is each user's, not the team's.
//! Terraform and OpenTofu read only `*.tf`, `*.tf.json`, `*.tofu`,
//! `*.tofu.json`, test files and `.terraform.lock.hcl` in a configuration
//! directory, so they never see this one.

use std::path::{Path, PathBuf};

use crate::addr::Platform;
use crate::diag::{Diagnostic, Diagnostics};
use crate::go_quote::go_quote;

/// The file that lists a configuration's lock platforms.
pub const PLATFORMS_FILE: &str = ".tfinstall-platforms";

/// The environment variable that lists them.
pub const PLATFORMS_VAR: &str = "TFINSTALL_LOCK_PLATFORMS";

/// The platforms to lock and what listed them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockPlatforms {
    /// In the order given, each once.
    pub platforms: Vec<Platform>,
    pub listed_by: ListedBy,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListedBy {
    Flags,
    Environment,
    File(PathBuf),
    /// Nothing lists any.
    Nothing,
}

/// How messages name what listed the platforms.
impl std::fmt::Display for ListedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListedBy::Flags => f.write_str("the -platform options"),
            ListedBy::Environment => f.write_str(PLATFORMS_VAR),
            ListedBy::File(file) => write!(f, "{}", file.display()),
            ListedBy::Nothing => f.write_str("no list"),
        }
    }
}

impl LockPlatforms {
    /// The platforms to lock for `dir`'s configuration: `flags` when there
    /// are any, else the environment's list, else the nearest file's.
    pub fn for_dir(dir: &Path, flags: &[String]) -> Result<LockPlatforms, Diagnostics> {
        if !flags.is_empty() {
            return Ok(LockPlatforms {
                platforms: crate::addr::target_platforms(flags)?,
                listed_by: ListedBy::Flags,
            });
        }
        if let Some(value) = std::env::var_os(PLATFORMS_VAR) {
            let value = value.to_string_lossy();
            let platforms = parse_list(&value, |token, err| {
                Diagnostic::error(
                    "Invalid lock platform",
                    format!(
                        "The string {} given in {PLATFORMS_VAR} is not a valid target platform: {err}. List platforms such as linux_amd64 and darwin_arm64, separated by commas or spaces.",
                        go_quote(token)
                    ),
                )
            })?;
            return Ok(LockPlatforms {
                platforms,
                listed_by: ListedBy::Environment,
            });
        }
        let Some(file) = nearest_file(dir) else {
            return Ok(LockPlatforms {
                platforms: Vec::new(),
                listed_by: ListedBy::Nothing,
            });
        };
        let text = std::fs::read_to_string(&file).map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Failed to read the lock platforms",
                format!(
                    "Could not read {}: {err}. Fix its permissions, or remove it to lock only this platform.",
                    file.display()
                ),
            ))
        })?;
        let mut diags = Diagnostics::new();
        let mut platforms = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default();
            let listed = parse_list(line, |token, err| {
                Diagnostic::error(
                    "Invalid lock platform",
                    format!(
                        "The string {} in {} is not a valid target platform: {err}. List one platform a line, such as linux_amd64 or darwin_arm64.",
                        go_quote(token),
                        file.display()
                    ),
                )
                .at(&file, number + 1, 1)
            });
            match listed {
                Ok(listed) => push_new(&mut platforms, listed),
                Err(errors) => diags.extend(errors),
            }
        }
        if diags.has_errors() {
            return Err(diags);
        }
        Ok(LockPlatforms {
            platforms,
            listed_by: ListedBy::File(file),
        })
    }

    /// The listed platforms other than `current`: those whose hashes come
    /// from elsewhere than the install that runs here.
    pub fn others(&self, current: &Platform) -> Vec<Platform> {
        self.platforms
            .iter()
            .filter(|platform| *platform != current)
            .cloned()
            .collect()
    }
}

/// The nearest [`PLATFORMS_FILE`] from `dir` up to the repository root.
fn nearest_file(dir: &Path) -> Option<PathBuf> {
    let dir = std::path::absolute(dir).ok()?;
    for at in dir.ancestors() {
        let file = at.join(PLATFORMS_FILE);
        if file.is_file() {
            return Some(file);
        }
        if at.join(".git").exists() {
            return None;
        }
    }
    None
}

/// Platforms separated by commas or white space, each once.
fn parse_list(
    text: &str,
    invalid: impl Fn(&str, &dyn std::fmt::Display) -> Diagnostic,
) -> Result<Vec<Platform>, Diagnostics> {
    let mut diags = Diagnostics::new();
    let mut platforms = Vec::new();
    for token in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|token| !token.is_empty())
    {
        match Platform::parse(token) {
            Ok(platform) => push_new(&mut platforms, vec![platform]),
            Err(err) => diags.push(invalid(token, &err)),
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        Ok(platforms)
    }
}

fn push_new(platforms: &mut Vec<Platform>, more: Vec<Platform>) {
    for platform in more {
        if !platforms.contains(&platform) {
            platforms.push(platform);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(platforms: &[Platform]) -> Vec<String> {
        platforms.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_nearest_file_lists_them_up_to_the_repository_root() {
        let repo = tempfile::tempdir().unwrap();
        let module = repo.path().join("live/prod");
        std::fs::create_dir_all(&module).unwrap();
        std::fs::create_dir(repo.path().join(".git")).unwrap();
        assert_eq!(nearest_file(&module), None);
        std::fs::write(
            repo.path().join(PLATFORMS_FILE),
            "# the team's machines\nlinux_amd64\ndarwin_arm64  # laptops\n\nlinux_amd64, windows_amd64\n",
        )
        .unwrap();
        assert_eq!(
            nearest_file(&module),
            Some(repo.path().join(PLATFORMS_FILE))
        );
        let nested = repo.path().join("live/.git");
        std::fs::create_dir(&nested).unwrap();
        assert_eq!(nearest_file(&module), None, "a nested repository stops it");
        std::fs::remove_dir(&nested).unwrap();

        // Without the variable (these tests never set it) the file decides.
        if std::env::var_os(PLATFORMS_VAR).is_none() {
            let locked = LockPlatforms::for_dir(&module, &[]).unwrap();
            assert_eq!(
                names(&locked.platforms),
                ["linux_amd64", "darwin_arm64", "windows_amd64"]
            );
            assert_eq!(
                names(&locked.others(&Platform::parse("linux_amd64").unwrap())),
                ["darwin_arm64", "windows_amd64"]
            );
            // Flags win.
            let flagged = LockPlatforms::for_dir(&module, &["freebsd_amd64".to_owned()]).unwrap();
            assert_eq!(names(&flagged.platforms), ["freebsd_amd64"]);
            assert_eq!(flagged.listed_by, ListedBy::Flags);
        }
    }

    #[test]
    fn a_bad_line_is_named_with_its_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(PLATFORMS_FILE), "linux_amd64\nmacos\n").unwrap();
        if std::env::var_os(PLATFORMS_VAR).is_some() {
            return;
        }
        let err = LockPlatforms::for_dir(dir.path(), &[]).unwrap_err();
        let diag = &err.iter().next().unwrap();
        assert_eq!(diag.summary, "Invalid lock platform");
        assert!(
            diag.detail.starts_with("The string \"macos\" in "),
            "{}",
            diag.detail
        );
        assert_eq!(diag.subject.as_ref().unwrap().line, 2);
    }

    #[test]
    fn lists_split_on_commas_and_spaces_and_keep_each_platform_once() {
        let parsed = parse_list(
            " linux_amd64,darwin_arm64  linux_amd64,,",
            |_, _| unreachable!(),
        )
        .unwrap();
        assert_eq!(names(&parsed), ["linux_amd64", "darwin_arm64"]);
        assert!(parse_list("", |_, _| unreachable!()).unwrap().is_empty());
    }
}
