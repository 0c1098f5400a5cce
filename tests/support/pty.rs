//! Runs a command on a real pseudo-terminal, for tests of what tfinstall
//! shows only to people at a terminal (colour, progress display).

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};

use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

/// What a terminal received: stdout and stderr interleaved, raw bytes
/// (escape sequences included) decoded lossily.
pub struct PtyOutput {
    pub status: ExitStatus,
    pub text: String,
}

/// Runs `command` with stdout and stderr on a fresh 120×40 terminal and
/// stdin empty, and collects everything it writes there.
pub fn run_on_pty(mut command: Command) -> PtyOutput {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("open a pseudo-terminal");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    tcsetwinsize(
        &master,
        Winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )
    .expect("set the terminal size");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let terminal = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().expect("pty names are ASCII"))
        .expect("open the pty's terminal side");
    command
        .stdin(Stdio::null())
        .stdout(terminal.try_clone().expect("dup the terminal"))
        .stderr(terminal);
    let mut child = command.spawn().expect("start the command on the pty");
    // The command value still holds the terminal side open; reading would
    // never end while it does.
    drop(command);
    let mut master = std::fs::File::from(master);
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match master.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                // Linux reports EIO once the last terminal-side descriptor closes.
                Err(_) => break,
            }
        }
        bytes
    });
    let status = child.wait().expect("wait for the command");
    let bytes = reader.join().expect("pty reader thread");
    PtyOutput {
        status,
        text: String::from_utf8_lossy(&bytes).into_owned(),
    }
}
