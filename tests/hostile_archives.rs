//! Hostile and odd provider archives, end to end through the binary, over
//! every way an archive reaches the installer: a packed filesystem mirror, a
//! network mirror listing the archive's own `zh:` hash, and a registry whose
//! valid signature covers the hostile zip (so authentication passes and only
//! the extractor stands in the way).
//!
//! Each hostile archive must be refused with a message naming the provider,
//! leaving the working directory (installed packages, staging area, lock
//! file) exactly as it was. Each benign oddity must install exactly.

mod support;

use std::io::{Cursor, Write as _};
use std::path::Path;

use support::RawZip;
use support::hardening::{
    Channel, NAMESPACE, Origin, Project, TYPE, assert_unchanged, output_text,
};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, System, ZipWriter};

const EXE: &str = "terraform-provider-null_v9";
const EXE_DATA: &[u8] = b"#!/bin/sh\necho 'pretend to be a provider'\n";
const README: &[u8] = b"A provider that does nothing.\n";
const BASELINE: &str = "1.0.0";

/// A hostile archive and what the refusal must say.
struct Hostile {
    label: &'static str,
    zip: Vec<u8>,
    /// Extra `init` flags (lowered limits).
    args: &'static [&'static str],
    expected: &'static str,
}

fn hostile(label: &'static str, zip: Vec<u8>, expected: &'static str) -> Hostile {
    Hostile {
        label,
        zip,
        args: &[],
        expected,
    }
}

fn with_exe() -> RawZip {
    RawZip::new().file(EXE, EXE_DATA, 0o755)
}

/// Offsets of every local and central header, walking the archive as
/// `RawZip` writes it (no extra fields, sizes in the headers).
fn headers(zip: &[u8]) -> (Vec<usize>, Vec<usize>) {
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([zip[at], zip[at + 1]]));
    let u32_at = |at: usize| u32::from_le_bytes(zip[at..at + 4].try_into().unwrap()) as usize;
    let mut locals = Vec::new();
    let mut at = 0;
    while u32_at(at) == 0x0403_4b50 {
        locals.push(at);
        at += 30 + u16_at(at + 26) + u16_at(at + 28) + u32_at(at + 18);
    }
    let mut centrals = Vec::new();
    while u32_at(at) == 0x0201_4b50 {
        centrals.push(at);
        at += 46 + u16_at(at + 28) + u16_at(at + 30) + u16_at(at + 32);
    }
    (locals, centrals)
}

