//! A git module package, fetched by the user's own `git`, as Terraform
//! fetches it: so SSH keys and agents, `~/.gitconfig` (`insteadOf`,
//! credential helpers) and `GIT_SSH_COMMAND` keep working. Unlike
//! go-getter, which clones the whole history (and with a commit ref
//! cannot do otherwise), only what the wanted commit needs is fetched: a
//! shallow fetch of that one ref, tag, branch or commit id alike (GitHub
//! and `git http-backend` serve any reachable commit by its id).
//!
//! Git runs no hooks (`core.hooksPath=/dev/null`, and no templates are
//! copied into the new repository), never prompts, and may use only the
//! network transports (`GIT_ALLOW_PROTOCOL`), which binds submodules too:
//! no `ext::` command and no local path unless the source itself is a
//! local repository.

use std::ffi::OsString;
use std::path::Path;

use tokio::process::Command;

use super::PackageError;
use super::addr::{GIT_TRANSPORTS, GitAddr};

/// Runs git commands for one fetch.
pub(super) struct Git<'a> {
    pub(super) addr: &'a GitAddr,
    /// The repository being filled.
    pub(super) dir: &'a Path,
    /// Variables added to git's environment.
    pub(super) env: &'a [(OsString, OsString)],
}

impl Git<'_> {
    /// A git command with the safety settings, in the repository (or, for
    /// `init`, beside it).
    fn command(&self, args: &[&str]) -> Command {
        let mut allowed: Vec<&str> = GIT_TRANSPORTS.to_vec();
        if self.addr.url.scheme() == "file" {
            allowed.push("file");
        }
        let mut command = Command::new("git");
        command
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "protocol.ext.allow=never",
                "-c",
                "advice.detachedHead=false",
                // A repository that lives for one fetch needs no upkeep: each
                // fetch would otherwise start `git maintenance run --auto`.
                "-c",
                "maintenance.auto=false",
                "-c",
                "gc.auto=0",
                // Nor does it need its pack files flushed to the disk: it
                // is removed once its tree is checked out.
                "-c",
                "core.fsync=none",
            ])
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ALLOW_PROTOCOL", allowed.join(":"))
            // Set when tfinstall runs inside a git hook or alias; they
            // would point these commands at the user's own repository.
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_OBJECT_DIRECTORY")
            .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
            .env_remove("GIT_CEILING_DIRECTORIES")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        for (name, value) in self.env {
            command.env(name, value);
        }
        command
    }

    /// Runs `git ARGS` in the repository; its standard output, or what it
    /// said on failure.
    async fn run(&self, what: &str, args: &[&str]) -> Result<String, PackageError> {
        let mut command = self.command(args);
        command.current_dir(self.dir);
        let output = command.output().await.map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                PackageError::GitMissing {
                    url: self.addr.url.to_string(),
                }
            } else {
                PackageError::Io {
                    what: format!("run git to {what}"),
                    source,
                }
            }
        })?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned());
        }
        Err(PackageError::Git {
            url: self.addr.url.to_string(),
            what: what.to_owned(),
            message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }

    /// Fills the new directory `self.dir` with the package's tree at the
    /// wanted ref, and returns the commit checked out. The `.git`
    /// directories stay; the caller removes them.
    ///
    /// Three git processes in the common case (`init`, `fetch` with the
    /// helpers it starts, `checkout`): the URL is fetched directly, with
    /// no remote configured, and the commit is read from `.git/HEAD`,
    /// which a detached checkout leaves holding it. A module install runs
    /// this for every package at once, and each process costs CPU.
    pub(super) async fn fetch(&self) -> Result<String, PackageError> {
        std::fs::create_dir(self.dir).map_err(|source| PackageError::Io {
            what: format!("create {}", self.dir.display()),
            source,
        })?;
        // No template: nothing of the user's `init.templateDir` (hooks
        // above all) comes into the repository.
        self.run("create a repository", &["init", "--quiet", "--template="])
            .await?;
        let url = self.addr.url.as_str();
        let wanted = self.addr.reference.as_deref().unwrap_or("HEAD");
        let depth = self.addr.depth.unwrap_or(1).to_string();
        let shallow = self
            .run(
                &format!("fetch {wanted}"),
                &[
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "--depth",
                    &depth,
                    url,
                    wanted,
                ],
            )
            .await;
        let checkout = match shallow {
            Ok(_) => "FETCH_HEAD",
            // A short commit id cannot be asked for by name: fetch the
            // branches and tags, as a clone would, and find it among them.
            Err(err) if looks_like_short_commit(wanted) => {
                tracing::debug!("shallow fetch of {wanted} failed ({err}); fetching every ref");
                self.run(
                    &format!("fetch the branches and tags to find {wanted}"),
                    &[
                        "fetch",
                        "--quiet",
                        "--tags",
                        url,
                        "+refs/heads/*:refs/remotes/origin/*",
                    ],
                )
                .await?;
                wanted
            }
            Err(err) => return Err(err),
        };
        self.run(
            &format!("check out {wanted}"),
            &["checkout", "--quiet", "--detach", checkout, "--"],
        )
        .await?;
        if self.dir.join(".gitmodules").exists() {
            // A submodule's relative URL (`../child.git`) is resolved
            // against the remote `origin`.
            self.run("add the remote", &["remote", "add", "origin", url])
                .await?;
            self.run(
                "fetch the submodules",
                &[
                    "submodule",
                    "update",
                    "--quiet",
                    "--init",
                    "--recursive",
                    "--depth",
                    "1",
                ],
            )
            .await?;
        }
        match detached_head(self.dir) {
            Some(commit) => Ok(commit),
            None => {
                self.run("read the commit checked out", &["rev-parse", "HEAD"])
                    .await
            }
        }
    }
}

