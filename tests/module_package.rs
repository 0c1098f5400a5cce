//! One remote module package fetched into a directory
//! (`tfinstall::module_package`), against real servers: git repositories
//! served by `git http-backend` behind the test HTTPS server, and real
//! archives served by it. git is the real `git` on PATH, run with a home
//! directory of the test's own.

mod support;

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use support::*;
use tfinstall::fetch::DownloadSettings;
use tfinstall::module_package::{PackageAddr, PackageError, PackageFetcher, PackageIdentity};

/// A test server with repositories on it, a home directory for git, and a
/// fetcher that trusts the server's CA.
struct World {
    ca: TestCa,
    server: TestServer,
    git: GitServer,
    home: tempfile::TempDir,
    out: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
}

impl World {
    fn new() -> World {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let git = GitServer::start(&server);
        World {
            ca,
            server,
            git,
            home: tempfile::tempdir().unwrap(),
            out: tempfile::tempdir().unwrap(),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        }
    }

    /// The environment git gets: the test's home (its `.gitconfig`), no
    /// system configuration, the test CA.
    fn git_env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("HOME".into(), self.home.path().into()),
            (
                "XDG_CONFIG_HOME".into(),
                self.home.path().join(".config").into(),
            ),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_SSL_CAINFO".into(), self.ca.ca_pem_path().into()),
        ]
    }

    fn fetcher(&self, netrc: Option<tfinstall::cliconfig::netrc::Netrc>) -> PackageFetcher {
        let certificate = reqwest::Certificate::from_pem(self.ca.ca_pem().as_bytes()).unwrap();
        let client = reqwest::Client::builder()
            .tls_certs_only([certificate])
            .build()
            .unwrap();
        let settings = DownloadSettings {
            retries: 0,
            ..DownloadSettings::default()
        };
        PackageFetcher::new(client, settings, netrc.map(Arc::new)).with_git_env(self.git_env())
    }

    /// Fetches `address` into a new directory named `name`.
    fn fetch(&self, address: &str, name: &str) -> (PathBuf, Result<PackageIdentity, PackageError>) {
        self.fetch_with(&self.fetcher(None), address, name)
    }

    fn fetch_with(
        &self,
        fetcher: &PackageFetcher,
        address: &str,
        name: &str,
    ) -> (PathBuf, Result<PackageIdentity, PackageError>) {
        let addr = PackageAddr::parse(address).unwrap_or_else(|err| panic!("{address}: {err}"));
        let dest = self.out.path().join(name);
        let result = self
            .runtime
            .block_on(fetcher.fetch(&addr, &dest))
            .map(|fetched| fetched.identity);
        (dest, result)
    }

    fn write_home(&self, name: &str, text: &str) -> PathBuf {
        let path = self.home.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Nothing but the named entries in the output directory: a failed
    /// fetch leaves neither its destination nor its staging behind.
    fn assert_out_holds(&self, names: &[&str]) {
        let mut found: Vec<String> = std::fs::read_dir(self.out.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        found.sort();
        assert_eq!(found, names);
    }
}

/// Every file below `dir` (links as `-> target`), with its content.
fn tree(dir: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let name = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.push((name, format!("-> {}", target.display())));
            } else if kind.is_dir() {
                walk(root, &path, out);
            } else {
                out.push((name, std::fs::read_to_string(&path).unwrap_or_default()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn git_identity(result: Result<PackageIdentity, PackageError>) -> (String, String) {
    match result {
        Ok(PackageIdentity::Git { url, commit }) => (url, commit),
        other => panic!("{other:?}"),
    }
}

/// The bytes a full `git clone` of `repo` costs the server.
fn full_clone_bytes(world: &World, url: &str) -> u64 {
    let scratch = tempfile::tempdir().unwrap();
    let before = world.server.bytes_served();
    let output = std::process::Command::new("git")
        .args(["clone", "--quiet", "--bare", url, "full.git"])
        .current_dir(scratch.path())
        .envs(world.git_env())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    world.server.bytes_served() - before
}

#[test]
fn a_tag_a_branch_and_a_commit_are_fetched_without_their_history() {
    let world = World::new();
    let repo = world.git.create("vpc");
    let tagged = repo.history("main", 150, 20);
    repo.annotated_tag("v1.0.0", &tagged);
    let middle = repo.commit("main", "middle", &[("middle.tf", b"# middle\n")]);
    let head = repo.history("main", 150, 20);
    repo.branch("feature", &middle);
    let full = full_clone_bytes(&world, repo.url());

    for (index, (reference, expected)) in [
        ("?ref=v1.0.0", &tagged),
        ("?ref=feature", &middle),
        (&format!("?ref={middle}")[..], &middle),
        ("", &head),
        ("?ref=v1.0.0&depth=3", &tagged),
    ]
    .into_iter()
    .enumerate()
    {
        let address = format!("git::{}{reference}", repo.url());
        let before = world.server.bytes_served();
        let (dest, result) = world.fetch(&address, &format!("m{index}"));
        let served = world.server.bytes_served() - before;
        let (url, commit) = git_identity(result);
        assert_eq!(url, repo.url());
        assert_eq!(&commit, expected, "{address}");
        // The tree is the commit's: 20 files, the middle one only after it.
        let files = tree(&dest);
        assert_eq!(
            files.iter().any(|(name, _)| name == "middle.tf"),
            expected != &tagged,
            "{address}"
        );
        assert!(!dest.join(".git").exists(), "{address}");
        // One commit's objects, not the 300 commits' history.
        assert!(
            served * 8 < full,
            "{address}: {served} bytes served, a full clone is {full}"
        );
    }
    world.assert_out_holds(&["m0", "m1", "m2", "m3", "m4"]);
}

#[test]
fn a_short_commit_id_is_found_among_the_branches_and_tags() {
    let world = World::new();
    let repo = world.git.create("short");
    let first = repo.commit("main", "one", &[("main.tf", b"# one\n")]);
    repo.commit("main", "two", &[("main.tf", b"# two\n")]);
    let (dest, result) = world.fetch(&format!("git::{}?ref={}", repo.url(), &first[..10]), "m");
    assert_eq!(git_identity(result).1, first);
    assert_eq!(tree(&dest), [("main.tf".to_owned(), "# one\n".to_owned())]);
}

#[test]
fn submodules_are_fetched_shallow_at_the_commit_the_parent_names() {
    let world = World::new();
    let child = world.git.create("child");
    let pinned = child.commit("main", "pinned", &[("child.tf", b"# pinned\n")]);
    child.commit("main", "later", &[("child.tf", b"# later\n")]);
    let parent = world.git.create("parent");
    let gitmodules = "[submodule \"child\"]\n\tpath = child\n\turl = ../child.git\n";
    parent.commit_changes(
        "main",
        "with a submodule",
        &[
            FileChange::Write {
                path: "main.tf",
                data: b"module \"child\" { source = \"./child\" }\n",
                mode: "100644",
            },
            FileChange::Write {
                path: ".gitmodules",
                data: gitmodules.as_bytes(),
                mode: "100644",
            },
            FileChange::Submodule {
                path: "child",
                commit: &pinned,
            },
        ],
    );
    let (dest, result) = world.fetch(&format!("git::{}", parent.url()), "m");
    git_identity(result);
    let files = tree(&dest);
    assert!(
        files.contains(&("child/child.tf".to_owned(), "# pinned\n".to_owned())),
        "{files:?}"
    );
    assert!(!dest.join("child/.git").exists());
}

#[test]
fn hooks_of_the_users_configuration_and_templates_do_not_run() {
    let world = World::new();
    let repo = world.git.create("hooked");
    repo.commit("main", "one", &[("main.tf", b"# one\n")]);
    let marker = world.home.path().join("hook-ran");
    let hook = format!("#!/bin/sh\ntouch '{}'\n", marker.display());
    for dir in ["hooks", "template/hooks"] {
        for name in ["post-checkout", "post-merge", "reference-transaction"] {
            let path = world.write_home(&format!("{dir}/{name}"), &hook);
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    world.write_home(
        ".gitconfig",
        &format!(
            "[core]\n\thooksPath = {home}/hooks\n[init]\n\ttemplateDir = {home}/template\n",
            home = world.home.path().display()
        ),
    );
    let (dest, result) = world.fetch(&format!("git::{}", repo.url()), "m");
    git_identity(result);
    assert!(dest.join("main.tf").exists());
    assert!(!marker.exists(), "a hook ran during the fetch");

    // The same home makes a plain clone run them: the hooks are real.
    let output = std::process::Command::new("git")
        .args(["clone", "--quiet", repo.url(), "clone"])
        .current_dir(world.out.path())
        .envs(world.git_env())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        marker.exists(),
        "the control clone should have run the hook"
    );
}

#[test]
fn submodules_over_ext_or_local_paths_are_refused_and_nothing_is_left() {
    let world = World::new();
    let local = world.git.create("local");
    local.commit("main", "one", &[("local.tf", b"# local\n")]);
    let pinned = local.rev_parse("main");
    let marker = world.home.path().join("ext-ran");
    for (name, url) in [
        ("ext", format!("ext::sh -c touch% {}", marker.display())),
        ("file", format!("file://{}", local.path().display())),
    ] {
        let parent = world.git.create(&format!("parent-{name}"));
        let gitmodules = format!("[submodule \"sub\"]\n\tpath = sub\n\turl = {url}\n");
        parent.commit_changes(
            "main",
            "with a submodule",
            &[
                FileChange::Write {
                    path: ".gitmodules",
                    data: gitmodules.as_bytes(),
                    mode: "100644",
                },
                FileChange::Submodule {
                    path: "sub",
                    commit: &pinned,
                },
            ],
        );
        let (dest, result) = world.fetch(&format!("git::{}", parent.url()), name);
        let err = result.expect_err(name);
        assert!(matches!(err, PackageError::Git { .. }), "{name}: {err}");
        assert!(
            err.to_string().contains("transport"),
            "{name}: git's refusal should say why: {err}"
        );
        assert!(!dest.exists());
        assert!(!marker.exists(), "the ext:: command ran");
    }
    world.assert_out_holds(&[]);
}

#[test]
fn an_insteadof_rule_in_the_users_gitconfig_is_honoured() {
    let world = World::new();
    let repo = world.git.create("aliased");
    let commit = repo.commit("main", "one", &[("main.tf", b"# one\n")]);
    world.write_home(
        ".gitconfig",
        &format!(
            "[url \"{}\"]\n\tinsteadOf = https://git.example.invalid/\n",
            world.server.url_for("/git/")
        ),
    );
    let (dest, result) = world.fetch("git::https://git.example.invalid/aliased.git", "m");
    assert_eq!(git_identity(result).1, commit);
    assert!(dest.join("main.tf").exists());
}

#[test]
fn a_missing_ref_says_what_git_said_and_leaves_nothing() {
    let world = World::new();
    let repo = world.git.create("plain");
    repo.commit("main", "one", &[("main.tf", b"# one\n")]);
    let (dest, result) = world.fetch(&format!("git::{}?ref=v9.9.9", repo.url()), "m");
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("v9.9.9") && message.contains(repo.url()),
        "{message}"
    );
    assert!(!dest.exists());
    world.assert_out_holds(&[]);
}

/// A tar of `(name, content)` files, written by the tar crate.
fn tar_of(files: &[(&str, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, name, content.as_bytes())
            .unwrap();
    }
    builder.into_inner().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

const MODULE_FILES: [(&str, &str); 2] = [
    ("main.tf", "variable \"a\" {}\n"),
    ("modules/sub/main.tf", "# sub\n"),
];

fn expected_tree() -> Vec<(String, String)> {
    MODULE_FILES
        .iter()
        .map(|(name, content)| (name.to_string(), content.to_string()))
        .collect()
}

#[test]
fn archives_of_every_format_are_unpacked() {
    let world = World::new();
    let tar = tar_of(&MODULE_FILES);
    let bz2 = {
        let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
        encoder.write_all(&tar).unwrap();
        encoder.finish().unwrap()
    };
    let xz = {
        let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 6);
        encoder.write_all(&tar).unwrap();
        encoder.finish().unwrap()
    };
    let zip = build_zip(
        &MODULE_FILES
            .iter()
            .map(|(name, content)| ZipEntry::file(*name, content.as_bytes()))
            .collect::<Vec<_>>(),
        Compression::Deflated,
    );
    let served: [(&str, &[u8]); 6] = [
        ("/m.zip", &zip),
        ("/m.tar.gz", &gzip(&tar)),
        ("/m.tgz", &gzip(&tar)),
        ("/m.tar.bz2", &bz2),
        ("/m.tar.xz", &xz),
        ("/download", &gzip(&tar)),
    ];
    for (path, body) in served {
        world.server.route(
            path,
            Response::bytes("application/octet-stream", body.to_vec()),
        );
    }
    for (index, address) in [
        world.server.url_for("/m.zip"),
        world.server.url_for("/m.tar.gz"),
        world.server.url_for("/m.tgz"),
        world.server.url_for("/m.tar.bz2"),
        world.server.url_for("/m.tar.xz"),
        world.server.url_for("/download?archive=tar.gz"),
    ]
    .iter()
    .enumerate()
    {
        let (dest, result) = world.fetch(address, &format!("m{index}"));
        match result {
            Ok(PackageIdentity::Archive { url, sha256 }) => {
                assert_eq!(&url, address);
                assert_eq!(sha256.len(), 64);
            }
            other => panic!("{address}: {other:?}"),
        }
        assert_eq!(tree(&dest), expected_tree(), "{address}");
    }
}

#[test]
fn hostile_archives_are_refused_with_nothing_written() {
    let world = World::new();
    let outside = world.out.path().join("escaped.tf");
    // A tar whose entry climbs out, written by hand: the tar crate's
    // builder refuses such names itself.
    let traversal = {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(3);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.as_old_mut().name[..16].copy_from_slice(b"../escaped.tf\0\0\0");
        header.set_cksum();
        builder.append(&header, &b"abc"[..]).unwrap();
        gzip(&builder.into_inner().unwrap())
    };
    let absolute_link = {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        header.set_mode(0o777);
        builder
            .append_link(&mut header, "passwd.tf", "/etc/passwd")
            .unwrap();
        gzip(&builder.into_inner().unwrap())
    };
    let zip_traversal = RawZip::new()
        .file("main.tf", b"# ok\n", 0o644)
        .file("../escaped.tf", b"abc", 0o644)
        .build();
    let zip_link = RawZip::new().symlink("passwd.tf", "/etc/passwd").build();
    for (path, body) in [
        ("/traversal.tar.gz", traversal),
        ("/link.tar.gz", absolute_link),
        ("/traversal.zip", zip_traversal),
        ("/link.zip", zip_link),
    ] {
        world
            .server
            .route(path, Response::bytes("application/octet-stream", body));
        let (dest, result) = world.fetch(&world.server.url_for(path), "m");
        let err = result.expect_err(path);
        assert!(matches!(err, PackageError::Extract { .. }), "{path}: {err}");
        assert!(err.to_string().contains(path), "{path}: {err}");
        assert!(
            !err.to_string().contains("provider"),
            "{path}: a module's error should not speak of providers: {err}"
        );
        assert!(!dest.exists());
        assert!(!outside.exists());
        world.assert_out_holds(&[]);
    }
}

#[test]
fn x_terraform_get_is_followed_to_an_archive_and_to_a_git_subdirectory() {
    let world = World::new();
    world.server.route(
        "/archives/m.tar.gz",
        Response::bytes("application/octet-stream", gzip(&tar_of(&MODULE_FILES))),
    );
    world.server.route(
        "/modules/archived",
        Response::new(204).header("x-terraform-get", "../archives/m.tar.gz"),
    );
    let (dest, result) = world.fetch(&world.server.url_for("/modules/archived"), "archived");
    assert!(
        matches!(result, Ok(PackageIdentity::Archive { .. })),
        "{result:?}"
    );
    assert_eq!(tree(&dest), expected_tree());
    let asked = world.server.requests_to("/modules/archived");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].query.as_deref(), Some("terraform-get=1"));

    let repo = world.git.create("monorepo");
    let commit = repo.commit(
        "main",
        "two modules",
        &[
            ("README.md", b"# all\n"),
            ("modules/net/main.tf", b"# net\n"),
        ],
    );
    repo.tag("v2.0.0", &commit);
    world.server.route(
        "/modules/git",
        Response::new(200)
            .header("content-type", "text/html")
            .body(format!(
                "<html><head><meta name=\"terraform-get\" content=\"git::{}//modules/net?ref=v2.0.0\"></head></html>",
                repo.url()
            )),
    );
    let (dest, result) = world.fetch(&world.server.url_for("/modules/git"), "git");
    let (url, found) = git_identity(result);
    assert_eq!(found, commit);
    assert_eq!(url, format!("{}//modules/net", repo.url()));
    assert_eq!(tree(&dest), [("main.tf".to_owned(), "# net\n".to_owned())]);

    // Answers that lead round in circles end.
    world.server.route(
        "/modules/loop",
        Response::new(204).header("x-terraform-get", "/modules/loop"),
    );
    let (_, result) = world.fetch(&world.server.url_for("/modules/loop"), "loop");
    assert!(
        matches!(result, Err(PackageError::TooManyHops { .. })),
        "{result:?}"
    );
    world.server.route("/modules/none", Response::new(204));
    let (_, result) = world.fetch(&world.server.url_for("/modules/none"), "none");
    assert!(
        matches!(result, Err(PackageError::NoSourceUrl { .. })),
        "{result:?}"
    );
    world.assert_out_holds(&["archived", "git"]);
}

#[test]
fn netrc_credentials_go_with_the_archive_and_the_question() {
    let world = World::new();
    world.server.route(
        "/private/m.tar.gz",
        Response::bytes("application/octet-stream", gzip(&tar_of(&MODULE_FILES))),
    );
    world.server.route(
        "/private/module",
        Response::new(204).header("x-terraform-get", "./m.tar.gz"),
    );
    world
        .server
        .require_basic("/private/m.tar.gz", "alice", "s3cret");
    world
        .server
        .require_basic("/private/module", "alice", "s3cret");
    let netrc_path = world.home.path().join(".netrc");
    let netrc = tfinstall::cliconfig::netrc::Netrc::parse(
        &netrc_path,
        "machine 127.0.0.1 login alice password s3cret\n",
    )
    .unwrap();
    let address = world.server.url_for("/private/module");
    let (_, result) = world.fetch(&address, "without");
    let message = result.unwrap_err().to_string();
    assert!(message.contains("401"), "{message}");

    let (dest, result) = world.fetch_with(&world.fetcher(Some(netrc)), &address, "with");
    assert!(
        matches!(result, Ok(PackageIdentity::Archive { .. })),
        "{result:?}"
    );
    assert_eq!(tree(&dest), expected_tree());
    world.assert_out_holds(&["with"]);
}

#[test]
fn a_git_ssh_source_installs_through_sshd_with_the_key_and_config_of_the_users_home() {
    let world = World::new();
    let repo = world.git.create("over-ssh");
    let commit = repo.commit("main", "one", &[("main.tf", b"# over ssh\n")]);
    repo.tag("v1.0.0", &commit);
    repo.commit("main", "two", &[("main.tf", b"# later\n")]);

    let ssh_dir = world.home.path().join(".ssh");
    std::fs::create_dir_all(&ssh_dir).unwrap();
    let key = ssh_dir.join("id_ed25519");
    let public_key = support::sshd::keygen(&key);
    let sshd = support::sshd::Sshd::start(&public_key);
    std::fs::write(
        ssh_dir.join("known_hosts"),
        format!("modules-ssh {}\n", sshd.host_public_key()),
    )
    .unwrap();
    let config = ssh_dir.join("config");
    std::fs::write(
        &config,
        format!(
            "Host modules-ssh\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  \
             IdentityFile {key}\n  IdentitiesOnly yes\n  HostKeyAlias modules-ssh\n  \
             UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
            port = sshd.port(),
            user = support::sshd::current_user(),
            key = key.display(),
            known = ssh_dir.join("known_hosts").display(),
        ),
    )
    .unwrap();
    // OpenSSH finds ~/.ssh by the password database, not by $HOME, so the
    // test's home is named to it the way users name a key to git:
    // GIT_SSH_COMMAND, which must reach ssh.
    let mut env = world.git_env();
    env.push((
        "GIT_SSH_COMMAND".into(),
        format!("ssh -F {}", config.display()).into(),
    ));
    let fetcher = world.fetcher(None).with_git_env(env);
    let address = format!("git::ssh://modules-ssh{}?ref=v1.0.0", repo.path().display());
    let (dest, result) = world.fetch_with(&fetcher, &address, "ssh");
    let (url, found) = git_identity(result);
    assert_eq!(found, commit);
    assert_eq!(url, format!("ssh://modules-ssh{}", repo.path().display()));
    assert_eq!(
        tree(&dest),
        [("main.tf".to_owned(), "# over ssh\n".to_owned())]
    );

    // And through an insteadOf rule of the home's .gitconfig.
    world.write_home(
        ".gitconfig",
        "[url \"ssh://modules-ssh/\"]\n\tinsteadOf = https://ssh.example.invalid/\n",
    );
    let address = format!(
        "git::https://ssh.example.invalid{}?ref=v1.0.0",
        repo.path().display()
    );
    let (dest, result) = world.fetch_with(&fetcher, &address, "aliased");
    assert_eq!(git_identity(result).1, commit);
    assert!(dest.join("main.tf").exists());
}

#[test]
fn an_oci_module_package_is_fetched_by_tag_and_by_digest() {
    use sha2::Digest as _;
    let world = World::new();
    let token_server = TestServer::https(&world.ca);
    let issuer = support::oci_registry::TokenIssuer::new(&["modules/vpc"]);
    token_server.route(
        "/token",
        Response::json(format!("{{\"token\": \"{}\"}}", issuer.token())),
    );
    let registry = support::oci_registry::OciRegistry::start_with_tokens(
        &world.ca,
        &issuer,
        &token_server.url_for("/token"),
    );
    let zip = build_zip(
        &MODULE_FILES
            .iter()
            .map(|(name, content)| ZipEntry::file(*name, content.as_bytes()))
            .collect::<Vec<_>>(),
        Compression::Deflated,
    );
    let manifest = registry.publish_module(&world.ca, "modules/vpc", "1.0.0", &zip);
    let zip_sha256 = hex::encode(sha2::Sha256::digest(&zip));
    for (name, address) in [
        (
            "tag",
            format!("oci://{}/modules/vpc?tag=1.0.0", registry.host),
        ),
        (
            "digest",
            format!("oci://{}/modules/vpc?digest={manifest}", registry.host),
        ),
    ] {
        let (dest, result) = world.fetch(&address, name);
        match result {
            Ok(PackageIdentity::Archive { url, sha256 }) => {
                assert_eq!(url, address);
                assert_eq!(sha256, zip_sha256);
            }
            other => panic!("{address}: {other:?}"),
        }
        assert_eq!(tree(&dest), expected_tree(), "{address}");
    }
    let (dest, result) = world.fetch(
        &format!("oci://{}/modules/vpc?tag=2.0.0", registry.host),
        "missing",
    );
    let message = result.unwrap_err().to_string();
    assert!(message.contains("2.0.0"), "{message}");
    assert!(!dest.exists());
}
