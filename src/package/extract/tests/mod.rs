//! The extractor's tests: benign archives install exactly, also while
//! streaming; [`refusals`] holds what must be refused.

use std::fs::{self, File};
use std::io::{Cursor, Seek, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use base64::Engine;
use tempfile::TempDir;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, System, ZipWriter};

use super::write::{FileOutput, PIPELINE_MIN_BYTES, Unpacking, copy_on_two_threads, fill};
use super::*;
use crate::sha256::Sha256Lane;
use sha2::{Digest, Sha256};

mod refusals;

const TYPE: &str = "null";
const EXE: &str = "terraform-provider-null_v1.0.0_x5";
const EXE_DATA: &[u8] = b"#!/bin/sh\necho pretend to be a provider plugin\n";
const README_DATA: &[u8] = b"This provider does nothing at all.\n";

fn options() -> SimpleFileOptions {
    SimpleFileOptions::default()
}

fn build(add_entries: impl FnOnce(&mut ZipWriter<Cursor<Vec<u8>>>)) -> Vec<u8> {
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    add_entries(&mut writer);
    writer.finish().unwrap().into_inner()
}

fn add<W: Write + Seek>(
    writer: &mut ZipWriter<W>,
    name: &str,
    data: &[u8],
    options: SimpleFileOptions,
) {
    writer.start_file(name, options).unwrap();
    writer.write_all(data).unwrap();
}

fn add_exe<W: Write + Seek>(writer: &mut ZipWriter<W>) {
    add(writer, EXE, EXE_DATA, options().unix_permissions(0o755));
}

/// A package with the executable plus one more file named `name`.
fn package_with(name: &str) -> Vec<u8> {
    build(|w| {
        add_exe(w);
        add(w, name, README_DATA, options());
    })
}

fn sha256(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

/// A scratch directory holding `package.zip` and the `dest` directory.
struct Scratch {
    dir: TempDir,
}

impl Scratch {
    fn new() -> Self {
        let scratch = Scratch {
            dir: tempfile::tempdir().unwrap(),
        };
        fs::create_dir(scratch.dest()).unwrap();
        scratch
    }

    fn zip_path(&self) -> PathBuf {
        self.dir.path().join("package.zip")
    }

    fn dest(&self) -> PathBuf {
        self.dir.path().join("dest")
    }

    fn extract(&self, archive: &[u8]) -> Result<Vec<ExtractedFile>, ExtractError> {
        self.extract_with(archive, &ExtractLimits::default())
    }

    /// Extracts with [`extract_package`] and checks the streaming
    /// unpacker against it on the same bytes: it must decline whatever
    /// is refused, and make exactly the same tree of whatever it takes.
    fn extract_with(
        &self,
        archive: &[u8],
        limits: &ExtractLimits,
    ) -> Result<Vec<ExtractedFile>, ExtractError> {
        fs::write(self.zip_path(), archive).unwrap();
        let extracted = extract_package(&self.zip_path(), &self.dest(), TYPE, limits);
        let streamed = Streamed::unpack(archive, limits);
        if let (Ok(files), Ok(streamed_files)) = (&extracted, &streamed.files) {
            assert_eq!(files, streamed_files);
            assert_eq!(tree(&self.dest()), tree(&streamed.dest()));
        }
        // A write error comes from what a test planted in `dest`, not
        // from the archive.
        if let Err(err) = &extracted
            && !matches!(err, ExtractError::Write { .. })
        {
            assert!(
                streamed.files.is_err(),
                "the streaming unpacker took an archive refused with: {err}"
            );
        }
        self.assert_hashed_alike(archive, limits, &extracted, &streamed.files);
        extracted
    }

    /// Hashing a package, from a file or as it streams, gives what
    /// unpacking it gives (the same files and digests, the same
    /// refusal, the same declines) and writes nothing at all.
    fn assert_hashed_alike(
        &self,
        archive: &[u8],
        limits: &ExtractLimits,
        extracted: &Result<Vec<ExtractedFile>, ExtractError>,
        streamed: &Result<Vec<ExtractedFile>, Declined>,
    ) {
        let before = paths(self.dir.path());
        let hashed = hash_package(&self.zip_path(), TYPE, limits);
        match (extracted, &hashed) {
            (Ok(files), Ok(hashed)) => assert_eq!(files, hashed),
            (Err(ExtractError::Write { .. }), Ok(_)) => {}
            (Err(err), Err(hashed)) => assert_eq!(err.to_string(), hashed.to_string()),
            (extracted, hashed) => panic!("extracted {extracted:?}, hashed {hashed:?}"),
        }
        let hashed_stream = hash_stream(&mut in_pieces(archive), TYPE, limits);
        assert_eq!(&hashed_stream, streamed);
        assert_eq!(paths(self.dir.path()), before, "hashing wrote files");
    }

    /// Every path in the scratch dir other than the archive is in `dest`.
    fn assert_nothing_outside_dest(&self) {
        let mut stack = vec![self.dir.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                assert!(
                    path == self.zip_path() || path.starts_with(self.dest()),
                    "unexpected {}",
                    path.display()
                );
                if fs::symlink_metadata(&path).unwrap().is_dir() {
                    stack.push(path);
                }
            }
        }
    }

    fn assert_dest_empty(&self) {
        assert_eq!(fs::read_dir(self.dest()).unwrap().count(), 0);
    }

    fn mode(&self, name: &str) -> u32 {
        fs::symlink_metadata(self.dest().join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }
}

/// The streaming unpacker's result on an archive, in a scratch
/// directory of its own.
struct Streamed {
    dir: TempDir,
    files: Result<Vec<ExtractedFile>, Declined>,
}

impl Streamed {
    fn unpack(archive: &[u8], limits: &ExtractLimits) -> Streamed {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("dest");
        fs::create_dir(&dest).unwrap();
        let files = unpack_stream(&mut in_pieces(archive), &dest, TYPE, limits);
        let top: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(top, ["dest"], "the streaming unpacker wrote outside dest");
        Streamed { dir, files }
    }

    fn dest(&self) -> PathBuf {
        self.dir.path().join("dest")
    }
}

/// The archive in pieces of changing sizes, so that headers and data
/// are split across them as a network splits a download.
fn in_pieces(archive: &[u8]) -> impl Iterator<Item = bytes::Bytes> {
    let mut pieces = Vec::new();
    let mut rest = archive;
    for len in [1, 3, 29, 4103].iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, after) = rest.split_at((*len).min(rest.len()));
        pieces.push(bytes::Bytes::copy_from_slice(piece));
        rest = after;
    }
    pieces.into_iter()
}

