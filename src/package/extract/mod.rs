//! The one code path that turns a provider package archive into files on disk.
//!
//! Terraform's extractor (go-getter's `ZipDecompressor`) trusts the archive:
//! it makes absolute names relative, turns symlink entries into files, copies
//! modes verbatim and has no size limits. Every package tfinstall installs
//! (downloaded, from a mirror or from a local archive) passes through here
//! instead, so this is where a hostile or broken archive must stop. The
//! policy, decided once for every caller:
//!
//! * Names must be plain relative paths that mean the same thing on every
//!   operating system, so that no entry can land outside the package directory
//!   and the installed tree (and with it the `h1:` hash) is the same
//!   everywhere. That rules out `..`, `.` and empty components, absolute and
//!   drive-letter paths, backslashes, `:` (a drive or alternate-data-stream
//!   separator on Windows), NUL bytes, non-UTF-8 bytes and over-long names.
//! * Two entries may not land on the same path. Names are compared ignoring
//!   letter case, because the default file systems of macOS and Windows would
//!   silently merge `README` and `readme`; the fold is Unicode lowercasing,
//!   which is close to but not exactly what those file systems do.
//! * Local and central headers must agree. The `zip` crate checks names,
//!   compression methods, flags, times, sizes and CRCs of both copies, and
//!   rejects overlapping entries and local headers missing from the central
//!   directory; without that, another zip reader could see a different package
//!   than the one we verified and hashed.
//! * Only regular files and directories are ever created. Symlink entries are
//!   rejected rather than created or rewritten: real provider packages never
//!   contain links, and a link is the classic way to steer a later write
//!   outside the package. Device, FIFO and socket entries are rejected too.
//! * Modes are normalised: 0755 for directories, for files with any execute
//!   bit and for the provider executable (Windows-made archives carry no Unix
//!   mode, and the plugin must still be runnable); 0644 for everything else.
//!   Setuid, setgid, sticky and group/world-write bits never reach the disk.
//! * Size, entry-count and compression-ratio limits are enforced on the bytes
//!   actually inflated, counted while streaming, because headers can lie.
//! * Every file is inflated, hashed (SHA-256 for `h1:`, CRC-32 for integrity)
//!   and written in one streaming pass, so a package is never held in memory
//!   and never re-read to compute its hash.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use zip::result::ZipError;
use zip::{ZipArchive, ZipReadOptions};

mod error;
mod limits;
mod module;
mod names;
mod read;
mod stream;
mod write;

pub use error::ExtractError;
use error::{not_a_zip_hint, zip_error_detail};
pub use limits::ExtractLimits;
pub use module::{ArchiveFormat, extract_module_archive};
pub use names::NameProblem;
use read::{EntryKind, plan_entries};
pub use stream::{ArchiveHash, Chunks, Declined, hash_stream, unpack_stream};
use write::{COPY_BUFFER_BYTES, PackageWriter};

/// One regular file written by [`extract_package`], with what `h1:` needs so
/// the installed tree never has to be read back to be hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedFile {
    /// Path relative to the package directory, components joined with `/`.
    pub name: String,
    pub sha256: [u8; 32],
    pub size: u64,
}

/// Extracts the provider package `zip` into `dest` and returns every regular
/// file written, sorted byte-wise by name (the order `h1:` hashes them in).
///
/// `dest` must be a fresh, empty directory that the caller renames into place
/// on success and deletes on error, so a failure part-way leaves partial
/// output behind for the caller to remove. Every archive-level and per-name
/// check runs before the first byte is written; only corrupt data, limit
/// overruns and I/O errors can stop extraction midway. Nothing is ever written
/// outside `dest`: every file and directory is created new, so a link planted
/// in `dest` is never followed.
pub fn extract_package(
    zip: &Path,
    dest: &Path,
    provider_type: &str,
    limits: &ExtractLimits,
) -> Result<Vec<ExtractedFile>, ExtractError> {
    read_package(zip, Some(dest), Some(provider_type), limits)
}

