//! A real OpenSSH server on 127.0.0.1 for the tests of `git::ssh://`
//! sources: Debian's `sshd`, installed by the test if it is missing,
//! started on a free port with a host key and an authorized key of the
//! test's own, serving git over SSH as any git host does (the client runs
//! `git-upload-pack` in the session).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Where Debian's `openssh-server` puts the daemon.
const SSHD: &str = "/usr/sbin/sshd";

/// The daemon's path, installing `openssh-server` first if it is absent.
fn locate_sshd() -> PathBuf {
    let sshd = PathBuf::from(SSHD);
    if !sshd.exists() {
        let installed = Command::new("apt-get")
            .args(["install", "-y", "-q", "openssh-server"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output();
        let ok = installed
            .as_ref()
            .is_ok_and(|output| output.status.success());
        assert!(
            ok && sshd.exists(),
            "these tests need OpenSSH's sshd at {SSHD}; installing it with `apt-get install -y openssh-server` failed: {installed:?}"
        );
    }
    sshd
}

fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("{command:?}: {err}"));
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A new ed25519 key pair at `path` (and `path.pub`); the public key's line.
pub fn keygen(path: &Path) -> String {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "test", "-f"])
        .arg(path));
    std::fs::read_to_string(path.with_extension("pub")).expect("the public key")
}

/// A running sshd, stopped when dropped.
pub struct Sshd {
    child: Child,
    port: u16,
    host_public_key: String,
    _dir: tempfile::TempDir,
}

impl Sshd {
    /// Starts sshd letting in the holder of `authorized_key` (a public key
    /// line) as the user running the tests.
    pub fn start(authorized_key: &str) -> Sshd {
        let sshd = locate_sshd();
        let dir = tempfile::tempdir().expect("sshd directory");
        let host_key = dir.path().join("host_ed25519");
        let host_public_key = keygen(&host_key);
        let authorized = dir.path().join("authorized_keys");
        std::fs::write(&authorized, authorized_key).expect("authorized_keys");
        // Privilege separation needs this directory when sshd runs as root.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("its address").port()
        };
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {pid}\n\
                 AuthorizedKeysFile {authorized}\nStrictModes no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n\
                 PubkeyAuthentication yes\nAcceptEnv GIT_PROTOCOL\nLogLevel ERROR\n",
                host = host_key.display(),
                pid = dir.path().join("sshd.pid").display(),
                authorized = authorized.display(),
            ),
        )
        .expect("sshd_config");
        // Its log, read when it fails to start (the readiness probe below
        // alone would fill a terminal with "connection closed" lines).
        let log = dir.path().join("sshd.log");
        let child = Command::new(&sshd)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("sshd log"))
            .spawn()
            .expect("start sshd");
        let mut server = Sshd {
            child,
            port,
            host_public_key,
            _dir: dir,
        };
        // Up when it accepts a connection; counted tries, not a clock.
        for _ in 0..500 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "sshd exited at start ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("sshd did not start listening on port {port}");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host key, `TYPE BASE64 COMMENT`, for a `known_hosts` line.
    pub fn host_public_key(&self) -> &str {
        self.host_public_key.trim()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The name of the user the tests run as, whom sshd lets in.
pub fn current_user() -> String {
    run(Command::new("id").arg("-un"))
}
