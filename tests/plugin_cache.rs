//! The plugin cache end to end (issue 5): the built binary against a signed
//! registry over HTTPS (reached through a CLI-configuration `host` block),
//! with downloads counted in the server's request log.
//!
//! Covered: installs from the cache with zero downloads and hard links; lock
//! entries from a cache hit byte-identical to a download's; one download per
//! package however many processes share an empty cache; SIGKILL during a
//! download; `cache warm` then `init` with no server; a cache on another
//! filesystem; `-link-mode`; Terraform 1.4's lock-file rule for entries
//! without provenance; damaged entries; the wait notice.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use support::*;

const HOST: &str = "registry.test";
const NS: &str = "acme";
const VERSION: &str = "1.0.0";
const LOCK: &str = ".terraform.lock.hcl";
/// Published besides the current platform, so signed `SHA256SUMS` lists
/// hashes of packages that are not installed.
const OTHER_PLATFORMS: [&str; 2] = ["darwin_arm64", "windows_amd64"];
/// No run of the binary may take longer; a hang fails instead of blocking.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// A registry of `registry.test/acme/TYPE` 1.0.0 for three platforms, the
/// temp dir holding work dirs, HOMEs and caches, and the CLI configuration.
struct World {
    ca: TestCa,
    server: Option<TestServer>,
    tmp: tempfile::TempDir,
    types: Vec<String>,
    tree: PublishedTree,
}

impl World {
    fn new(types: &[&str]) -> Self {
        Self::with_payloads(types, |_| Payload::Small)
    }

