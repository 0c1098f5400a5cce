//! A downloaded package is unpacked as its bytes arrive, never saved as an
//! archive first; an archive the streaming unpacker cannot vouch for is
//! fetched again to a file and judged by the full extractor. Through the
//! binary, over a registry and a network mirror.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rand::{RngCore as _, SeedableRng as _};
use support::hardening::{Channel, NAMESPACE, Origin, Project, TYPE, output_text};
use support::{Compression, Fault, ZipEntry, build_zip, h1_of_zip};

const EXE: &str = "terraform-provider-null_v1.0.0";
const VERSION: &str = "1.0.0";
const NETWORK: [Channel; 2] = [Channel::NetworkMirror, Channel::Registry];
/// What the server sends before it stalls.
const SENT_BEFORE_STALL: usize = 3 << 20;

fn executable(len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(25).fill_bytes(&mut data);
    data
}

/// Every path below `dir`, with its size.
fn files_below(dir: &Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                found.push((entry.path(), meta.len()));
            }
        }
    }
    found
}

/// An init over `channel` of an 8 MiB executable that the server stalls
/// after 3 MiB, caught once the executable is partly written in the
/// staging area.
struct StalledInit {
    origin: Origin,
    project: Project,
    init: std::process::Child,
    data: Vec<u8>,
    /// How much of the executable was written.
    partial: u64,
}