/// Every path below `dir`, links not followed.
fn paths(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if fs::symlink_metadata(&path).unwrap().is_dir() {
                stack.push(path.clone());
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

/// Every path below `dir` with its kind, mode and content.
fn tree(dir: &Path) -> Vec<(PathBuf, u32, Option<Vec<u8>>)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            assert!(meta.is_dir() || meta.is_file(), "{}", path.display());
            let content = meta.is_file().then(|| fs::read(&path).unwrap());
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let relative = path.strip_prefix(dir).unwrap().to_path_buf();
            found.push((relative, meta.permissions().mode() & 0o7777, content));
        }
    }
    found.sort();
    found
}

/// Extracts an archive that must be refused before anything is written,
/// and returns the error message.
fn refused(archive: &[u8]) -> String {
    refused_with(archive, &ExtractLimits::default())
}

fn refused_with(archive: &[u8], limits: &ExtractLimits) -> String {
    let scratch = Scratch::new();
    let err = scratch.extract_with(archive, limits).unwrap_err();
    scratch.assert_nothing_outside_dest();
    scratch.assert_dest_empty();
    err.to_string()
}

/// Extracts an archive that may fail part-way (the caller then deletes
/// `dest`), and returns the error message.
fn failed_while_writing(archive: &[u8], limits: &ExtractLimits) -> String {
    let scratch = Scratch::new();
    let err = scratch.extract_with(archive, limits).unwrap_err();
    scratch.assert_nothing_outside_dest();
    err.to_string()
}

fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut count = 0;
    let mut at = 0;
    while let Some(found) = bytes[at..].windows(from.len()).position(|w| w == from) {
        let start = at + found;
        bytes[start..start + to.len()].copy_from_slice(to);
        at = start + to.len();
        count += 1;
    }
    count
}

fn find(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
}

const LOCAL_HEADER: &[u8] = b"PK\x03\x04";
const CENTRAL_HEADER: &[u8] = b"PK\x01\x02";

fn set_u16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

fn set_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn get_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

/// Offsets of the first entry's local and central headers.
fn first_headers(bytes: &[u8]) -> (usize, usize) {
    (find(bytes, LOCAL_HEADER), find(bytes, CENTRAL_HEADER))
}