/// The commit a detached `HEAD` holds, read from `.git/HEAD` without
/// starting git; `None` where the file says something else (a repository
/// made with the reftable format keeps `HEAD` elsewhere).
fn detached_head(dir: &Path) -> Option<String> {
    let head = std::fs::read_to_string(dir.join(".git").join("HEAD")).ok()?;
    let commit = head.trim_end();
    let is_id = matches!(commit.len(), 40 | 64) && commit.bytes().all(|b| b.is_ascii_hexdigit());
    is_id.then(|| commit.to_owned())
}

/// 4 to 39 hexadecimal digits: what git accepts as an abbreviated commit.
fn looks_like_short_commit(reference: &str) -> bool {
    (4..40).contains(&reference.len()) && reference.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Removes the git metadata from a checked-out tree: the `.git` directory
/// and the `.git` files of submodules. A tree git checked out can hold no
/// other entry of that name.
pub(super) fn remove_git_metadata(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if entry.file_name() == ".git" {
            if kind.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        } else if kind.is_dir() {
            remove_git_metadata(&path)?;
        }
    }
    Ok(())
}

/// What a git ref names on the remote, by one ref listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedRef {
    pub kind: RefKind,
    /// The commit (a tag's peeled commit).
    pub commit: String,
}

/// What a ref name turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefKind {
    /// `refs/tags/…`: expected never to move.
    Tag,
    /// `refs/heads/…`, the remote's `HEAD`, or another ref: moves as
    /// commits land.
    Branch,
}

/// Resolves the ref of `addr` (the remote's `HEAD` when it names none)
/// with one `git ls-remote`, run with [`Git::command`]'s safety settings,
/// in a new empty directory so that no repository around it is read. The
/// ref is looked for as `git fetch` looks for it: the exact name, then
/// under `refs/`, `refs/tags/`, `refs/heads/`. `None` when nothing
/// matches (an abbreviated commit, which only a fetch can find).
pub(super) async fn resolve_ref(
    addr: &GitAddr,
    env: &[(OsString, OsString)],
) -> Result<Option<ResolvedRef>, PackageError> {
    let scratch = tempfile::tempdir().map_err(|source| PackageError::Io {
        what: "create a directory to list the refs in".to_owned(),
        source,
    })?;
    let git = Git {
        addr,
        dir: scratch.path(),
        env,
    };
    let wanted = addr.reference.as_deref().unwrap_or("HEAD");
    let candidates: Vec<String> = if wanted == "HEAD" {
        vec!["HEAD".to_owned()]
    } else {
        let mut names = vec![wanted.to_owned()];
        if !wanted.starts_with("refs/") {
            for prefix in ["refs/", "refs/tags/", "refs/heads/"] {
                names.push(format!("{prefix}{wanted}"));
            }
        }
        names
    };
    // A tag's peeled commit is listed as `NAME^{}`, which protocol
    // version 0 matches against the patterns as a name of its own.
    let peeled: Vec<String> = candidates
        .iter()
        .map(|name| format!("{name}^{{}}"))
        .collect();
    let mut args = vec!["ls-remote", addr.url.as_str()];
    args.extend(candidates.iter().chain(&peeled).map(String::as_str));
    let listing = git
        .run(&format!("list the refs to find {wanted}"), &args)
        .await?;
    Ok(pick_ref(&listing, &candidates))
}

/// The first of `candidates` that `listing` (`git ls-remote` output:
/// `<commit>\t<name>` lines, a tag's peeled commit as `<name>^{}`) holds.
/// `ls-remote` patterns match the ends of names, so only exact names count.
fn pick_ref(listing: &str, candidates: &[String]) -> Option<ResolvedRef> {
    let refs: Vec<(&str, &str)> = listing
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(commit, _)| commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect();
    let find = |name: &str| {
        refs.iter()
            .find(|(_, listed)| *listed == name)
            .map(|(commit, _)| commit.to_ascii_lowercase())
    };
    candidates.iter().find_map(|name| {
        let commit = find(&format!("{name}^{{}}")).or_else(|| find(name))?;
        let kind = if name.starts_with("refs/tags/") {
            RefKind::Tag
        } else {
            RefKind::Branch
        };
        Some(ResolvedRef { kind, commit })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_win_over_branches_and_peel() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let c = "c".repeat(40);
        let listing = format!(
            "{a}\trefs/heads/v1\n{b}\trefs/tags/v1\n{c}\trefs/tags/v1^{{}}\n{a}\trefs/heads/x/v1\n"
        );
        let candidates: Vec<String> = ["v1", "refs/v1", "refs/tags/v1", "refs/heads/v1"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            pick_ref(&listing, &candidates),
            Some(ResolvedRef {
                kind: RefKind::Tag,
                commit: c
            })
        );
        let only_branch = format!("{a}\trefs/heads/x/v1\n{b}\trefs/heads/v1\n");
        assert_eq!(
            pick_ref(&only_branch, &candidates),
            Some(ResolvedRef {
                kind: RefKind::Branch,
                commit: b
            })
        );
        assert_eq!(
            pick_ref(&format!("{a}\trefs/heads/x/v1\n"), &candidates),
            None
        );
    }
}