fn patch(zip: &mut [u8], at: usize, bytes: &[u8]) {
    zip[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Entry `index` of a `RawZip` archive with its central directory's Unix
/// mode (type bits included) replaced.
fn with_mode(mut zip: Vec<u8>, index: usize, mode: u32) -> Vec<u8> {
    let central = headers(&zip).1[index];
    patch(&mut zip, central + 38, &(mode << 16).to_le_bytes());
    zip
}

fn hostile_cases() -> Vec<Hostile> {
    let readme = || with_exe().file("README", README, 0o644).build();
    let mut cases = vec![
        hostile(
            "parent directory",
            with_exe().file("../escaped", b"x", 0o644).build(),
            "\"..\" component",
        ),
        hostile(
            "parent directory inside a path",
            with_exe().file("docs/../../escaped", b"x", 0o644).build(),
            "\"..\" component",
        ),
        hostile(
            "absolute path",
            with_exe().file("/tmp/escaped", b"x", 0o644).build(),
            "absolute path",
        ),
        hostile(
            "backslash path",
            with_exe().file("..\\escaped", b"x", 0o644).build(),
            "backslash",
        ),
        hostile(
            "drive letter",
            with_exe().file("C:/escaped", b"x", 0o644).build(),
            "absolute path",
        ),
        hostile(
            "empty name",
            with_exe().file("", b"x", 0o644).build(),
            "the name is empty",
        ),
        hostile(
            "NUL in name",
            with_exe().file(b"evil\0.txt", b"x", 0o644).build(),
            "NUL byte",
        ),
        hostile(
            "invalid UTF-8 name",
            with_exe().file(b"caf\xe9", b"x", 0o644).build(),
            "not valid UTF-8",
        ),
        hostile(
            "over-long component",
            with_exe().file("a".repeat(256), b"x", 0o644).build(),
            "longer than 255 bytes",
        ),
        hostile(
            "over-long path",
            with_exe()
                .file(
                    format!("{}f", format!("{}/", "d".repeat(100)).repeat(41)),
                    b"x",
                    0o644,
                )
                .build(),
            "longer than 4096 bytes",
        ),
        hostile(
            "duplicate names",
            with_exe().file(EXE, b"#!/bin/sh\nevil\n", 0o755).build(),
            "more than one entry with the same name",
        ),
        hostile(
            "names differing in case",
            with_exe()
                .file("README", README, 0o644)
                .file("readme", README, 0o644)
                .build(),
            "differ only in letter case",
        ),
        hostile(
            "file and directory with one name",
            with_exe()
                .file("docs", b"x", 0o644)
                .file("docs/a.md", b"a", 0o644)
                .build(),
            "to be a directory",
        ),
        hostile(
            "directory carrying data",
            with_exe().file("docs/", b"data", 0o644).build(),
            "is a directory but carries 4 bytes",
        ),
        hostile(
            "symlink leaving the package",
            with_exe().symlink("escape", "/etc/passwd").build(),
            "is a symbolic link",
        ),
        hostile(
            "symlink inside the package",
            with_exe().symlink("alias", EXE).build(),
            "is a symbolic link",
        ),
        hostile(
            "fifo",
            with_mode(readme(), 1, 0o010_644),
            "is a special file",
        ),
        hostile(
            "character device",
            with_mode(readme(), 1, 0o020_644),
            "is a special file",
        ),
        hostile(
            "block device",
            with_mode(readme(), 1, 0o060_644),
            "is a special file",
        ),
        hostile(
            "no provider executable",
            RawZip::new().file("README", README, 0o644).build(),
            "provider binary not found",
        ),
        hostile(
            "provider executable only in a subdirectory",
            RawZip::new()
                .file(format!("bin/{EXE}"), EXE_DATA, 0o755)
                .build(),
            "provider binary not found",
        ),
        hostile(
            "not a zip (an HTML error page)",
            b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>\n".to_vec(),
            // Downloads recognise the page as it arrives; a mirror's file is
            // recognised by the extractor.
            "HTML",
        ),
        hostile("empty archive", RawZip::new().build(), "empty archive"),
        hostile(
            "truncated archive",
            {
                let zip = readme();
                zip[..zip.len() / 2].to_vec()
            },
            "not a valid zip archive",
        ),
        hostile(
            "lying uncompressed size (too small)",
            with_exe()
                .file("README", README, 0o644)
                .declared_size(README.len() as u32 - 1)
                .build(),
            "larger than its declared uncompressed size",
        ),
        hostile(
            "lying uncompressed size (too large)",
            with_exe()
                .file("README", README, 0o644)
                .declared_size(README.len() as u32 + 1)
                .build(),
            "header declares",
        ),
    ];

    let mut mismatch = readme();
    let local = headers(&mismatch).0[1];
    mismatch[local + 30] = b'X';
    cases.push(hostile(
        "local and central names disagree",
        mismatch,
        "header inconsistency",
    ));

    let mut bzip2 = readme();
    let (locals, centrals) = headers(&bzip2);
    patch(&mut bzip2, locals[1] + 8, &12u16.to_le_bytes());
    patch(&mut bzip2, centrals[1] + 10, &12u16.to_le_bytes());
    cases.push(hostile(
        "unsupported compression method",
        bzip2,
        "uses compression method Bzip2",
    ));

    let mut encrypted = readme();
    let (locals, centrals) = headers(&encrypted);
    encrypted[locals[1] + 6] |= 1;
    encrypted[centrals[1] + 8] |= 1;
    cases.push(hostile("encrypted entry", encrypted, "is encrypted"));

    let mut crc = readme();
    let (locals, centrals) = headers(&crc);
    crc[locals[1] + 14] ^= 1;
    crc[centrals[1] + 16] ^= 1;
    cases.push(hostile("CRC mismatch", crc, "its CRC-32 is"));

    let mut outside = readme();
    let (_, centrals) = headers(&outside);
    let beyond = u32::try_from(outside.len() + 4096).unwrap();
    patch(&mut outside, centrals[1] + 42, &beyond.to_le_bytes());
    cases.push(hostile(
        "entry pointing outside the file",
        outside,
        "not a valid zip archive: a header lies past the end of the archive",
    ));

    let mut corrupt = RawZip::new()
        .deflate_bomb(EXE, 4096)
        .file("README", README, 0o644)
        .build();
    let local = headers(&corrupt).0[0];
    let name_len = EXE.len();
    // 0xff starts a final block of the reserved type 3.
    corrupt[local + 30 + name_len] = 0xff;
    cases.push(hostile(
        "corrupt deflate data",
        corrupt,
        "corrupt deflate stream",
    ));

    cases.push(hostile(
        "decompression bomb (ratio)",
        with_exe().deflate_bomb("zeros", 64 << 20).build(),
        "inflates to more than 200 times its compressed size",
    ));
    cases.push(Hostile {
        label: "decompression bomb (total size, lowered limit)",
        zip: with_exe().deflate_bomb("zeros", 4 << 20).build(),
        args: &["-max-package-size=512KiB"],
        expected: "more than 524288 bytes",
    });
    cases.push(Hostile {
        label: "too many entries (lowered limit)",
        zip: (0..12)
            .fold(with_exe(), |zip, i| {
                zip.file(format!("doc{i}.txt"), b"x", 0o644)
            })
            .build(),
        args: &["-max-package-files=10"],
        expected: "13 entries, more than the limit of 10",
    });
    cases.push(Hostile {
        label: "compression ratio (lowered limit)",
        zip: with_exe().deflate_bomb("zeros", 2 << 20).build(),
        args: &["-max-compression-ratio=50"],
        expected: "more than 50 times its compressed size",
    });
    cases
}

/// Installs a benign baseline, then offers each hostile archive as a newer
/// version: every run must fail naming the provider, and leave the
/// baseline install and its lock file untouched.
fn hostile_archives_are_refused_via(channel: Channel) {
    let cases = hostile_cases();
    let origin = Origin::new(channel);
    let versions: Vec<String> = (0..cases.len()).map(|i| format!("2.0.{i}")).collect();
    let mut published = vec![(BASELINE, benign_zip())];
    for (case, version) in cases.iter().zip(&versions) {
        published.push((version.as_str(), case.zip.clone()));
    }
    origin.publish(&published);

    let project = Project::new();
    project.require(&origin.source(), BASELINE);
    let mut command = project.init(&[]);
    origin.configure(&project, &mut command);
    let output = command.output().unwrap();
    assert!(output.status.success(), "{:?}", output_text(&output));
    assert!(project.package_dir(&origin.host(), BASELINE).is_dir());
    let before = project.snapshot();

    for (case, version) in cases.iter().zip(&versions) {
        let context = format!("{channel:?}: {}", case.label);
        project.require(&origin.source(), version);
        let mut args = vec!["-upgrade"];
        args.extend_from_slice(case.args);
        let mut command = project.init(&args);
        origin.configure(&project, &mut command);
        let output = command.output().unwrap();
        let (stdout, stderr) = output_text(&output);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{context}\n{stdout}\n{stderr}"
        );
        let provider = format!("{NAMESPACE}/{TYPE} v{version}");
        assert!(
            stderr.contains("Failed to install provider") && stderr.contains(&provider),
            "{context}: the error must name {provider}:\n{stderr}"
        );
        assert!(
            stderr.contains(case.expected),
            "{context}: expected {:?} in:\n{stderr}",
            case.expected
        );
        assert!(!stderr.contains("panicked"), "{context}:\n{stderr}");
        assert!(
            !stderr.contains(".tfinstall-staging"),
            "{context}: the message names a temporary file:\n{stderr}"
        );
        assert_unchanged(&before, &project.snapshot(), &context);
    }
}

#[test]
fn hostile_archives_from_a_filesystem_mirror_are_refused() {
    hostile_archives_are_refused_via(Channel::FsMirror);
}

#[test]
fn hostile_archives_from_a_network_mirror_are_refused() {
    hostile_archives_are_refused_via(Channel::NetworkMirror);
}

#[test]
fn hostile_archives_signed_by_a_registry_are_refused() {
    hostile_archives_are_refused_via(Channel::Registry);
}

fn benign_zip() -> Vec<u8> {
    zip_with(ZipWriter::new(Cursor::new(Vec::new())), |w| {
        add(
            w,
            EXE,
            EXE_DATA,
            SimpleFileOptions::default().unix_permissions(0o755),
        );
    })
    .into_inner()
}

fn zip_with<W: std::io::Write + std::io::Seek>(
    mut writer: ZipWriter<W>,
    entries: impl FnOnce(&mut ZipWriter<W>),
) -> W {
    entries(&mut writer);
    writer.finish().unwrap()
}

fn add<W: std::io::Write + std::io::Seek>(
    writer: &mut ZipWriter<W>,
    name: &str,
    data: &[u8],
    options: SimpleFileOptions,
) {
    writer.start_file(name, options).unwrap();
    writer.write_all(data).unwrap();
}

/// An odd but legitimate archive and exactly what it installs:
/// (path, mode, content) of every regular file.
struct Benign {
    label: &'static str,
    zip: Vec<u8>,
    files: Vec<(&'static str, u32, &'static [u8])>,
}

fn benign_cases() -> Vec<Benign> {
    let options = SimpleFileOptions::default;
    let new = || ZipWriter::new(Cursor::new(Vec::new()));
    vec![
        Benign {
            label: "nested directories, explicit and implied",
            zip: zip_with(new(), |w| {
                add(w, EXE, EXE_DATA, options().unix_permissions(0o755));
                w.add_directory("docs/", options()).unwrap();
                w.add_directory("docs/guides/", options().unix_permissions(0o700))
                    .unwrap();
                add(w, "docs/guides/intro.md", b"intro\n", options());
                add(
                    w,
                    "implied/deeper/tool.sh",
                    b"#!/bin/sh\n",
                    options().unix_permissions(0o750),
                );
            })
            .into_inner(),
            files: vec![
                ("docs/guides/intro.md", 0o644, b"intro\n"),
                ("implied/deeper/tool.sh", 0o755, b"#!/bin/sh\n"),
                (EXE, 0o755, EXE_DATA),
            ],
        },
        Benign {
            label: "zip64",
            zip: zip_with(new(), |w| {
                let large = options().large_file(true);
                add(w, EXE, EXE_DATA, large.unix_permissions(0o755));
                add(w, "README", README, large);
            })
            .into_inner(),
            files: vec![("README", 0o644, README), (EXE, 0o755, EXE_DATA)],
        },
        Benign {
            label: "data descriptors",
            zip: zip_with(ZipWriter::new_stream(Vec::new()), |w| {
                add(w, EXE, EXE_DATA, options().unix_permissions(0o755));
                add(w, "README", README, options());
            })
            .into_inner(),
            files: vec![("README", 0o644, README), (EXE, 0o755, EXE_DATA)],
        },
        Benign {
            label: "stored entries",
            zip: zip_with(new(), |w| {
                let stored = options().compression_method(CompressionMethod::Stored);
                add(w, EXE, EXE_DATA, stored.unix_permissions(0o755));
                add(w, "empty", b"", stored);
            })
            .into_inner(),
            files: vec![("empty", 0o644, b""), (EXE, 0o755, EXE_DATA)],
        },
        Benign {
            label: "made on MS-DOS/Windows (no Unix modes)",
            zip: zip_with(new(), |w| {
                let dos = options().system(System::Dos);
                add(w, EXE, EXE_DATA, dos);
                add(w, "helper.exe", b"MZ", dos);
            })
            .into_inner(),
            files: vec![("helper.exe", 0o644, b"MZ"), (EXE, 0o755, EXE_DATA)],
        },
        Benign {
            label: "setuid, sticky and world-writable modes",
            zip: zip_with(new(), |w| {
                add(
                    w,
                    EXE,
                    EXE_DATA,
                    options().external_attributes(0o106_777 << 16),
                );
                add(
                    w,
                    "shared",
                    b"x",
                    options().external_attributes(0o100_666 << 16),
                );
                add(
                    w,
                    "sticky",
                    b"y",
                    options().external_attributes(0o101_775 << 16),
                );
            })
            .into_inner(),
            files: vec![
                ("shared", 0o644, b"x"),
                ("sticky", 0o755, b"y"),
                (EXE, 0o755, EXE_DATA),
            ],
        },
    ]
}

fn benign_oddities_install_exactly_via(channel: Channel) {
    let cases = benign_cases();
    let origin = Origin::new(channel);
    let versions: Vec<String> = (0..cases.len()).map(|i| format!("3.0.{i}")).collect();
    let published: Vec<(&str, Vec<u8>)> = cases
        .iter()
        .zip(&versions)
        .map(|(case, version)| (version.as_str(), case.zip.clone()))
        .collect();
    origin.publish(&published);

    for (case, version) in cases.iter().zip(&versions) {
        let context = format!("{channel:?}: {}", case.label);
        let project = Project::new();
        project.require(&origin.source(), version);
        let mut command = project.init(&[]);
        origin.configure(&project, &mut command);
        let output = command.output().unwrap();
        let (stdout, stderr) = output_text(&output);
        assert!(output.status.success(), "{context}\n{stdout}\n{stderr}");
        let package = project.package_dir(&origin.host(), version);
        let relative = package.strip_prefix(project.work()).unwrap();
        let installed = project.snapshot().files_below(relative);
        let expected: Vec<(String, u32, Vec<u8>)> = case
            .files
            .iter()
            .map(|(name, mode, content)| (name.to_string(), *mode, content.to_vec()))
            .collect();
        assert_eq!(installed, expected, "{context}");
        assert!(
            !project.staging_dir().exists(),
            "{context}: staging directory left behind"
        );
        let lock = project.lock_file().expect("lock file written");
        assert!(
            lock.contains(&format!("version     = \"{version}\"")),
            "{context}\n{lock}"
        );
    }
}

#[test]
fn benign_oddities_from_a_filesystem_mirror_install_exactly() {
    benign_oddities_install_exactly_via(Channel::FsMirror);
}

#[test]
fn benign_oddities_from_a_network_mirror_install_exactly() {
    benign_oddities_install_exactly_via(Channel::NetworkMirror);
}

#[test]
fn benign_oddities_signed_by_a_registry_install_exactly() {
    benign_oddities_install_exactly_via(Channel::Registry);
}

/// Limits given on the command line must be usable values.
#[test]
fn invalid_limit_flags_are_refused_naming_the_flag() {
    let project = Project::new();
    project.require("hashicorp/null", "");
    for (arg, flag) in [
        ("-max-package-size=lots", "--max-package-size"),
        ("-max-package-files=0", "--max-package-files"),
        ("-max-compression-ratio=-3", "--max-compression-ratio"),
    ] {
        let before = project.snapshot();
        let output = project.init(&[arg]).output().unwrap();
        let (_, stderr) = output_text(&output);
        assert_eq!(output.status.code(), Some(1), "{arg}: {stderr}");
        assert!(stderr.contains(flag), "{arg}: {stderr}");
        assert_unchanged(&before, &project.snapshot(), arg);
    }
    assert!(!Path::new(&project.work().join(".terraform")).exists());
}