fn stalled_init(channel: Channel) -> StalledInit {
    let origin = Origin::new(channel);
    let data = executable(8 << 20);
    let archive = build_zip(
        &[ZipEntry::executable(EXE, data.clone())],
        Compression::Stored,
    );
    origin.publish(&[(VERSION, archive)]);
    let project = Project::new();
    project.require(&origin.source(), VERSION);
    origin.server().fault_sequence(
        &origin.archive_path(VERSION),
        [Fault::StallAfter(SENT_BEFORE_STALL)],
    );
    let mut command = project.init(&[]);
    origin.configure(&project, &mut command);
    let init = support::spawnable(&command)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let partial = loop {
        let files = files_below(project.root());
        let partial = files.iter().find(|(path, len)| {
            path.starts_with(project.staging_dir())
                && path.file_name().is_some_and(|name| name == EXE)
                && *len >= 1 << 20
        });
        if let Some((_, len)) = partial {
            break *len;
        }
        assert!(
            Instant::now() < deadline,
            "{channel:?}: no partly unpacked executable in {files:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    StalledInit {
        origin,
        project,
        init,
        data,
        partial,
    }
}

#[test]
fn a_package_is_unpacked_while_it_downloads_and_no_archive_is_saved() {
    for channel in NETWORK {
        // The server has sent 3 MiB and waits: what arrived is already on
        // disk as the executable, in the staging area, and no archive is.
        let StalledInit {
            origin,
            project,
            init: mut child,
            data,
            partial,
        } = stalled_init(channel);
        let path = origin.archive_path(VERSION);
        assert!(partial < data.len() as u64, "{channel:?}");
        let files = files_below(project.root());
        assert!(
            !files
                .iter()
                .any(|(path, _)| path.extension().is_some_and(|ext| ext == "zip")),
            "{channel:?}: an archive was saved: {files:?}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(project.lock_file(), None, "{channel:?}");
        assert!(
            !project.package_dir(&origin.host(), VERSION).exists(),
            "{channel:?}"
        );

        // The next run installs it whole, from one request, and leaves no
        // staging behind.
        origin.server().clear_faults();
        origin.server().clear_log();
        let mut command = project.init(&[]);
        origin.configure(&project, &mut command);
        let output = command.output().unwrap();
        let (stdout, stderr) = output_text(&output);
        assert!(output.status.success(), "{channel:?}\n{stdout}\n{stderr}");
        let installed = project.package_dir(&origin.host(), VERSION).join(EXE);
        assert!(std::fs::read(installed).unwrap() == data, "{channel:?}");
        assert_eq!(origin.server().count(&path), 1, "{channel:?}");
        assert!(!project.staging_dir().exists(), "{channel:?}");
    }
}

/// Installs `archive` over each network channel; the installed directory
/// must hold `files`, and the archive must have been asked for `requests`
/// times.
fn installs_exactly(archive: &[u8], files: &[(&str, &[u8])], requests: usize) {
    for channel in NETWORK {
        let origin = Origin::new(channel);
        origin.publish(&[(VERSION, archive.to_vec())]);
        let project = Project::new();
        project.require(&origin.source(), VERSION);
        let mut command = project.init(&[]);
        origin.configure(&project, &mut command);
        let output = command.output().unwrap();
        let (stdout, stderr) = output_text(&output);
        assert!(output.status.success(), "{channel:?}\n{stdout}\n{stderr}");

        let dir = project.package_dir(&origin.host(), VERSION);
        for (name, content) in files {
            assert!(
                std::fs::read(dir.join(name)).unwrap() == *content,
                "{channel:?}: {name}"
            );
        }
        assert_eq!(
            origin.server().count(&origin.archive_path(VERSION)),
            requests,
            "{channel:?}"
        );
        let lock = project.lock_file().unwrap();
        assert!(
            lock.contains(&h1_of_zip(archive)),
            "{channel:?}: {lock}\n(the provider is {NAMESPACE}/{TYPE})"
        );
        assert!(!project.staging_dir().exists(), "{channel:?}");
    }
}

/// A zip written front to back, each entry's sizes after its data (a data
/// descriptor), as Go's `archive/zip` writes every provider release that
/// goreleaser packs.
fn sizes_after_data(method: zip::CompressionMethod, data: &[u8]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new_stream(Vec::new());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(method)
        .unix_permissions(0o755);
    writer.start_file(EXE, options).unwrap();
    std::io::Write::write_all(&mut writer, data).unwrap();
    writer.start_file("README", options).unwrap();
    std::io::Write::write_all(&mut writer, b"docs\n").unwrap();
    let archive = writer.finish().unwrap().into_inner();
    assert_ne!(
        archive[6] & 0x08,
        0,
        "the entry should use a data descriptor"
    );
    archive
}

#[test]
fn a_go_made_archive_unpacks_while_it_downloads() {
    let data = executable(256 << 10);
    let archive = sizes_after_data(zip::CompressionMethod::Deflated, &data);
    installs_exactly(&archive, &[(EXE, &data), ("README", b"docs\n")], 1);
}

#[test]
fn an_archive_the_stream_cannot_take_is_fetched_again_and_installs_exactly() {
    // A stored entry whose size follows it cannot be found from the front.
    let data = executable(64 << 10);
    let archive = sizes_after_data(zip::CompressionMethod::Stored, &data);
    installs_exactly(&archive, &[(EXE, &data), ("README", b"docs\n")], 2);
}

/// The nice value of each of a process's threads, by thread name (Linux
/// `/proc/PID/task/TID/stat`, field 19).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn thread_nice_values(pid: u32) -> Vec<(String, i64)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(task.join("comm")),
            std::fs::read_to_string(task.join("stat")),
        ) else {
            continue;
        };
        // The fields after the parenthesised name, from field 3 (state) on.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .collect();
        threads.push((name.trim().to_owned(), fields[16].parse().unwrap()));
    }
    threads
}

/// A download is unpacked on a thread of its own, ten steps nicer than the
/// thread that reads the network, so that with every core busy the network
/// is still read at once and the sender never waits on a full receive
/// window. A large file in it is hashed and written on a second thread
/// while the first inflates, where a core is idle (the stalled download is
/// the only one, and its 8 MiB executable counts as large); that thread is
/// as nice as the first, so it yields to the network as well.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_download_unpacks_on_threads_that_yield_to_the_network() {
    // Bound whole: the server and the project must outlive the reading.
    let mut stalled = stalled_init(Channel::Registry);
    let threads = thread_nice_values(stalled.init.id());
    stalled.init.kill().unwrap();
    stalled.init.wait().unwrap();

    let main = threads
        .iter()
        .find(|(name, _)| name == "tfinstall")
        .map(|(_, nice)| *nice)
        .unwrap_or_else(|| panic!("no main thread in {threads:?}"));
    let nice_of = |wanted: &str| -> Vec<i64> {
        threads
            .iter()
            .filter(|(name, _)| name == wanted)
            .map(|(_, nice)| *nice)
            .collect()
    };
    let nicer = (main + 10).min(19);
    assert_eq!(nice_of("download-sink"), [nicer], "{threads:?}");
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let second = if cores > 1 { vec![nicer] } else { Vec::new() };
    assert_eq!(nice_of("hash-and-write"), second, "{threads:?}");
}