/// Go's dirhash Hash1 over the extracted files, as `h1:` is defined.
fn h1(files: &[ExtractedFile]) -> String {
    let mut summary = String::new();
    for file in files {
        summary.push_str(&format!("{}  {}\n", hex::encode(file.sha256), file.name));
    }
    let digest = Sha256::digest(summary.as_bytes());
    format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

// ---- benign archives install exactly ----

#[test]
fn plain_package_installs_with_digests_and_normalised_modes() {
    let archive = build(|w| {
        add(
            w,
            "README.md",
            README_DATA,
            options().unix_permissions(0o600),
        );
        add_exe(w);
    });
    let scratch = Scratch::new();
    let files = scratch.extract(&archive).unwrap();
    assert_eq!(
        files,
        vec![
            ExtractedFile {
                name: "README.md".into(),
                sha256: sha256(README_DATA),
                size: README_DATA.len() as u64,
            },
            ExtractedFile {
                name: EXE.into(),
                sha256: sha256(EXE_DATA),
                size: EXE_DATA.len() as u64,
            },
        ]
    );
    assert_eq!(fs::read(scratch.dest().join(EXE)).unwrap(), EXE_DATA);
    assert_eq!(
        fs::read(scratch.dest().join("README.md")).unwrap(),
        README_DATA
    );
    assert_eq!(scratch.mode(EXE), 0o755);
    assert_eq!(scratch.mode("README.md"), 0o644);
    assert_eq!(
        find_executable(&scratch.dest(), TYPE).unwrap(),
        scratch.dest().join(EXE)
    );
}

#[test]
fn nested_and_explicit_directories_install() {
    let archive = build(|w| {
        add_exe(w);
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
        w.add_directory("empty/", options()).unwrap();
    });
    let scratch = Scratch::new();
    let files = scratch.extract(&archive).unwrap();
    let names: Vec<_> = files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["docs/guides/intro.md", "implied/deeper/tool.sh", EXE]
    );
    assert_eq!(files[0].sha256, sha256(b"intro\n"));
    assert_eq!(
        fs::read(scratch.dest().join("implied/deeper/tool.sh")).unwrap(),
        b"#!/bin/sh\n"
    );
    for dir in ["docs", "docs/guides", "implied", "implied/deeper", "empty"] {
        assert_eq!(scratch.mode(dir), 0o755, "{dir}");
    }
    assert_eq!(scratch.mode("docs/guides/intro.md"), 0o644);
    assert_eq!(scratch.mode("implied/deeper/tool.sh"), 0o755);
}

#[test]
fn directory_entry_after_its_files_installs() {
    let archive = build(|w| {
        add_exe(w);
        add(w, "docs/a.md", b"a", options());
        w.add_directory("docs/", options()).unwrap();
    });
    let scratch = Scratch::new();
    scratch.extract(&archive).unwrap();
    assert_eq!(fs::read(scratch.dest().join("docs/a.md")).unwrap(), b"a");
}

#[test]
fn zip64_entries_install() {
    let archive = build(|w| {
        add(
            w,
            EXE,
            EXE_DATA,
            options().large_file(true).unix_permissions(0o755),
        );
        add(w, "README", README_DATA, options().large_file(true));
    });
    let (local, _) = first_headers(&archive);
    assert_eq!(
        archive[local + 4],
        45,
        "entry should need zip64 (version 4.5)"
    );
    let scratch = Scratch::new();
    let files = scratch.extract(&archive).unwrap();
    assert_eq!(files[1].sha256, sha256(EXE_DATA));
    assert_eq!(
        fs::read(scratch.dest().join("README")).unwrap(),
        README_DATA
    );
}

#[test]
fn data_descriptor_entries_install() {
    let mut writer = ZipWriter::new_stream(Vec::new());
    add(
        &mut writer,
        EXE,
        EXE_DATA,
        options().unix_permissions(0o755),
    );
    add(&mut writer, "README", README_DATA, options());
    let archive = writer.finish().unwrap().into_inner();
    let (local, _) = first_headers(&archive);
    assert_ne!(
        archive[local + 6] & 0x08,
        0,
        "entry should use a data descriptor"
    );
    let scratch = Scratch::new();
    let files = scratch.extract(&archive).unwrap();
    assert_eq!(files[0].sha256, sha256(README_DATA));
    assert_eq!(fs::read(scratch.dest().join(EXE)).unwrap(), EXE_DATA);
    assert_eq!(scratch.mode(EXE), 0o755);
}

#[test]
fn stored_entries_install() {
    let stored = options().compression_method(CompressionMethod::Stored);
    let archive = build(|w| {
        add(w, EXE, EXE_DATA, stored.unix_permissions(0o755));
        add(w, "empty", b"", stored);
    });
    let (local, _) = first_headers(&archive);
    assert_eq!(archive[local + 8], 0, "entry should be stored");
    let scratch = Scratch::new();
    let files = scratch.extract(&archive).unwrap();
    assert_eq!(files[0].sha256, sha256(b""));
    assert_eq!(files[0].size, 0);
    assert_eq!(fs::read(scratch.dest().join(EXE)).unwrap(), EXE_DATA);
}

