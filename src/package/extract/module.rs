//! Module packages: the archives go-getter unpacks for `terraform init`
//! (zip, and tar plain or compressed with gzip, bzip2 or xz), held to the
//! provider packages' rules. Names are checked as a zip's are, the size,
//! entry-count and compression-ratio limits are the same, files and
//! directories are created new (never through a link) and modes are
//! normalised. What differs: a module need not hold an executable, and a
//! tar's symbolic links are kept when they stay inside the package, as
//! module repositories use them for shared files. A link is refused when
//! its target is absolute, climbs out of the package, or runs through
//! another link of the archive (whose own target would decide where it
//! leads); links are made after every file, so no write goes through one.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use super::{
    COPY_BUFFER_BYTES, EntryReader, ExtractError, ExtractLimits, ExtractedFile, PackageWriter,
    PathClaims, read_package, validate_name,
};

/// How a module package archive is packed: the formats go-getter unpacks
/// into a directory, by URL suffix or `?archive=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveFormat {
    Zip,
    Tar,
    TarGz,
    TarBz2,
    TarXz,
}

impl ArchiveFormat {
    /// The format a go-getter `?archive=` value or URL suffix names (`zip`,
    /// `tar`, `tar.gz`/`tgz`, `tar.bz2`/`tbz2`, `tar.xz`/`txz`).
    pub fn from_name(name: &str) -> Option<ArchiveFormat> {
        Some(match name {
            "zip" => ArchiveFormat::Zip,
            "tar" => ArchiveFormat::Tar,
            "tar.gz" | "tgz" => ArchiveFormat::TarGz,
            "tar.bz2" | "tbz2" => ArchiveFormat::TarBz2,
            "tar.xz" | "txz" => ArchiveFormat::TarXz,
            _ => return None,
        })
    }

    /// The format a URL path's ending names, as go-getter matches them
    /// (the longest suffix first, so `.tar.gz` is not taken for `.gz`).
    pub fn from_path(path: &str) -> Option<ArchiveFormat> {
        const SUFFIXES: [&str; 8] = [
            "tar.bz2", "tar.gz", "tar.xz", "tbz2", "tgz", "txz", "zip", "tar",
        ];
        SUFFIXES
            .iter()
            .find(|suffix| {
                path.len() > suffix.len()
                    && path.ends_with(*suffix)
                    && path.as_bytes()[path.len() - suffix.len() - 1] == b'.'
            })
            .and_then(|suffix| ArchiveFormat::from_name(suffix))
    }

    /// The name `?archive=` uses for it.
    pub fn name(self) -> &'static str {
        match self {
            ArchiveFormat::Zip => "zip",
            ArchiveFormat::Tar => "tar",
            ArchiveFormat::TarGz => "tar.gz",
            ArchiveFormat::TarBz2 => "tar.bz2",
            ArchiveFormat::TarXz => "tar.xz",
        }
    }
}

/// Unpacks the module package `archive` into `dest`, a directory that must
/// not exist yet (the caller removes it after an error), and returns the
/// regular files written, sorted by name.
pub fn extract_module_archive(
    archive: &Path,
    format: ArchiveFormat,
    dest: &Path,
    limits: &ExtractLimits,
) -> Result<Vec<ExtractedFile>, ExtractError> {
    if format == ArchiveFormat::Zip {
        super::create_new_dir(dest)?;
        return read_package(archive, Some(dest), None, limits);
    }
    let file = File::open(archive).map_err(|source| ExtractError::Open {
        path: archive.to_path_buf(),
        source,
    })?;
    // Compressed bytes read so far: the denominator of the ratio limit.
    let consumed = Rc::new(Cell::new(0u64));
    let counted = Counted {
        inner: BufReader::with_capacity(COPY_BUFFER_BYTES, file),
        consumed: Rc::clone(&consumed),
    };
    let tar: Box<dyn Read> = match format {
        ArchiveFormat::Tar => Box::new(counted),
        ArchiveFormat::TarGz => Box::new(flate2::read::MultiGzDecoder::new(counted)),
        ArchiveFormat::TarBz2 => Box::new(bzip2::read::MultiBzDecoder::new(counted)),
        ArchiveFormat::TarXz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(counted)),
        ArchiveFormat::Zip => unreachable!("handled above"),
    };
    super::create_new_dir(dest)?;
    unpack_tar(tar, dest, limits, &consumed).map_err(|err| match err {
        ExtractError::InvalidArchive { detail, .. } => ExtractError::InvalidArchive {
            path: archive.to_path_buf(),
            detail,
        },
        other => other,
    })
}