/// The files [`extract_package`] would write for `zip`, with the same checks
/// and the same verdict, computed without writing anything: for the `h1:` of
/// a package that is not installed here (another platform's, for the lock
/// file), when its download could not be hashed as it arrived.
pub fn hash_package(
    zip: &Path,
    provider_type: &str,
    limits: &ExtractLimits,
) -> Result<Vec<ExtractedFile>, ExtractError> {
    read_package(zip, None, Some(provider_type), limits)
}

/// [`extract_package`] into `dest`, or [`hash_package`] without one; with
/// no `provider_type`, a module package, which has no executable to find.
fn read_package(
    zip: &Path,
    dest: Option<&Path>,
    provider_type: Option<&str>,
    limits: &ExtractLimits,
) -> Result<Vec<ExtractedFile>, ExtractError> {
    let invalid = |err: ZipError| ExtractError::InvalidArchive {
        path: zip.to_path_buf(),
        detail: zip_error_detail(err),
    };
    let file = File::open(zip).map_err(|source| ExtractError::Open {
        path: zip.to_path_buf(),
        source,
    })?;
    let mut archive =
        ZipArchive::new(BufReader::with_capacity(COPY_BUFFER_BYTES, file)).map_err(|err| {
            ExtractError::InvalidArchive {
                path: zip.to_path_buf(),
                detail: format!("{}{}", zip_error_detail(err), not_a_zip_hint(zip)),
            }
        })?;
    if archive.is_empty() {
        return Err(ExtractError::EmptyArchive(zip.to_path_buf()));
    }
    let count = u64::try_from(archive.len()).unwrap_or(u64::MAX);
    if count > limits.max_entries {
        return Err(ExtractError::TooManyEntries {
            count,
            limit: limits.max_entries,
        });
    }
    if archive.has_duplicate_names() {
        return Err(ExtractError::DuplicateEntries);
    }
    archive.validate_header_consistency().map_err(invalid)?;
    let plan = plan_entries(&archive, provider_type)?;

    let mut writer = PackageWriter {
        dest,
        limits,
        created_dirs: HashSet::new(),
        inflated_total: 0,
    };
    let mut files = Vec::new();
    for entry in &plan {
        match entry.kind {
            EntryKind::Directory => writer.ensure_dir(&entry.path)?,
            EntryKind::File { mode } => {
                // The CRC is checked here rather than by the zip crate so that
                // a mismatch gets its own error instead of a generic I/O one.
                let options = ZipReadOptions::new().ignore_crc32(true);
                let data = archive
                    .by_index_with_options(entry.index, options)
                    .map_err(|err| ExtractError::CorruptEntry {
                        name: entry.name.clone(),
                        detail: zip_error_detail(err),
                    })?;
                files.push(writer.write_file(entry, mode, data)?);
            }
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// Finds the provider executable in an unpacked package directory, by the
/// rules of Terraform's `CachedProvider.ExecutableFile`
/// (`internal/providercache/cached_provider.go`): the first non-directory
/// entry, in byte-wise name order, whose name is `terraform-provider-TYPE` or
/// continues it with `_` or `.`. Entries are not followed if they are links
/// (Terraform uses Lstat).
pub fn find_executable(dir: &Path, provider_type: &str) -> Result<PathBuf, ExtractError> {
    let read_err = |source| ExtractError::ReadPackageDir { source };
    let mut found: Option<std::ffi::OsString> = None;
    for entry in fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let name = entry.file_name();
        if !is_executable_name(name.as_encoded_bytes(), provider_type) {
            continue;
        }
        if entry.file_type().map_err(read_err)?.is_dir() {
            continue;
        }
        if found
            .as_ref()
            .is_none_or(|best| name.as_encoded_bytes() < best.as_encoded_bytes())
        {
            found = Some(name);
        }
    }
    found
        .map(|name| dir.join(name))
        .ok_or_else(|| ExtractError::ExecutableNotFound {
            provider_type: provider_type.to_owned(),
        })
}

fn is_executable_name(name: &[u8], provider_type: &str) -> bool {
    let prefix = format!("terraform-provider-{provider_type}");
    name.strip_prefix(prefix.as_bytes())
        .is_some_and(|rest| matches!(rest.first(), None | Some(b'_' | b'.')))
}

#[cfg(all(test, unix))]
mod tests;