/// A Go-made archive (sizes after the data) whose executable is large
/// enough to be hashed and written on a second thread while it inflates.
fn large_go_made_archive() -> (Vec<u8>, Vec<u8>) {
    let data = executable(3 << 20);
    (
        sizes_after_data(zip::CompressionMethod::Deflated, &data),
        data,
    )
}

/// Runs `init` on `archive` from a registry with the debug log on; the
/// origin (for its request counts), the project and the output.
fn init_logged(archive: Vec<u8>) -> (Origin, Project, std::process::Output) {
    let origin = Origin::new(Channel::Registry);
    origin.publish(&[(VERSION, archive)]);
    let project = Project::new();
    project.require(&origin.source(), VERSION);
    let mut command = project.init(&[]);
    origin.configure(&project, &mut command);
    command.env("TFINSTALL_LOG", "tfinstall=debug");
    let output = command.output().unwrap();
    (origin, project, output)
}

/// Whether the log shows the executable hashed and written on a second
/// thread, which needs a second core.
fn took_a_second_thread(stderr: &str) -> bool {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let logged = stderr.contains(&format!(
        "archive entry {EXE:?}: hashing and writing on a second thread"
    ));
    logged == (cores > 1)
}

#[test]
fn a_large_file_hashed_on_a_second_thread_pairs_with_the_archive_and_installs_exactly() {
    let (archive, data) = large_go_made_archive();
    let (origin, project, output) = init_logged(archive.clone());
    let (stdout, stderr) = output_text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(took_a_second_thread(&stderr), "{stderr}");
    // The archive's hash, paired with the file's on that thread, matched
    // the signed checksum, or nothing would be installed.
    let dir = project.package_dir(&origin.host(), VERSION);
    assert!(std::fs::read(dir.join(EXE)).unwrap() == data);
    assert_eq!(origin.server().count(&origin.archive_path(VERSION)), 1);
    assert!(project.lock_file().unwrap().contains(&h1_of_zip(&archive)));
}

/// The central directory lies about the executable's CRC-32 while its
/// local header and data descriptor tell the truth: the streaming
/// unpacker, which took the file on two threads, compares every entry
/// with the central directory and hands the archive to the full
/// extractor, whose verdict the user gets.
#[test]
fn a_large_streamed_file_is_still_checked_against_the_central_directory() {
    let (mut archive, _) = large_go_made_archive();
    let central = archive
        .windows(4)
        .position(|window| window == b"PK\x01\x02")
        .unwrap();
    let crc_at = central + 16;
    let actual = u32::from_le_bytes(archive[crc_at..crc_at + 4].try_into().unwrap());
    let lie = actual ^ 0x0101_0101;
    archive[crc_at..crc_at + 4].copy_from_slice(&lie.to_le_bytes());

    let (origin, project, output) = init_logged(archive);
    let (stdout, stderr) = output_text(&output);
    assert!(!output.status.success(), "{stdout}\n{stderr}");
    assert!(took_a_second_thread(&stderr), "{stderr}");
    assert!(
        stderr.contains("declined (an entry the central directory describes otherwise)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "archive entry {EXE:?} is corrupt: its CRC-32 is {actual:08x} but its header says {lie:08x}"
        )),
        "{stderr}"
    );
    assert_eq!(origin.server().count(&origin.archive_path(VERSION)), 2);
    assert_eq!(project.lock_file(), None);
    assert!(!project.package_dir(&origin.host(), VERSION).exists());
    assert!(!project.staging_dir().exists());
}