#[test]
fn windows_made_archive_gets_exec_bit_on_the_provider_only() {
    let dos = options().system(System::Dos);
    let archive = build(|w| {
        add(w, EXE, EXE_DATA, dos);
        add(w, "helper.exe", b"MZ", dos);
    });
    let scratch = Scratch::new();
    scratch.extract(&archive).unwrap();
    assert_eq!(scratch.mode(EXE), 0o755);
    assert_eq!(scratch.mode("helper.exe"), 0o644);
}

#[test]
fn special_mode_bits_are_dropped() {
    let archive = build(|w| {
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
            b"x",
            options().external_attributes(0o101_775 << 16),
        );
        add(
            w,
            "private",
            b"x",
            options().external_attributes(0o100_400 << 16),
        );
        add(w, "no-mode", b"x", options().external_attributes(0));
    });
    let scratch = Scratch::new();
    scratch.extract(&archive).unwrap();
    assert_eq!(scratch.mode(EXE), 0o755);
    assert_eq!(scratch.mode("shared"), 0o644);
    assert_eq!(scratch.mode("sticky"), 0o755);
    assert_eq!(scratch.mode("private"), 0o644);
    assert_eq!(scratch.mode("no-mode"), 0o644);
}

#[test]
fn infozip_fixture_reproduces_its_recorded_h1() {
    let archive =
        fs::read("testdata/extract/infozip-terraform-provider-null_2.1.0_linux_amd64.zip").unwrap();
    let scratch = Scratch::new();
    let files = scratch.extract(&archive).unwrap();
    assert_eq!(
        h1(&files),
        "h1:qjsREM4DqEWECD43FcPqddZ9oxCG+IaMTxvWPciS05g="
    );
    assert_eq!(scratch.mode("terraform-provider-null"), 0o755);
}

#[test]
fn go_made_fixture_passes_header_checks() {
    let archive = fs::read("testdata/extract/go-sample_0.1.0_darwin_amd64.zip").unwrap();
    let scratch = Scratch::new();
    let err = scratch.extract(&archive).unwrap_err();
    assert!(
        matches!(err, ExtractError::ExecutableNotFound { .. }),
        "{err}"
    );
}

#[test]
fn ordinary_archives_unpack_while_streaming() {
    let stored = options().compression_method(CompressionMethod::Stored);
    let archives = [
        package_with("README"),
        package_with("docs/nested/README"),
        build(|w| {
            add(w, EXE, EXE_DATA, stored.unix_permissions(0o755));
            add(w, "empty", b"", stored);
        }),
        build(|w| {
            w.add_directory("docs/", options()).unwrap();
            add_exe(w);
            add(w, "docs/README", README_DATA, options());
        }),
        fs::read("testdata/extract/infozip-terraform-provider-null_2.1.0_linux_amd64.zip").unwrap(),
        // Sizes after the data, as Go's archive/zip writes them.
        {
            let mut writer = ZipWriter::new_stream(Vec::new());
            add_exe(&mut writer);
            add(&mut writer, "README", README_DATA, options());
            writer.finish().unwrap().into_inner()
        },
        build(|w| {
            add_exe(w);
            for i in 0..500 {
                add(w, &format!("docs/{}/f{i}", i % 7), README_DATA, options());
            }
        }),
    ];
    for archive in archives {
        let scratch = Scratch::new();
        let files = scratch.extract(&archive).unwrap();
        let streamed = Streamed::unpack(&archive, &ExtractLimits::default());
        assert_eq!(streamed.files.as_ref(), Ok(&files));
    }
}

#[test]
fn archives_a_front_reader_cannot_follow_are_declined_while_streaming() {
    let stored = options().compression_method(CompressionMethod::Stored);
    let mut writer = ZipWriter::new_stream(Vec::new());
    add(&mut writer, EXE, EXE_DATA, stored.unix_permissions(0o755));
    let stored_with_size_after = writer.finish().unwrap().into_inner();
    let zip64 = build(|w| {
        add_exe(w);
        add(w, "README", README_DATA, options().large_file(true));
    });
    let mut prefixed = b"#!/bin/sh\nexit 0\n".to_vec();
    prefixed.extend(package_with("README"));
    for archive in [stored_with_size_after, zip64, prefixed] {
        let streamed = Streamed::unpack(&archive, &ExtractLimits::default());
        assert!(streamed.files.is_err());
        Scratch::new().extract(&archive).unwrap();
    }
}

#[test]
fn a_corrupt_entry_is_declined_while_streaming() {
    let stored = options().compression_method(CompressionMethod::Stored);
    let mut archive = build(|w| {
        add_exe(w);
        add(w, "README", README_DATA, stored);
    });
    let at = find(&archive, README_DATA);
    archive[at] ^= 1;
    let streamed = Streamed::unpack(&archive, &ExtractLimits::default());
    assert!(streamed.files.is_err());
    assert!(Scratch::new().extract(&archive).is_err());
}