    fn with_payloads(types: &[&str], payload: impl Fn(&str) -> Payload) -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        server.serve_dir(&site);
        let mut platforms = vec![current_platform()];
        platforms.extend(OTHER_PLATFORMS.iter().map(|p| p.to_string()));
        let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
        let registry = types
            .iter()
            .fold(Registry::new(&PgpKey::generate()), |r, t| {
                r.provider(
                    ProviderSpec::new(NS, t, VERSION)
                        .hostname(HOST)
                        .platforms(&platforms)
                        .payload(payload(t)),
                )
            });
        let tree = registry.write(&site, &server.url());
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        World {
            ca,
            server: Some(server),
            tmp,
            types: types.iter().map(|t| t.to_string()).collect(),
            tree,
        }
    }

    fn server(&self) -> &TestServer {
        self.server.as_ref().expect("the server is running")
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.tmp.path().join(relative)
    }

    /// A new, empty cache directory `name` in the world's temp dir.
    fn new_cache(&self, name: &str) -> PathBuf {
        let dir = self.path(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A CLI configuration sending `registry.test` to the server, with
    /// `plugin_cache_dir` when `cache` is given, plus `extra`.
    fn config(&self, name: &str, cache: Option<&Path>, extra: &str) -> PathBuf {
        let providers = match &self.server {
            Some(server) => server.url_for("/v1/providers/"),
            // Never reached: a run that needs the registry must fail.
            None => "https://127.0.0.1:9/v1/providers/".to_owned(),
        };
        let mut text = format!(
            "host \"{HOST}\" {{\n  services = {{\n    \"providers.v1\" = \"{providers}\"\n  }}\n}}\n{extra}\n"
        );
        if let Some(cache) = cache {
            text.push_str(&format!("plugin_cache_dir = \"{}\"\n", cache.display()));
        }
        let path = self.path(&format!("{name}.tfrc"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A new work dir requiring every provider of the world.
    fn workdir(&self, name: &str) -> PathBuf {
        let types: Vec<&str> = self.types.iter().map(String::as_str).collect();
        self.workdir_for(name, &types)
    }

    fn workdir_for(&self, name: &str, types: &[&str]) -> PathBuf {
        let dir = self.path("work").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let providers: String = types
            .iter()
            .map(|t| {
                format!("    {t} = {{\n      source  = \"{HOST}/{NS}/{t}\"\n      version = \"~> 1.0\"\n    }}\n")
            })
            .collect();
        std::fs::write(
            dir.join("main.tf"),
            format!("terraform {{\n  required_providers {{\n{providers}  }}\n}}\n"),
        )
        .unwrap();
        dir
    }

    /// `tfinstall ARGS…` in `dir` with the CLI configuration `config`.
    fn command(&self, dir: &Path, config: &Path, args: &[&str]) -> assert_cmd::Command {
        let mut command = tfinstall_command(&self.path("home"));
        self.ca.configure(&mut command);
        command
            .current_dir(dir)
            .env("TF_CLI_CONFIG_FILE", config)
            .args(args)
            .timeout(RUN_TIMEOUT);
        command
    }

    fn init(&self, dir: &Path, config: &Path, args: &[&str]) -> std::process::Output {
        let mut all = vec!["init", "-no-color"];
        all.extend(args);
        self.command(dir, config, &all).output().unwrap()
    }

    /// Runs `init`, panicking with its output on failure; returns stdout.
    fn init_ok(&self, dir: &Path, config: &Path, args: &[&str]) -> String {
        succeeded("tfinstall init", &self.init(dir, config, args))
    }

    fn archive(&self, type_name: &str, platform: &str) -> String {
        self.tree
            .package(type_name, VERSION, platform)
            .url_path
            .clone()
            .unwrap()
    }

    /// Paths of the package archives requested since the log was cleared.
    fn archive_downloads(&self) -> Vec<String> {
        self.server()
            .requests()
            .into_iter()
            .map(|r| r.path)
            .filter(|p| p.ends_with(".zip"))
            .collect()
    }

    fn h1(&self, type_name: &str) -> String {
        self.tree
            .package(type_name, VERSION, &current_platform())
            .h1
            .clone()
    }

    /// A `std::process::Command` for what [`World::command`] would run, to
    /// spawn and kill; output goes to `log` (stdout and stderr).
    fn spawn(&self, dir: &Path, config: &Path, args: &[&str], log: &Path) -> Child {
        let mut command = support::spawnable(&self.command(dir, config, args));
        command.current_dir(dir);
        let out = std::fs::File::create(log).unwrap();
        command
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn tfinstall")
    }
}

/// `HOST/NS/TYPE/VERSION/OS_ARCH` below `root`.
fn package_path(root: &Path, type_name: &str, platform: &str) -> PathBuf {
    root.join(HOST)
        .join(NS)
        .join(type_name)
        .join(VERSION)
        .join(platform)
}

/// The provider executable of `type_name` for this platform below `root`
/// (a cache, or a work dir's `.terraform/plugins`).
fn executable(root: &Path, type_name: &str) -> PathBuf {
    package_path(root, type_name, &current_platform())
        .join(format!("terraform-provider-{type_name}_v{VERSION}"))
}

fn installed(dir: &Path, type_name: &str) -> PathBuf {
    executable(&dir.join(".terraform/plugins"), type_name)
}

fn inode(path: &Path) -> (u64, u64) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (meta.dev(), meta.ino())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn succeeded(what: &str, output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Every path below `root` (relative) with its type, mode and content.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(dir: &Path, rel: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = rel.join(entry.file_name());
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let node = if meta.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                walk(&path, &rel, out);
                format!("dir {mode:o}")
            } else {
                format!(
                    "file {mode:o} {}",
                    sha256_hex(&std::fs::read(&path).unwrap())
                )
            };
            out.insert(rel, node);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// The lines of `output` that report where each package came from.
fn lines_with<'a>(output: &'a str, prefix: &str) -> Vec<&'a str> {
    output.lines().filter(|l| l.starts_with(prefix)).collect()
}

fn using_cache_line(type_name: &str) -> String {
    format!("- Using {HOST}/{NS}/{type_name} v{VERSION} from the shared cache directory")
}

/// A second work dir installs from the cache: no archive is downloaded,
/// and the installed files are the cache's files (same inode), as are the
/// first work dir's.
#[test]
fn a_second_workdir_installs_from_the_cache_through_hard_links() {
    let world = World::new(&["alpha", "beta"]);
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");

    let first = world.workdir("first");
    let output = world.init_ok(&first, &config, &[]);
    assert_eq!(lines_with(&output, "- Installed ").len(), 2, "{output}");
    let mut downloads = world.archive_downloads();
    downloads.sort();
    assert_eq!(
        downloads,
        vec![
            world.archive("alpha", &current_platform()),
            world.archive("beta", &current_platform())
        ]
    );

    world.server().clear_log();
    let second = world.workdir("second");
    let output = world.init_ok(&second, &config, &[]);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    for t in ["alpha", "beta"] {
        assert!(output.contains(&using_cache_line(t)), "{output}");
        let cached = executable(&cache, t);
        assert_eq!(inode(&installed(&second, t)), inode(&cached), "{t}");
        assert_eq!(inode(&installed(&first, t)), inode(&cached), "{t}");
        // Read-only, so a write through a working directory's link fails
        // instead of changing every project's copy.
        assert_eq!(mode(&cached), 0o555, "{t}");
    }
    assert_eq!(read(&second.join(LOCK)), read(&first.join(LOCK)));
    let verify = world
        .command(&first, &config, &["cache", "verify"])
        .output()
        .unwrap();
    let stdout = succeeded("cache verify", &verify);
    assert!(
        stdout.contains("Checked 2 cache entries") && stdout.contains("all match"),
        "{stdout}"
    );
}

/// Another work dir linking the same cache entries moves their change time;
/// a no-op in the first one still trusts its memo of installed hashes and
/// reads no package bytes, yet new bytes written through any link are
/// caught and the package is put right.
#[test]
fn a_no_op_after_another_workdir_linked_the_same_entries_trusts_its_memo() {
    let world = World::new(&["alpha"]);
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    let first = world.workdir("first");
    world.init_ok(&first, &config, &[]);
    // Stamps taken within a clock tick of the files' creation are not
    // trusted; a later run takes trustworthy ones.
    std::thread::sleep(Duration::from_millis(50));
    world.init_ok(&first, &config, &[]);
    let second = world.workdir("second");
    world.init_ok(&second, &config, &[]);
    assert_eq!(
        inode(&installed(&second, "alpha")),
        inode(&installed(&first, "alpha"))
    );

    // A remembered hash that matches nothing: a run that trusts the memo
    // believes the package changed and installs it again from the cache; a
    // run that re-hashed the files would find nothing to do.
    let memo = first.join(".terraform/.tfinstall-hashes.json");
    edit_json(&memo, |doc| {
        for entry in doc.as_object_mut().unwrap().values_mut() {
            entry["h1"] = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into();
        }
    });
    let output = world.init_ok(&first, &config, &[]);
    assert!(output.contains(&using_cache_line("alpha")), "{output}");

    // New bytes of the same size through the second work dir's link, with
    // the mode put back: the shared file changed, so the first work dir
    // notices and installs a good copy (the damaged cache entry too).
    std::thread::sleep(Duration::from_millis(50));
    world.init_ok(&first, &config, &[]);
    let original = std::fs::read(installed(&first, "alpha")).unwrap();
    let link = installed(&second, "alpha");
    std::fs::set_permissions(&link, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tampered: Vec<u8> = original.iter().map(|b| b ^ 1).collect();
    std::fs::write(&link, &tampered).unwrap();
    std::fs::set_permissions(&link, std::fs::Permissions::from_mode(0o555)).unwrap();
    let output = world.init_ok(&first, &config, &[]);
    assert!(
        !output.contains("Using previously-installed"),
        "the changed file was trusted: {output}"
    );
    assert_eq!(std::fs::read(installed(&first, "alpha")).unwrap(), original);
}

/// A cache hit for a provider the lock file does not list yet writes the
/// same lock entry, byte for byte, as a download: the signed `zh:` list of
/// every platform plus the `h1:`, from the entry's provenance.
#[test]
fn a_cache_hit_for_a_provider_new_to_the_lock_file_writes_the_download_entry() {
    let world = World::new(&["alpha", "beta"]);
    let no_cache = world.config("plain", None, "");
    let downloaded = world.workdir("downloaded");
    world.init_ok(&downloaded, &no_cache, &[]);
    let expected = read(&downloaded.join(LOCK));
    for t in ["alpha", "beta"] {
        assert!(expected.contains(&world.h1(t)), "{expected}");
    }
    assert_eq!(expected.matches("\"zh:").count(), 6, "{expected}");

    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    world.init_ok(&world.workdir("filler"), &config, &[]);

    // No lock file at all.
    world.server().clear_log();
    let fresh = world.workdir("fresh");
    let output = world.init_ok(&fresh, &config, &[]);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    assert!(!output.contains("Incomplete lock file"), "{output}");
    assert_eq!(read(&fresh.join(LOCK)), expected);

    // A lock file listing alpha only: beta is new to it.
    let alpha_only = world.workdir_for("alpha-only", &["alpha"]);
    world.init_ok(&alpha_only, &no_cache, &[]);
    let partial = world.workdir("partial");
    std::fs::copy(alpha_only.join(LOCK), partial.join(LOCK)).unwrap();
    assert!(!read(&partial.join(LOCK)).contains("acme/beta"));
    world.server().clear_log();
    let output = world.init_ok(&partial, &config, &[]);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    assert!(output.contains(&using_cache_line("beta")), "{output}");
    assert_eq!(read(&partial.join(LOCK)), expected);
}

/// Sixteen `init`s started at once on one empty cache, ten providers each:
/// all succeed, the server serves each archive exactly once, and all end
/// with the same lock file and the cache's files.
#[test]
fn sixteen_concurrent_inits_download_each_package_once() {
    const PROCESSES: usize = 16;
    let types: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
    let types: Vec<&str> = types.iter().map(String::as_str).collect();
    let world = World::new(&types);
    // Slow archives keep the first download going while the others arrive.
    for t in &types {
        world.server().fault(
            &world.archive(t, &current_platform()),
            Fault::Latency(Duration::from_millis(300)),
        );
    }
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    let dirs: Vec<PathBuf> = (0..PROCESSES)
        .map(|i| world.workdir(&format!("w{i}")))
        .collect();
    let logs: Vec<PathBuf> = (0..PROCESSES)
        .map(|i| world.path(&format!("w{i}.log")))
        .collect();
    let mut children: Vec<Child> = dirs
        .iter()
        .zip(&logs)
        .map(|(dir, log)| world.spawn(dir, &config, &["init", "-no-color"], log))
        .collect();
    let deadline = Instant::now() + RUN_TIMEOUT;
    let mut statuses = [None; PROCESSES];
    while statuses.iter().any(Option::is_none) {
        for (child, status) in children.iter_mut().zip(statuses.iter_mut()) {
            if status.is_none() {
                *status = child.try_wait().unwrap();
            }
        }
        if Instant::now() > deadline {
            for child in &mut children {
                let _ = child.kill();
                let _ = child.wait();
            }
            panic!("the concurrent inits did not finish in {RUN_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (i, status) in statuses.iter().enumerate() {
        assert!(
            status.unwrap().success(),
            "init {i} failed:\n{}",
            read(&logs[i])
        );
    }
    for t in &types {
        assert_eq!(
            world.server().count(&world.archive(t, &current_platform())),
            1,
            "{t} was not downloaded exactly once"
        );
    }
    let lock = read(&dirs[0].join(LOCK));
    for dir in &dirs {
        assert_eq!(read(&dir.join(LOCK)), lock, "{}", dir.display());
        for t in &types {
            assert_eq!(inode(&installed(dir, t)), inode(&executable(&cache, t)));
        }
    }
    let stdout = succeeded(
        "cache verify",
        &world
            .command(&dirs[0], &config, &["cache", "verify"])
            .output()
            .unwrap(),
    );
    assert!(stdout.contains("Checked 10 cache entries"), "{stdout}");
}

/// Paths below the cache a killed run may leave: its temp and staging
/// areas, the lock files and the directories holding them.
fn only_leftovers(cache: &Path) -> Vec<PathBuf> {
    snapshot(cache)
        .into_iter()
        .filter(|(path, node)| {
            let name = path.file_name().unwrap().to_string_lossy();
            let first = path.components().next().unwrap().as_os_str();
            let allowed = first == ".tmp"
                || first == ".tfinstall-staging"
                || path == Path::new("CACHEDIR.TAG")
                || name.ends_with(".lock")
                || node.starts_with("dir");
            !allowed
        })
        .map(|(path, _)| path)
        .collect()
}

/// SIGKILL in the middle of a download into the cache (by `init` and by
/// `cache warm`) leaves no entry, partial or whole, and nothing the next
/// run trips over: it succeeds, fills the entry, and cleans up.
#[test]
fn a_run_killed_mid_download_leaves_no_partial_entry() {
    let world = World::with_payloads(&["big"], |_| Payload::Random(1 << 20));
    let archive = world.archive("big", &current_platform());
    for command in ["init", "warm"] {
        let cache = world.new_cache(&format!("cache-{command}"));
        let config = world.config(command, Some(&cache), "");
        let dir = world.workdir(command);
        let args: &[&str] = match command {
            "init" => &["init", "-no-color"],
            _ => &["cache", "warm", "-no-color"],
        };
        world.server().clear_log();
        world.server().fault(&archive, Fault::StallAfter(64 * 1024));
        let mut child = world.spawn(&dir, &config, args, &world.path("killed.log"));
        let deadline = Instant::now() + RUN_TIMEOUT;
        while world.server().count(&archive) == 0 {
            assert!(
                child.try_wait().unwrap().is_none(),
                "{command} ended before downloading:\n{}",
                read(&world.path("killed.log"))
            );
            assert!(Instant::now() < deadline, "{command} never downloaded");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Let some of the body arrive, so the kill lands mid-download.
        std::thread::sleep(Duration::from_millis(200));
        child.kill().unwrap();
        child.wait().unwrap();
        world.server().clear_faults();

        let entry = package_path(&cache, "big", &current_platform());
        assert!(!entry.exists(), "{command}: {} exists", entry.display());
        assert_eq!(only_leftovers(&cache), Vec::<PathBuf>::new(), "{command}");
        // Its one work directory, holding whatever it had unpacked so far.
        assert_eq!(
            std::fs::read_dir(cache.join(".tmp")).unwrap().count(),
            1,
            "{command}: the killed run had no work directory"
        );

        let output = world.command(&dir, &config, args).output().unwrap();
        succeeded(&format!("{command} after the kill"), &output);
        assert!(entry.is_dir(), "{command}");
        assert_eq!(
            std::fs::read(executable(&cache, "big")).unwrap(),
            std::fs::read(&world.tree.package("big", VERSION, &current_platform()).path)
                .map(|zip| unzip_single(&zip))
                .unwrap(),
            "{command}"
        );
        // The killed run's work directory (and, for warm, its staging
        // directory) is gone; only the entry and its side files are left.
        let outside_entries: Vec<PathBuf> = snapshot(&cache)
            .into_keys()
            .filter(|p| !p.starts_with(HOST))
            .collect();
        assert_eq!(
            outside_entries,
            [PathBuf::from(".tmp"), PathBuf::from("CACHEDIR.TAG")],
            "{command}"
        );
        succeeded(
            "cache verify",
            &world
                .command(&dir, &config, &["cache", "verify"])
                .output()
                .unwrap(),
        );
    }
}

/// The one file in a package zip.
fn unzip_single(zip: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
    let mut content = Vec::new();
    archive
        .by_index(0)
        .unwrap()
        .read_to_end(&mut content)
        .unwrap();
    content
}

/// `cache warm` for two platforms fills the cache from a committed lock
/// file without creating `.terraform`, says what it added and what was
/// there; then `init` succeeds with no server at all.
#[test]
fn warm_for_two_platforms_then_init_with_no_server() {
    let mut world = World::new(&["alpha", "beta"]);
    let plain = world.config("plain", None, "");
    let locked = world.workdir("locked");
    world.init_ok(&locked, &plain, &[]);
    let lock = read(&locked.join(LOCK));

    // The CI image build: a checkout with its lock file, and a cache named
    // by TF_PLUGIN_CACHE_DIR.
    let checkout = world.workdir("checkout");
    std::fs::write(checkout.join(LOCK), &lock).unwrap();
    let before = snapshot(&checkout);
    // A fresh image has no cache directory yet: warming makes it.
    let cache = world.path("cache/nested");
    let warm = |world: &World| {
        let mut command = world.command(
            &checkout,
            &plain,
            &[
                "cache",
                "warm",
                "-no-color",
                &format!("-platform={}", current_platform()),
                "-platform=darwin_arm64",
            ],
        );
        command.env("TF_PLUGIN_CACHE_DIR", &cache);
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("cannot be opened"), "{stderr}");
        succeeded("cache warm", &output)
    };
    world.server().clear_log();
    let output = warm(&world);
    assert_eq!(
        snapshot(&checkout),
        before,
        "cache warm changed the checkout"
    );
    for t in ["alpha", "beta"] {
        for platform in [current_platform().as_str(), "darwin_arm64"] {
            assert!(
                output.contains(&format!(
                    "- Added {HOST}/{NS}/{t} v{VERSION} for {platform}"
                )),
                "{output}"
            );
            assert!(package_path(&cache, t, platform).is_dir());
        }
    }
    assert!(output.contains("4 added, 0 already there"), "{output}");
    assert_eq!(world.archive_downloads().len(), 4);

    world.server().clear_log();
    let output = warm(&world);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    assert!(
        output.contains(&format!(
            "- {HOST}/{NS}/alpha v{VERSION} for darwin_arm64 was already cached"
        )),
        "{output}"
    );
    assert!(output.contains("0 added, 4 already there"), "{output}");
    assert_eq!(snapshot(&checkout), before);

    // The image runs with no network: no server at all.
    world.server = None;
    let offline = world.config("offline", Some(&cache), "");
    let output = world.init_ok(&checkout, &offline, &[]);
    for t in ["alpha", "beta"] {
        assert!(output.contains(&using_cache_line(t)), "{output}");
        assert_eq!(
            inode(&installed(&checkout, t)),
            inode(&executable(&cache, t))
        );
    }
    assert_eq!(read(&checkout.join(LOCK)), lock);
}

/// The first run to use a cache entry records its files' stamps in the
/// entry's provenance; later runs in other directories take the recorded
/// hash instead of hashing the package again.
#[test]
fn cache_entries_remember_their_stamps_so_later_runs_hash_nothing() {
    let world = World::new(&["alpha"]);
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    world.init_ok(&world.workdir("first"), &config, &[]);
    // Stamps taken as the entry is made would be too fresh to trust.
    std::thread::sleep(Duration::from_millis(50));
    world.init_ok(&world.workdir("second"), &config, &[]);
    let sidecar = provenance(&cache, "alpha");
    let recorded: serde_json::Value = serde_json::from_str(&read(&sidecar)).unwrap();
    assert!(recorded["stamps"].is_object(), "{recorded}");

    // A recorded hash that matches nothing: a run that trusts the stamps
    // takes it as the entry's hash; one that hashed the files would refuse
    // the record and download the package again.
    let bogus = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    edit_json(&sidecar, |doc| doc["h1"] = bogus.into());
    world.server().clear_log();
    let third = world.workdir("third");
    world.init_ok(&third, &config, &[]);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    assert!(read(&third.join(LOCK)).contains(bogus));
}

/// With no pause between runs: the first no-op in a directory installed
/// from the cache trusts the memo its install left (the files' times are
/// pinned when the entry is filled, so stamps taken at once hold), and a
/// run right after the one that filled an entry takes the entry's hash from
/// the stamps recorded at filling.
#[test]
fn the_runs_right_after_a_fill_hash_nothing() {
    let world = World::new(&["alpha"]);
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    // The memo an install left, made to name another hash: a first no-op
    // that trusts it believes the package changed and places it again; one
    // that re-hashed the files would find it installed.
    let first_no_op_trusts_the_memo = |dir: &Path| {
        let memo = dir.join(".terraform/.tfinstall-hashes.json");
        edit_json(&memo, |doc| {
            for entry in doc.as_object_mut().unwrap().values_mut() {
                entry["h1"] = "h1:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=".into();
            }
        });
        let output = world.init_ok(dir, &config, &[]);
        assert!(
            !output.contains("Using previously-installed"),
            "the first no-op in {} hashed the package: {output}",
            dir.display()
        );
    };
    let cold = world.workdir("cold");
    world.init_ok(&cold, &config, &[]);
    first_no_op_trusts_the_memo(&cold);
    let warm = world.workdir("warm");
    world.init_ok(&warm, &config, &[]);
    first_no_op_trusts_the_memo(&warm);

    // A recorded hash that matches nothing is taken as is only by a run
    // that trusts the stamps instead of hashing the files.
    let fresh = world.new_cache("fresh-cache");
    let config = world.config("fresh", Some(&fresh), "");
    world.init_ok(&world.workdir("fills"), &config, &[]);
    let bogus = "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    edit_json(&provenance(&fresh, "alpha"), |doc| doc["h1"] = bogus.into());
    world.server().clear_log();
    let next = world.workdir("next");
    world.init_ok(&next, &config, &[]);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    assert!(read(&next.join(LOCK)).contains(bogus));
}

/// `init -offline` in a fresh checkout with no lock file: not one request,
/// the cached version chosen, and the same lock entry a download would have
/// written, from the cache's provenance. What the cache cannot satisfy is
/// refused with what it does hold.
#[test]
fn offline_init_installs_from_the_cache_without_a_lock_file() {
    let world = World::new(&["alpha", "beta"]);
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    let warmer = world.workdir("warmer");
    world.init_ok(&warmer, &config, &[]);
    let downloaded_lock = read(&warmer.join(LOCK));

    world.server().clear_log();
    let fresh = world.workdir("fresh");
    let output = world.init_ok(&fresh, &config, &["-offline"]);
    assert_eq!(world.server().requests().len(), 0, "{output}");
    for t in ["alpha", "beta"] {
        assert!(output.contains(&using_cache_line(t)), "{output}");
    }
    assert!(!output.contains("Incomplete lock file"), "{output}");
    assert_eq!(read(&fresh.join(LOCK)), downloaded_lock);
    world.init_ok(&fresh, &config, &["-offline", "-upgrade"]);
    assert_eq!(read(&fresh.join(LOCK)), downloaded_lock);

    // Constraints the cache cannot meet, and a provider it does not hold.
    let wanting = world.workdir_for("wanting", &["alpha"]);
    let main_tf = read(&wanting.join("main.tf")).replace("~> 1.0", "~> 2.0");
    std::fs::write(wanting.join("main.tf"), main_tf).unwrap();
    let output = world.init(&wanting, &config, &["-offline"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!(
            "no available releases match the given constraints ~> 2.0. With -offline, the plugin cache and the local directories hold only {VERSION} for {}",
            current_platform()
        )),
        "{stderr}"
    );
    assert!(!wanting.join(LOCK).exists());
    std::fs::remove_dir_all(package_path(&cache, "beta", &current_platform())).unwrap();
    let output = world.init(&world.workdir("missing"), &config, &["-offline"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains(&format!("{HOST}/{NS}/beta")), "{stderr}");
    assert_eq!(world.server().requests().len(), 0);
}

/// A cache on another filesystem (tmpfs) cannot be hard-linked from: the
/// default mode copies after one refused link; `-link-mode hardlink`
/// fails with a clear error and changes nothing.
#[test]
fn a_cache_on_another_filesystem_is_copied_from() {
    let world = World::new(&["alpha", "beta"]);
    let shm = tempfile::tempdir_in("/dev/shm").expect("a temp dir in /dev/shm");
    let cache = shm.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let work_dev = std::fs::metadata(world.path("work").parent().unwrap())
        .unwrap()
        .dev();
    assert_ne!(
        std::fs::metadata(&cache).unwrap().dev(),
        work_dev,
        "this test needs /dev/shm on another filesystem than {}",
        world.tmp.path().display()
    );
    let config = world.config("cli", Some(&cache), "");

    let first = world.workdir("first");
    world.init_ok(&first, &config, &[]);
    world.server().clear_log();
    let second = world.workdir("second");
    let output = world.init_ok(&second, &config, &[]);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    for dir in [&first, &second] {
        for t in ["alpha", "beta"] {
            assert!(output.contains(&using_cache_line(t)), "{output}");
            let (file, cached) = (installed(dir, t), executable(&cache, t));
            assert_eq!(inode(&file).0, work_dev, "{} is not a copy", file.display());
            assert_eq!(
                std::fs::read(&file).unwrap(),
                std::fs::read(&cached).unwrap()
            );
            // A copy belongs to the working directory: writable as usual.
            assert_eq!(mode(&file), 0o755);
        }
    }

    let third = world.workdir("third");
    let before = snapshot(&third);
    let output = world.init(&third, &config, &["-link-mode=hardlink"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Error while installing registry.test/acme/alpha v1.0.0")
            && stderr.contains(&cache.display().to_string())
            && stderr.contains("-link-mode"),
        "{stderr}"
    );
    assert_eq!(
        snapshot(&third),
        before,
        "a failed run changed the work dir"
    );
}

/// `-link-mode` on the same filesystem: `hardlink` shares the cache's
/// inodes, `symlink` links the package directory as Terraform does, `copy`
/// makes independent writable copies.
#[test]
fn link_modes_do_what_they_say() {
    let world = World::new(&["alpha"]);
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    world.init_ok(&world.workdir("filler"), &config, &[]);
    let cached = executable(&cache, "alpha");
    world.server().clear_log();

    let hardlink = world.workdir("hardlink");
    world.init_ok(&hardlink, &config, &["-link-mode=hardlink"]);
    assert_eq!(inode(&installed(&hardlink, "alpha")), inode(&cached));

    let symlink = world.workdir("symlink");
    world.init_ok(&symlink, &config, &["-link-mode", "symlink"]);
    let package = package_path(
        &symlink.join(".terraform/plugins"),
        "alpha",
        &current_platform(),
    );
    assert!(
        std::fs::symlink_metadata(&package)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::canonicalize(&package).unwrap(),
        std::fs::canonicalize(package_path(&cache, "alpha", &current_platform())).unwrap()
    );

    let copy = world.workdir("copy");
    world.init_ok(&copy, &config, &["-link-mode=copy"]);
    let file = installed(&copy, "alpha");
    assert_ne!(inode(&file), inode(&cached));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&cached).unwrap()
    );
    assert_eq!(mode(&file), 0o755);

    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    for dir in [&hardlink, &symlink, &copy] {
        assert_eq!(
            read(&dir.join(LOCK)),
            read(&world.path("work/filler").join(LOCK))
        );
    }
}

/// Puts `alpha`'s package into the cache as Terraform leaves one: the
/// unpacked files, no provenance, writable. `content` replaces the
/// executable's bytes when given (another build of the same version).
fn terraform_style_entry(world: &World, cache: &Path, content: Option<&[u8]>) -> PathBuf {
    let entry = package_path(cache, "alpha", &current_platform());
    if entry.exists() {
        make_writable(&entry);
        std::fs::remove_dir_all(&entry).unwrap();
    }
    let _ = std::fs::remove_file(
        entry.with_file_name(format!(".{}.tfinstall.json", current_platform())),
    );
    std::fs::create_dir_all(&entry).unwrap();
    let zip = std::fs::read(
        &world
            .tree
            .package("alpha", VERSION, &current_platform())
            .path,
    )
    .unwrap();
    let file = executable(cache, "alpha");
    std::fs::write(
        &file,
        content.map_or_else(|| unzip_single(&zip), <[u8]>::to_vec),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    entry
}

fn make_writable(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let mode = mode(&path);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o200)).unwrap();
        if path.is_dir() {
            make_writable(&path);
        }
    }
}

fn provenance(cache: &Path, type_name: &str) -> PathBuf {
    package_path(cache, type_name, &current_platform())
        .with_file_name(format!(".{}.tfinstall.json", current_platform()))
}

/// Terraform 1.4's rule for entries nothing vouches for (no provenance):
/// used only when the lock file has their `h1:`, or when
/// `plugin_cache_may_break_dependency_lock_file` allows it; otherwise the
/// package is downloaded and the entry replaced by one with provenance.
#[test]
fn entries_without_provenance_follow_terraform_1_4s_lock_file_rule() {
    let world = World::new(&["alpha"]);
    let plain = world.config("plain", None, "");
    let locked = world.workdir("locked");
    world.init_ok(&locked, &plain, &[]);
    let lock = read(&locked.join(LOCK));
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    let archive = world.archive("alpha", &current_platform());

    // No lock file: nothing vouches for the entry, so it is not used.
    terraform_style_entry(&world, &cache, None);
    world.server().clear_log();
    let dir = world.workdir("no-lock");
    let output = world.init_ok(&dir, &config, &[]);
    assert_eq!(world.archive_downloads(), vec![archive.clone()]);
    assert!(!output.contains(&using_cache_line("alpha")), "{output}");
    assert_eq!(read(&dir.join(LOCK)), lock);
    assert!(
        provenance(&cache, "alpha").exists(),
        "the entry was not replaced"
    );
    assert_eq!(mode(&executable(&cache, "alpha")), 0o555);

    // The lock file has its h1: used, and left as Terraform made it. Its
    // files are writable, so they are copied, not linked: a write in the
    // working directory must not reach the shared copy.
    terraform_style_entry(&world, &cache, None);
    world.server().clear_log();
    let dir = world.workdir("with-lock");
    std::fs::write(dir.join(LOCK), &lock).unwrap();
    let output = world.init_ok(&dir, &config, &[]);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    assert!(output.contains(&using_cache_line("alpha")), "{output}");
    assert_eq!(read(&dir.join(LOCK)), lock);
    assert!(!provenance(&cache, "alpha").exists());
    let (file, cached) = (installed(&dir, "alpha"), executable(&cache, "alpha"));
    assert_ne!(inode(&file), inode(&cached));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&cached).unwrap()
    );
    assert_eq!((mode(&file), mode(&cached)), (0o755, 0o755));

    // Another build under the same version: not what the lock file names.
    terraform_style_entry(&world, &cache, Some(b"#!/bin/sh\necho other build\n"));
    world.server().clear_log();
    let dir = world.workdir("other-build");
    std::fs::write(dir.join(LOCK), &lock).unwrap();
    let output = world.init_ok(&dir, &config, &[]);
    assert_eq!(world.archive_downloads(), vec![archive.clone()]);
    assert!(!output.contains(&using_cache_line("alpha")), "{output}");
    assert_eq!(read(&dir.join(LOCK)), lock);
    assert_eq!(
        PathBuf::from(world.h1("alpha")),
        PathBuf::from(h1_hash(&[(
            format!("terraform-provider-alpha_v{VERSION}"),
            std::fs::read(installed(&dir, "alpha")).unwrap()
        )]))
    );

    // The escape hatch: used without a lock file, whose entry then holds
    // only the h1: (Terraform's "incomplete lock file" case).
    terraform_style_entry(&world, &cache, None);
    let lenient = world.config(
        "lenient",
        Some(&cache),
        "plugin_cache_may_break_dependency_lock_file = true",
    );
    world.server().clear_log();
    let dir = world.workdir("may-break");
    let output = world.init_ok(&dir, &lenient, &[]);
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    assert!(output.contains(&using_cache_line("alpha")), "{output}");
    let written = read(&dir.join(LOCK));
    assert!(written.contains(&world.h1("alpha")), "{written}");
    assert!(!written.contains("zh:"), "{written}");
    assert!(
        output.contains("Incomplete lock file information"),
        "{output}"
    );
}

/// A damaged entry (tfinstall's, its files changed) is reported by `cache
/// verify` with exit status 1 and is not used: the package is downloaded
/// again and the entry replaced by a rename, so a file still linked to the
/// damaged entry keeps its (damaged) content while the entry is whole.
#[test]
fn a_damaged_entry_is_reported_and_replaced_not_rewritten() {
    let world = World::new(&["alpha", "beta"]);
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    let first = world.workdir("first");
    world.init_ok(&first, &config, &[]);
    let lock = read(&first.join(LOCK));
    let good = std::fs::read(installed(&first, "alpha")).unwrap();

    // Damage by replacing the file, as an editor saving it would.
    let cached = executable(&cache, "alpha");
    let entry_dir = package_path(&cache, "alpha", &current_platform());
    let evil = entry_dir.with_file_name("evil");
    std::fs::write(&evil, b"#!/bin/sh\necho pwned\n").unwrap();
    std::fs::rename(&evil, &cached).unwrap();
    let held = world.path("held");
    std::fs::hard_link(&cached, &held).unwrap();

    let output = world
        .command(&first, &config, &["cache", "verify", "-no-color"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains(&format!("- {}: contents changed", entry_dir.display())),
        "{stdout}"
    );
    assert!(!stdout.contains("acme/beta"), "{stdout}");
    assert!(
        stderr.contains("Damaged plugin cache entries") && stderr.contains("1 of 2 entries"),
        "{stderr}"
    );

    for (name, with_lock) in [("with-lock", true), ("without-lock", false)] {
        if !with_lock {
            // Damage the new entry the same way.
            let evil = entry_dir.with_file_name("evil");
            std::fs::write(&evil, b"#!/bin/sh\necho pwned\n").unwrap();
            std::fs::rename(&evil, executable(&cache, "alpha")).unwrap();
        }
        let dir = world.workdir(name);
        if with_lock {
            std::fs::write(dir.join(LOCK), &lock).unwrap();
        }
        world.server().clear_log();
        let output = world.init_ok(&dir, &config, &[]);
        assert_eq!(
            world.archive_downloads(),
            vec![world.archive("alpha", &current_platform())],
            "{name}"
        );
        assert!(
            output.contains(&using_cache_line("beta")),
            "{name}: {output}"
        );
        assert_eq!(
            std::fs::read(installed(&dir, "alpha")).unwrap(),
            good,
            "{name}"
        );
        assert_eq!(read(&dir.join(LOCK)), lock, "{name}");
        let replaced = executable(&cache, "alpha");
        assert_eq!(std::fs::read(&replaced).unwrap(), good, "{name}");
        assert_ne!(inode(&replaced), inode(&held), "{name}");
    }
    assert_eq!(std::fs::read(&held).unwrap(), b"#!/bin/sh\necho pwned\n");
    assert_eq!(std::fs::read(installed(&first, "alpha")).unwrap(), good);
    succeeded(
        "cache verify",
        &world
            .command(&first, &config, &["cache", "verify"])
            .output()
            .unwrap(),
    );
}

/// While another process holds an entry's lock, `init` says it is waiting,
/// downloads nothing, and carries on once the lock is released.
#[test]
fn a_held_entry_lock_makes_init_wait_and_say_so() {
    let world = World::new(&["alpha"]);
    let cache = world.new_cache("cache");
    let config = world.config("cli", Some(&cache), "");
    let entry = package_path(&cache, "alpha", &current_platform());
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    let lock = std::fs::File::create(entry.with_file_name(format!(".{}.lock", current_platform())))
        .unwrap();
    lock.lock().unwrap();

    let dir = world.workdir("waiting");
    let command = world.command(&dir, &config, &["init", "-no-color"]);
    let mut std_command = std::process::Command::new(command.get_program());
    std_command.args(command.get_args()).current_dir(&dir);
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => std_command.env(name, value),
            None => std_command.env_remove(name),
        };
    }
    let mut child = std_command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let wanted = format!(
        "- Waiting for another tfinstall to finish installing {HOST}/{NS}/alpha v{VERSION} into the shared cache directory..."
    );
    let mut seen = Vec::new();
    loop {
        match receiver.recv_timeout(RUN_TIMEOUT) {
            Ok(line) if line == wanted => break,
            Ok(line) => seen.push(line),
            Err(err) => {
                let _ = child.kill();
                panic!(
                    "no wait notice ({err}); output so far:\n{}",
                    seen.join("\n")
                );
            }
        }
    }
    assert_eq!(world.archive_downloads(), Vec::<String>::new());
    drop(lock);
    let rest: Vec<String> = receiver.iter().collect();
    assert!(child.wait().unwrap().success(), "{}", rest.join("\n"));
    assert!(
        rest.iter()
            .any(|l| l.starts_with("- Installed registry.test/acme/alpha v1.0.0")),
        "{}",
        rest.join("\n")
    );
    assert_eq!(world.archive_downloads().len(), 1);
}