/// A reader that counts the bytes taken from it.
struct Counted<R> {
    inner: R,
    consumed: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.consumed
            .set(self.consumed.get().saturating_add(read as u64));
        Ok(read)
    }
}

/// One tar entry's data, for [`PackageWriter::write_data`].
struct TarData<'a, R: Read>(tar::Entry<'a, R>);

impl<R: Read> Read for TarData<'_, R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.0.read(buffer)
    }
}

impl<R: Read> EntryReader for TarData<'_, R> {}

/// A symbolic link kept for after the files.
struct PendingLink {
    path: String,
    name: String,
    target: String,
}

fn unpack_tar(
    tar: Box<dyn Read>,
    dest: &Path,
    limits: &ExtractLimits,
    consumed: &Rc<Cell<u64>>,
) -> Result<Vec<ExtractedFile>, ExtractError> {
    let invalid = |err: io::Error| ExtractError::InvalidArchive {
        path: dest.to_path_buf(),
        detail: err.to_string(),
    };
    let mut archive = tar::Archive::new(tar);
    let mut writer = PackageWriter {
        dest: Some(dest),
        limits,
        created_dirs: Default::default(),
        inflated_total: 0,
    };
    let mut claims = PathClaims::default();
    let mut files = Vec::new();
    let mut links = Vec::new();
    let mut count: u64 = 0;
    for entry in archive.entries().map_err(invalid)? {
        let entry = entry.map_err(invalid)?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader
        ) {
            // Metadata, such as the commit id GitHub's tarballs carry.
            continue;
        }
        count += 1;
        if count > limits.max_entries {
            return Err(ExtractError::TooManyEntries {
                count,
                limit: limits.max_entries,
            });
        }
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8_lossy(&raw).into_owned();
        // A tar's names often start with `./`; they mean the same path.
        let mut stripped = raw.as_slice();
        while let Some(rest) = stripped.strip_prefix(b"./") {
            stripped = rest;
        }
        if stripped.is_empty() || stripped == b"." {
            // The package directory itself.
            continue;
        }
        let (path, named_as_dir) =
            validate_name(stripped).map_err(|problem| ExtractError::UnsafeName {
                name: name.clone(),
                problem,
            })?;
        let path = path.to_owned();
        match kind {
            tar::EntryType::Directory => {
                claims.claim_entry(&path, &name, true)?;
                writer.ensure_dir(&path)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous if !named_as_dir => {
                claims.claim_entry(&path, &name, false)?;
                let mode = match entry.header().mode() {
                    Ok(mode) if mode & 0o111 != 0 => 0o755,
                    _ => 0o644,
                };
                let size = entry.size();
                let counter = Rc::clone(consumed);
                let (file, out, _crc) = writer.write_data(
                    &path,
                    &name,
                    TarData(entry),
                    move || counter.get(),
                    Some(size),
                )?;
                if let Some(out) = &out {
                    super::set_file_mode(out, mode).map_err(|source| ExtractError::Write {
                        path: dest.join(&path),
                        source,
                    })?;
                }
                if file.size != size {
                    return Err(ExtractError::CorruptEntry {
                        name,
                        detail: format!(
                            "it holds {} bytes but its header declares {size}",
                            file.size
                        ),
                    });
                }
                files.push(file);
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|target| String::from_utf8_lossy(&target).into_owned())
                    .unwrap_or_default();
                claims.claim_entry(&path, &name, false)?;
                links.push(PendingLink { path, name, target });
            }
            tar::EntryType::Link => return Err(ExtractError::HardLink { name }),
            _ => {
                return Err(ExtractError::SpecialFile {
                    name,
                    mode: entry.header().mode().unwrap_or_default(),
                });
            }
        }
    }
    let link_paths: std::collections::HashSet<&str> =
        links.iter().map(|link| link.path.as_str()).collect();
    for link in &links {
        check_link(link, &link_paths)?;
    }
    for link in &links {
        if let Some((parent, _)) = link.path.rsplit_once('/') {
            writer.ensure_dir(parent)?;
        }
        let full = dest.join(&link.path);
        make_symlink(&link.target, &full)
            .map_err(|source| ExtractError::Write { path: full, source })?;
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// Whether `link`'s target is a relative path that, followed from the
/// link's directory, stays inside the package without passing through a
/// link of the archive. Every directory on the way is then a real one the
/// extraction made, so where the link leads is what its text says.
fn check_link(
    link: &PendingLink,
    link_paths: &std::collections::HashSet<&str>,
) -> Result<(), ExtractError> {
    let refuse = || ExtractError::LinkOutOfPackage {
        name: link.name.clone(),
        target: link.target.clone(),
    };
    let target = &link.target;
    if target.is_empty() || target.starts_with('/') || target.contains(['\\', '\0', ':']) {
        return Err(refuse());
    }
    let mut at: Vec<&str> = link.path.split('/').collect();
    at.pop();
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                at.pop().ok_or_else(refuse)?;
            }
            name => {
                at.push(name);
                if link_paths.contains(at.join("/").as_str()) {
                    return Err(refuse());
                }
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
fn make_symlink(target: &str, path: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, path)
}

#[cfg(not(unix))]
fn make_symlink(_target: &str, path: &Path) -> io::Result<()> {
    Err(io::Error::other(format!(
        "cannot create the symbolic link {} on this system",
        path.display()
    )))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A name with a file's content, a link's target, or neither for a
    /// directory.
    type TarEntry<'a> = (&'a str, Option<&'a [u8]>, Option<&'a str>);

    /// A tar (compressed as `format` asks) of regular files, directories
    /// and symbolic links, written with the tar crate's own builder.
    fn tar_of(entries: &[TarEntry<'_>], format: ArchiveFormat) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, data, link) in entries {
            let mut header = tar::Header::new_gnu();
            match (data, link) {
                (Some(data), _) => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_size(data.len() as u64);
                    header.set_mode(0o644);
                    builder.append_data(&mut header, name, *data).unwrap();
                }
                (None, Some(target)) => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_size(0);
                    header.set_mode(0o777);
                    builder.append_link(&mut header, name, target).unwrap();
                }
                (None, None) => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_size(0);
                    header.set_mode(0o755);
                    builder.append_data(&mut header, name, io::empty()).unwrap();
                }
            }
        }
        let tar = builder.into_inner().unwrap();
        compress(&tar, format)
    }

    fn compress(tar: &[u8], format: ArchiveFormat) -> Vec<u8> {
        use std::io::Write as _;
        match format {
            ArchiveFormat::Tar => tar.to_vec(),
            ArchiveFormat::TarGz => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(tar).unwrap();
                encoder.finish().unwrap()
            }
            ArchiveFormat::TarBz2 => {
                let mut encoder =
                    bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
                encoder.write_all(tar).unwrap();
                encoder.finish().unwrap()
            }
            ArchiveFormat::TarXz => {
                let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 6);
                encoder.write_all(tar).unwrap();
                encoder.finish().unwrap()
            }
            ArchiveFormat::Zip => unreachable!(),
        }
    }

    fn unpack(
        archive: &[u8],
        format: ArchiveFormat,
    ) -> (tempfile::TempDir, Result<Vec<ExtractedFile>, ExtractError>) {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("archive");
        std::fs::write(&path, archive).unwrap();
        let dest = scratch.path().join("package");
        let result = extract_module_archive(&path, format, &dest, &ExtractLimits::default());
        (scratch, result)
    }

    #[test]
    fn every_tar_format_unpacks_files_directories_and_links_inside() {
        for format in [
            ArchiveFormat::Tar,
            ArchiveFormat::TarGz,
            ArchiveFormat::TarBz2,
            ArchiveFormat::TarXz,
        ] {
            let archive = tar_of(
                &[
                    ("./main.tf", Some(b"variable \"a\" {}\n"), None),
                    ("modules/", None, None),
                    ("modules/sub/main.tf", Some(b"# sub\n"), None),
                    ("shared.tf", None, Some("modules/sub/main.tf")),
                    ("modules/up.tf", None, Some("../main.tf")),
                ],
                format,
            );
            let (scratch, result) = unpack(&archive, format);
            let files = result.unwrap_or_else(|err| panic!("{format:?}: {err}"));
            let names: Vec<&str> = files.iter().map(|file| file.name.as_str()).collect();
            assert_eq!(names, ["main.tf", "modules/sub/main.tf"], "{format:?}");
            let dest = scratch.path().join("package");
            assert_eq!(
                std::fs::read_to_string(dest.join("shared.tf")).unwrap(),
                "# sub\n"
            );
            assert_eq!(
                std::fs::read_link(dest.join("modules/up.tf")).unwrap(),
                Path::new("../main.tf")
            );
        }
    }

    #[test]
    fn links_that_leave_the_package_or_run_through_links_are_refused() {
        for (entries, what) in [
            (
                vec![("evil", None, Some("/etc/passwd"))],
                "an absolute link",
            ),
            (
                vec![("evil", None, Some("../outside"))],
                "a link that climbs out",
            ),
            (
                vec![("a/", None, None), ("a/b", None, Some("../../x"))],
                "a nested link that climbs out",
            ),
            (
                vec![("up", None, Some(".")), ("evil", None, Some("up/../x"))],
                "a link through a link",
            ),
        ] {
            let entries: Vec<TarEntry<'_>> = entries;
            let archive = tar_of(&entries, ArchiveFormat::TarGz);
            let (_scratch, result) = unpack(&archive, ArchiveFormat::TarGz);
            assert!(
                matches!(result, Err(ExtractError::LinkOutOfPackage { .. })),
                "{what}: {result:?}"
            );
        }
    }

    #[test]
    fn a_traversing_name_and_a_hard_link_are_refused() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(3);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        // The builder refuses `..` itself, so the name goes in by hand.
        header.as_old_mut().name[..13].copy_from_slice(b"../escaped.tf");
        header.set_cksum();
        builder.append(&header, &b"abc"[..]).unwrap();
        let archive = compress(&builder.into_inner().unwrap(), ArchiveFormat::TarGz);
        let (scratch, result) = unpack(&archive, ArchiveFormat::TarGz);
        assert!(
            matches!(result, Err(ExtractError::UnsafeName { .. })),
            "{result:?}"
        );
        assert!(!scratch.path().join("escaped.tf").exists());

        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Link);
        header.set_size(0);
        builder.append_link(&mut header, "hard", "main.tf").unwrap();
        let archive = builder.into_inner().unwrap();
        let (_scratch, result) = unpack(&archive, ArchiveFormat::Tar);
        assert!(
            matches!(result, Err(ExtractError::HardLink { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn a_tar_bomb_is_stopped_by_the_ratio_limit() {
        let zeros = vec![0u8; 64 << 20];
        let archive = tar_of(&[("zeros", Some(&zeros), None)], ArchiveFormat::TarGz);
        let (_scratch, result) = unpack(&archive, ArchiveFormat::TarGz);
        assert!(
            matches!(result, Err(ExtractError::RatioExceeded { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn archive_formats_are_named_as_go_getter_names_them() {
        assert_eq!(
            ArchiveFormat::from_path("/m/v1.tar.gz"),
            Some(ArchiveFormat::TarGz)
        );
        assert_eq!(
            ArchiveFormat::from_path("/m.tgz"),
            Some(ArchiveFormat::TarGz)
        );
        assert_eq!(ArchiveFormat::from_path("/m.zip"), Some(ArchiveFormat::Zip));
        assert_eq!(
            ArchiveFormat::from_path("/m.txz"),
            Some(ArchiveFormat::TarXz)
        );
        assert_eq!(ArchiveFormat::from_path("/zip"), None);
        assert_eq!(ArchiveFormat::from_path("/m"), None);
        assert_eq!(
            ArchiveFormat::from_name("tbz2"),
            Some(ArchiveFormat::TarBz2)
        );
    }
}
