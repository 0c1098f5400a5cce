//! Reading the zip's entries: every entry's metadata checked, and what
//! it becomes decided, before anything is inflated.

use std::io::{Read, Seek};

use zip::{CompressionMethod, ZipArchive};

use super::error::{ExtractError, zip_error_detail};
use super::is_executable_name;
use super::names::{PathClaims, validate_name};

pub(super) const S_IFMT: u32 = 0o170_000;
pub(super) const S_IFREG: u32 = 0o100_000;
pub(super) const S_IFDIR: u32 = 0o040_000;
pub(super) const S_IFLNK: u32 = 0o120_000;

pub(super) struct PlannedEntry {
    pub(super) index: usize,
    /// The entry name as stored, for messages.
    pub(super) name: String,
    /// The validated relative path, without a directory's trailing `/`.
    pub(super) path: String,
    pub(super) kind: EntryKind,
    pub(super) compressed_size: u64,
    pub(super) declared_size: u64,
    pub(super) crc32: u32,
}

#[derive(Clone, Copy)]
pub(super) enum EntryKind {
    Directory,
    File { mode: u32 },
}

/// Checks every entry's metadata and decides what it becomes, so that an
/// archive with one bad name is refused before anything is inflated.
pub(super) fn plan_entries<R: Read + Seek>(
    archive: &ZipArchive<R>,
    provider_type: Option<&str>,
) -> Result<Vec<PlannedEntry>, ExtractError> {
    let mut claims = PathClaims::default();
    let mut plan = Vec::with_capacity(archive.len());
    let mut has_executable = false;
    for index in 0..archive.len() {
        let entry = archive
            .by_index_data(index)
            .map_err(|err| ExtractError::CorruptEntry {
                name: format!("#{index}"),
                detail: zip_error_detail(err),
            })?;
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        let (path, named_as_dir) =
            validate_name(entry.name_raw()).map_err(|problem| ExtractError::UnsafeName {
                name: name.clone(),
                problem,
            })?;
        let unix_mode = entry.unix_mode();
        let file_type = unix_mode.map_or(0, |mode| mode & S_IFMT);
        match file_type {
            0 | S_IFREG | S_IFDIR => {}
            S_IFLNK if provider_type.is_none() => return Err(ExtractError::ZipLink { name }),
            S_IFLNK => return Err(ExtractError::Symlink { name }),
            _ => {
                return Err(ExtractError::SpecialFile {
                    name,
                    mode: unix_mode.unwrap_or_default(),
                });
            }
        }
        let kind = if named_as_dir || file_type == S_IFDIR {
            if entry.size() != 0 {
                return Err(ExtractError::DirectoryWithData {
                    name,
                    size: entry.size(),
                });
            }
            EntryKind::Directory
        } else {
            if entry.encrypted() {
                return Err(ExtractError::Encrypted { name });
            }
            let method = entry.compression();
            if !matches!(
                method,
                CompressionMethod::Stored | CompressionMethod::Deflated
            ) {
                return Err(ExtractError::UnsupportedCompression {
                    name,
                    method: method.to_string(),
                });
            }
            let is_executable = !path.contains('/')
                && provider_type.is_some_and(|name| is_executable_name(path.as_bytes(), name));
            has_executable |= is_executable;
            let has_exec_bit = unix_mode.is_some_and(|mode| mode & 0o111 != 0);
            let mode = if is_executable || has_exec_bit {
                0o755
            } else {
                0o644
            };
            EntryKind::File { mode }
        };
        claims.claim_entry(path, &name, matches!(kind, EntryKind::Directory))?;
        plan.push(PlannedEntry {
            index,
            path: path.to_owned(),
            name,
            kind,
            compressed_size: entry.compressed_size(),
            declared_size: entry.size(),
            crc32: entry.crc32(),
        });
    }
    if let Some(provider_type) = provider_type
        && !has_executable
    {
        return Err(ExtractError::ExecutableNotFound {
            provider_type: provider_type.to_owned(),
        });
    }
    Ok(plan)
}
