//! Real git repositories served as GitHub serves them: bare repositories
//! with real commits, tags and branches, behind the test HTTPS server
//! through git's own `git http-backend` (the smart HTTP protocol, version 2
//! when the client asks for it, as every git since 2.26 does). Nothing is
//! mocked: what a client fetches is what git sends.
//!
//! Repositories are written with `git fast-import`, which makes a history
//! of hundreds of commits in one process instead of one per commit.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::server::{CgiMount, TestServer};

/// Where `git http-backend` lives: `git --exec-path`.
fn http_backend() -> PathBuf {
    let output = git_in(Path::new("."), &["--exec-path"]);
    PathBuf::from(output.trim()).join("git-http-backend")
}

/// Runs git with no user or system configuration, so the tests' repositories
/// are the same whoever runs them; panics with git's message on failure.
fn git_in(dir: &Path, args: &[&str]) -> String {
    let output = plain_git(dir)
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("cannot run git (is it installed?): {err}"));
    assert!(
        output.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("git prints UTF-8 here")
}

/// A git command isolated from the user's and the system's configuration.
fn plain_git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    command
}

/// A directory of bare repositories, served below `/git/` of a test server.
pub struct GitServer {
    root: tempfile::TempDir,
    base_url: String,
}

impl GitServer {
    /// Serves the repositories that this server will hold through `server`:
    /// `https://HOST/git/NAME.git`.
    pub fn start(server: &TestServer) -> GitServer {
        let root = tempfile::tempdir().expect("temporary directory for repositories");
        server.mount_cgi(CgiMount {
            prefix: "/git/".to_owned(),
            program: http_backend(),
            args: Vec::new(),
            env: vec![
                (
                    "GIT_PROJECT_ROOT".to_owned(),
                    root.path().to_string_lossy().into_owned(),
                ),
                ("GIT_HTTP_EXPORT_ALL".to_owned(), "1".to_owned()),
                ("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned()),
                ("GIT_CONFIG_GLOBAL".to_owned(), "/dev/null".to_owned()),
            ],
            header_env: vec![("Git-Protocol".to_owned(), "GIT_PROTOCOL".to_owned())],
        });
        GitServer {
            root,
            base_url: server.url_for("/git/"),
        }
    }

    /// A new, empty bare repository `NAME.git`. Like GitHub, it lets a
    /// client fetch any commit it holds by its id.
    pub fn create(&self, name: &str) -> GitRepo {
        let path = self.root.path().join(format!("{name}.git"));
        git_in(
            self.root.path(),
            &[
                "init",
                "--quiet",
                "--bare",
                "--initial-branch=main",
                path.to_str().expect("UTF-8 temporary path"),
            ],
        );
        git_in(
            &path,
            &["config", "uploadpack.allowReachableSHA1InWant", "true"],
        );
        git_in(&path, &["config", "uploadpack.allowFilter", "true"]);
        GitRepo {
            path,
            url: format!("{}{name}.git", self.base_url),
        }
    }

    /// The directory holding the bare repositories.
    pub fn root(&self) -> &Path {
        self.root.path()
    }
}

/// One bare repository of a [`GitServer`].
pub struct GitRepo {
    path: PathBuf,
    url: String,
}

/// The time every commit is made at: the same bytes on every run.
const COMMIT_TIME: u64 = 1_700_000_000;

impl GitRepo {
    /// `https://HOST/git/NAME.git`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bare repository's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Commits `files` (path, content; every other file of the branch kept)
    /// on top of `branch`, creating the branch if it does not exist, and
    /// returns the new commit's id.
    pub fn commit(&self, branch: &str, message: &str, files: &[(&str, &[u8])]) -> String {
        let changes: Vec<FileChange<'_>> = files
            .iter()
            .map(|(path, data)| FileChange::Write {
                path,
                data,
                mode: "100644",
            })
            .collect();
        self.commit_changes(branch, message, &changes)
    }

