//! Standard output and standard error, written as Go writes them, and so
//! as Terraform does.
//!
//! Go's runtime ignores SIGPIPE for every descriptor but 1 and 2: a write
//! to a socket, a pipe to a child or a file whose reader is gone returns
//! `EPIPE`, and only a failed write to standard output or error ends the
//! process, by SIGPIPE (`terraform providers | head -1` ends quietly, with
//! the status 141 a shell reports for it). tfinstall does the same: SIGPIPE
//! stays ignored, as Rust leaves it, so a write to a connection its server
//! reset (a TLS alert, a request on a pooled HTTP/1.1 connection) fails
//! with an error the download's retries see; and every write of ours to
//! standard output or error goes through [`stdout`], [`stderr`] or
//! [`end_on_broken_pipe`], which end the process by SIGPIPE on `EPIPE`.
//! Setting SIGPIPE to its default for the whole process instead killed
//! every run whose connection was reset (issue 31).
//!
//! `serve` keeps its log's writes on plain standard output, whose errors
//! it ignores: a log reader going away must not stop the server.

use std::fmt;
use std::io::{self, Write};

/// Standard output (locked), ending the process by SIGPIPE when its
/// reader is gone.
pub fn stdout() -> Standard<io::StdoutLock<'static>> {
    Standard(io::stdout().lock())
}

/// Standard error (locked), ending the process by SIGPIPE when its reader
/// is gone.
pub fn stderr() -> Standard<io::StderrLock<'static>> {
    Standard(io::stderr().lock())
}

/// `println!` through [`stdout`], or `eprintln!` through [`stderr`]. Other
/// write errors (a full disk under a redirected output) are ignored, as Go's
/// `fmt.Println` callers do, where `println!` would panic.
pub fn println(line: fmt::Arguments<'_>, to_stderr: bool) {
    fn write(mut out: impl Write, line: fmt::Arguments<'_>) {
        let _ = out.write_fmt(line);
        let _ = out.write_all(b"\n");
    }
    if to_stderr {
        write(stderr(), line)
    } else {
        write(stdout(), line)
    }
}

/// `println!` through [`stdout`]: see [`println`].
macro_rules! outln {
    () => {
        $crate::stdio::println(format_args!(""), false)
    };
    ($($arg:tt)*) => {
        $crate::stdio::println(format_args!($($arg)*), false)
    };
}
pub(crate) use outln;

/// `eprintln!` through [`stderr`]: see [`println`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stdio::println(format_args!($($arg)*), true)
    };
}
pub(crate) use errln;

/// Writes `text` whole to standard output, or to standard error.
pub fn print(text: &str, to_stderr: bool) {
    let _ = if to_stderr {
        stderr().write_all(text.as_bytes())
    } else {
        stdout().write_all(text.as_bytes())
    };
}

/// A standard stream that ends the process by SIGPIPE on `EPIPE`; every
/// other result is the caller's. Whatever is still buffered is written
/// when it is dropped.
pub struct Standard<W: Write>(W);

impl<W: Write> Write for Standard<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        end_on_broken_pipe(self.0.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        end_on_broken_pipe(self.0.flush())
    }
}

impl<W: Write> Drop for Standard<W> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// The result of a write to standard output or error made by other code
/// (clap's help, say), passed through unless it failed with `EPIPE`, which
/// ends the process by SIGPIPE.
pub fn end_on_broken_pipe<T>(result: io::Result<T>) -> io::Result<T> {
    match result {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => die_of_sigpipe(),
        other => other,
    }
}

/// Ends the process by SIGPIPE, as Go's runtime does after a failed write
/// to descriptor 1 or 2: the default action back, the signal unblocked and
/// raised, and exit status 2 should the process somehow survive it.
#[cfg(unix)]
fn die_of_sigpipe() -> ! {
    // SAFETY: these calls only change this process's handling of SIGPIPE
    // and this thread's signal mask, on values built here; the process is
    // about to end.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &pipe, std::ptr::null_mut());
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(2)
}

#[cfg(not(unix))]
fn die_of_sigpipe() -> ! {
    std::process::exit(1)
}
