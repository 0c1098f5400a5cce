//! Pause points for the tests that force each interleaving of processes
//! sharing a plugin cache (`tests/cache_interleavings.rs`). A stress run
//! finds a race only by chance; a pause point holds one process at an exact
//! step (entry lock taken, provenance written, files renamed) while the
//! test lets another run past it, so every order can be tried on purpose.
//!
//! Built only with the `failpoints` feature, which the tests turn on through
//! the crate's dev-dependency on itself; a release build has empty
//! functions. With the feature, `TFINSTALL_PAUSE_DIR=DIR` and
//! `TFINSTALL_PAUSE_AT=NAME[,NAME…]` make a process that reaches a named
//! point create `DIR/NAME.reached` and wait until `DIR/NAME.go` exists.
//! Hand-written because the `fail` crate's pauses are released from inside
//! the paused process, and here the releasing hand is another process.
//!
//! The same build counts events a test asserts on instead of timing them
//! ([`count`]): with `TFINSTALL_COUNT_FILE=PATH`, each is a line in PATH.

/// Holds the process at `name` while a test asks it to; see the module
/// documentation.
#[cfg(feature = "failpoints")]
pub fn pause(name: &str) {
    use std::time::{Duration, Instant};
    let (Some(dir), Some(at)) = (
        std::env::var_os("TFINSTALL_PAUSE_DIR"),
        std::env::var("TFINSTALL_PAUSE_AT").ok(),
    ) else {
        return;
    };
    if !at.split(',').any(|point| point == name) {
        return;
    }
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::write(
        dir.join(format!("{name}.reached")),
        std::process::id().to_string(),
    );
    // A test that dies never says go; its process must not wait forever.
    let deadline = Instant::now() + Duration::from_secs(120);
    let go = dir.join(format!("{name}.go"));
    while !go.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn pause(_name: &str) {}

/// Counts one `name` event for a test: a line appended to
/// `TFINSTALL_COUNT_FILE`, written whole in one append so that the lines of
/// concurrent threads and processes never mix.
#[cfg(feature = "failpoints")]
pub fn count(name: &str) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os("TFINSTALL_COUNT_FILE") else {
        return;
    };
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(format!("{name}\n").as_bytes());
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn count(_name: &str) {}