    /// [`commit`](Self::commit) with any kind of change: executables,
    /// symbolic links, submodule links and deletions.
    pub fn commit_changes(
        &self,
        branch: &str,
        message: &str,
        changes: &[FileChange<'_>],
    ) -> String {
        let mut stream = Vec::new();
        self.write_commit(&mut stream, branch, message, changes, true, 0);
        self.import(&stream);
        self.rev_parse(&format!("refs/heads/{branch}"))
    }

    /// Writes a history of `commits` commits on `branch` touching `files`
    /// files (the first commit adds them all, each later one rewrites one of
    /// them), in one `git fast-import`; returns the last commit's id. A
    /// repository shaped like a real module's: its history is much larger
    /// than its newest tree.
    pub fn history(&self, branch: &str, commits: usize, files: usize) -> String {
        assert!(commits >= 1 && files >= 1);
        let mut stream = Vec::new();
        let names: Vec<String> = (0..files)
            .map(|index| format!("file{index:04}.tf"))
            .collect();
        for number in 0..commits {
            let contents: Vec<(usize, Vec<u8>)> = if number == 0 {
                (0..files).map(|index| (index, content(index, 0))).collect()
            } else {
                vec![(number % files, content(number % files, number))]
            };
            let changes: Vec<FileChange<'_>> = contents
                .iter()
                .map(|(index, data)| FileChange::Write {
                    path: &names[*index],
                    data,
                    mode: "100644",
                })
                .collect();
            self.write_commit(
                &mut stream,
                branch,
                &format!("commit {number}"),
                &changes,
                number == 0,
                number as u64,
            );
        }
        self.import(&stream);
        self.rev_parse(&format!("refs/heads/{branch}"))
    }

    /// One `commit` command of a fast-import stream. `from_existing`: the
    /// branch's parent is its tip in the repository (fast-import would
    /// otherwise start the branch afresh); later commits of one stream
    /// follow on from the one before by themselves.
    fn write_commit(
        &self,
        stream: &mut Vec<u8>,
        branch: &str,
        message: &str,
        changes: &[FileChange<'_>],
        from_existing: bool,
        seconds: u64,
    ) {
        let when = COMMIT_TIME + seconds;
        writeln!(stream, "commit refs/heads/{branch}").unwrap();
        writeln!(stream, "author Test <test@example.com> {when} +0000").unwrap();
        writeln!(stream, "committer Test <test@example.com> {when} +0000").unwrap();
        writeln!(stream, "data {}\n{message}", message.len()).unwrap();
        if from_existing && let Some(tip) = self.try_rev_parse(&format!("refs/heads/{branch}")) {
            writeln!(stream, "from {tip}").unwrap();
        }
        for change in changes {
            match change {
                FileChange::Write { path, data, mode } => {
                    writeln!(stream, "M {mode} inline {path}\ndata {}", data.len()).unwrap();
                    stream.extend_from_slice(data);
                    stream.push(b'\n');
                }
                FileChange::Symlink { path, target } => {
                    writeln!(stream, "M 120000 inline {path}\ndata {}", target.len()).unwrap();
                    stream.extend_from_slice(target.as_bytes());
                    stream.push(b'\n');
                }
                FileChange::Submodule { path, commit } => {
                    writeln!(stream, "M 160000 {commit} {path}").unwrap();
                }
                FileChange::Delete { path } => writeln!(stream, "D {path}").unwrap(),
            }
        }
        stream.push(b'\n');
    }

    fn import(&self, stream: &[u8]) {
        let mut child = plain_git(&self.path)
            .args(["fast-import", "--quiet"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run git fast-import");
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(stream)
            .expect("feed git fast-import");
        let output = child.wait_with_output().expect("wait for git fast-import");
        assert!(
            output.status.success(),
            "git fast-import: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// A lightweight tag `name` on `commit`.
    pub fn tag(&self, name: &str, commit: &str) {
        git_in(&self.path, &["tag", name, commit]);
    }

    /// An annotated tag `name` on `commit`, as release tooling makes them.
    pub fn annotated_tag(&self, name: &str, commit: &str) {
        git_in(
            &self.path,
            &[
                "-c",
                "user.name=Test",
                "-c",
                "user.email=test@example.com",
                "tag",
                "-a",
                "-m",
                name,
                name,
                commit,
            ],
        );
    }

    /// Points branch `name` at `commit`.
    pub fn branch(&self, name: &str, commit: &str) {
        git_in(&self.path, &["branch", "--force", name, commit]);
    }

    /// Makes `branch` what a clone checks out by default.
    pub fn set_head(&self, branch: &str) {
        git_in(
            &self.path,
            &["symbolic-ref", "HEAD", &format!("refs/heads/{branch}")],
        );
    }

    /// The commit id `rev` names.
    pub fn rev_parse(&self, rev: &str) -> String {
        self.try_rev_parse(rev)
            .unwrap_or_else(|| panic!("{rev} names no commit in {}", self.path.display()))
    }

    fn try_rev_parse(&self, rev: &str) -> Option<String> {
        let output = plain_git(&self.path)
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ])
            .output()
            .expect("run git rev-parse");
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// How many objects the repository holds: what a full clone receives.
    pub fn object_count(&self) -> usize {
        let listed = git_in(&self.path, &["rev-list", "--all", "--objects"]);
        listed.lines().count()
    }

    /// Sets `key` to `value` in the repository's own configuration.
    pub fn config(&self, key: &str, value: &str) {
        git_in(&self.path, &["config", key, value]);
    }
}

/// One change of a commit written by [`GitRepo::commit_changes`].
pub enum FileChange<'a> {
    /// A file with `mode` `100644` or `100755`.
    Write {
        path: &'a str,
        data: &'a [u8],
        mode: &'a str,
    },
    Symlink {
        path: &'a str,
        target: &'a str,
    },
    /// A submodule link (a gitlink) to `commit`; `.gitmodules` is written
    /// as an ordinary file.
    Submodule {
        path: &'a str,
        commit: &'a str,
    },
    Delete {
        path: &'a str,
    },
}

/// A file's content at a commit: a few hundred bytes of HCL that differ
/// from commit to commit, so each version is an object of its own.
fn content(index: usize, revision: usize) -> Vec<u8> {
    let mut text = format!("# file {index}, revision {revision}\n");
    for line in 0..8 {
        text.push_str(&format!(
            "variable \"v{index}_{line}\" {{\n  default = \"{revision}-{line}\"\n}}\n"
        ));
    }
    text.into_bytes()
}
