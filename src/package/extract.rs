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

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use zip::result::ZipError;
use zip::{CompressionMethod, ZipArchive, ZipReadOptions};

use crate::sha256::Sha256Lane;

mod module;
mod stream;
pub use module::{ArchiveFormat, extract_module_archive};
pub use stream::{ArchiveHash, Chunks, Declined, hash_stream, unpack_stream};

/// An entry's inflated bytes, read by [`PackageWriter::write_data`].
trait EntryReader: Read {
    /// For a download unpacked as it arrives, the hash of the archive: the
    /// entry's bytes are hashed beside it, two lanes at once, on whichever
    /// thread hashes the file.
    fn archive_hash(&self) -> Option<ArchiveHash> {
        None
    }
}

impl<R: Read> EntryReader for zip::read::ZipFile<'_, R> {}

/// Longest single path component most file systems accept (ext4, APFS, NTFS).
const MAX_COMPONENT_BYTES: usize = 255;
/// Linux `PATH_MAX`; a longer relative name cannot be opened on Linux anyway.
const MAX_PATH_BYTES: usize = 4096;
/// Bytes an entry may inflate to before its compression ratio is judged: tiny
/// files of repeated bytes legitimately compress far better than 200:1, and
/// the ratio only matters once an entry is big enough to hurt.
const RATIO_GRACE_BYTES: u64 = 1 << 20;
/// Reads of the archive and writes of its files go in pieces this large: the
/// inflater hands out no more than its input buffer holds, and with the
/// default 8 KiB a 200 MB package took 25,000 reads and as many writes.
const COPY_BUFFER_BYTES: usize = 256 * 1024;
/// Entries declaring at least this size (or no size: a download's entry
/// whose sizes follow its data) may get a second thread once their first
/// buffer is done (see [`copy`]); below it a thread costs more than it
/// saves.
const PIPELINE_MIN_BYTES: u64 = 8 << 20;
/// The name of the thread that hashes and writes a large entry while the
/// one that started it inflates. Created by a download's unpacking thread,
/// it takes that thread's scheduling priority (Linux threads start with
/// their creator's nice value), so it yields to the network thread too.
const SECOND_THREAD_NAME: &str = "hash-and-write";

const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
const S_IFDIR: u32 = 0o040_000;
const S_IFLNK: u32 = 0o120_000;

/// Bounds on what one provider package may unpack to.
///
/// The defaults leave ample room for real packages while stopping zip bombs
/// long before they fill a disk:
/// * `max_total_bytes` 2 GiB: the largest provider today (aws) is about
///   180 MB zipped and 830 MB unpacked, so this allows more than twice that.
/// * `max_entries` 10 000: real packages hold one to five files (the binary,
///   a licence, a readme, a changelog).
/// * `max_ratio` 200: Go binaries deflate 3–5×, text 3–10×, while DEFLATE can
///   reach about 1 032×; 200 is more than 20 times the real worst case. It is
///   applied per entry once the entry passes 1 MiB inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractLimits {
    pub max_total_bytes: u64,
    pub max_entries: u64,
    pub max_ratio: u64,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        ExtractLimits {
            max_total_bytes: 2 << 30,
            max_entries: 10_000,
            max_ratio: 200,
        }
    }
}

/// One regular file written by [`extract_package`], with what `h1:` needs so
/// the installed tree never has to be read back to be hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedFile {
    /// Path relative to the package directory, components joined with `/`.
    pub name: String,
    pub sha256: [u8; 32],
    pub size: u64,
}

/// Why an entry name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameProblem {
    Empty,
    NotUtf8,
    Nul,
    Backslash,
    Absolute,
    Colon,
    DotDot,
    EmptyOrDotComponent,
    ComponentTooLong,
    PathTooLong,
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameProblem::Empty => f.write_str("the name is empty"),
            NameProblem::NotUtf8 => f.write_str("the name is not valid UTF-8"),
            NameProblem::Nul => f.write_str("the name contains a NUL byte"),
            NameProblem::Backslash => f.write_str(
                "the name contains a backslash, which Windows treats as a path separator",
            ),
            NameProblem::Absolute => f.write_str("the name is an absolute path"),
            NameProblem::Colon => f.write_str(
                "the name contains ':', which Windows treats as a drive or stream separator",
            ),
            NameProblem::DotDot => f.write_str(
                "the name has a \"..\" component, which would point outside the package directory",
            ),
            NameProblem::EmptyOrDotComponent => {
                f.write_str("the name has an empty or \".\" path component")
            }
            NameProblem::ComponentTooLong => write!(
                f,
                "a path component is longer than {MAX_COMPONENT_BYTES} bytes"
            ),
            NameProblem::PathTooLong => {
                write!(f, "the name is longer than {MAX_PATH_BYTES} bytes")
            }
        }
    }
}

/// Why a package could not be extracted or has no provider executable.
///
/// Entry names are shown quoted and escaped, since they come from the archive
/// and may hold control characters. The caller adds which provider it was.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("cannot open package archive {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("{} is not a valid zip archive: {detail}", path.display())]
    InvalidArchive { path: PathBuf, detail: String },
    #[error("empty archive: {}", .0.display())]
    EmptyArchive(PathBuf),
    #[error(
        "package archive has {count} entries, more than the limit of {limit}; if the package is genuine, raise the limit with -max-package-files"
    )]
    TooManyEntries { count: u64, limit: u64 },
    /// The zip crate indexes entries by name and keeps only one of each, so
    /// which name was repeated is no longer known.
    #[error("package archive has more than one entry with the same name")]
    DuplicateEntries,
    #[error("archive entry {name:?} is not allowed: {problem}")]
    UnsafeName { name: String, problem: NameProblem },
    #[error("archive entries {first:?} and {second:?} would both be written to the same path")]
    NameConflict { first: String, second: String },
    #[error(
        "archive entries {first:?} and {second:?} have paths that differ only in letter case; \
         they would collide on case-insensitive file systems such as those of macOS and Windows"
    )]
    CaseConflict { first: String, second: String },
    #[error(
        "archive entry {child:?} needs {file:?} to be a directory, but the archive also has a file named {file:?}"
    )]
    ParentIsFile { file: String, child: String },
    #[error(
        "archive entry {name:?} is a symbolic link; provider packages may contain only regular files and directories"
    )]
    Symlink { name: String },
    /// A module package's link that leaves it, is absolute, or passes
    /// through another link (whose target could lead anywhere).
    #[error(
        "archive entry {name:?} is a symbolic link to {target:?}, outside the package or through another link; a module package's links must point at a path inside it"
    )]
    LinkOutOfPackage { name: String, target: String },
    /// A module package's links are kept only from tar archives, where
    /// they are checked ([`module`]); a zip's are refused, as a provider
    /// package's are.
    #[error(
        "archive entry {name:?} is a symbolic link in a zip archive; tfinstall keeps a module package's links only from tar archives, so repack the module as a .tar.gz or without the link"
    )]
    ZipLink { name: String },
    #[error(
        "archive entry {name:?} is a hard link; module packages may contain only files, directories and symbolic links within the package"
    )]
    HardLink { name: String },
    #[error(
        "archive entry {name:?} is a special file (mode {mode:o}); provider packages may contain only regular files and directories"
    )]
    SpecialFile { name: String, mode: u32 },
    #[error("archive entry {name:?} is a directory but carries {size} bytes of data")]
    DirectoryWithData { name: String, size: u64 },
    #[error(
        "archive entry {name:?} uses compression method {method}; only stored and deflated entries are supported"
    )]
    UnsupportedCompression { name: String, method: String },
    #[error("archive entry {name:?} is encrypted; provider packages cannot be encrypted")]
    Encrypted { name: String },
    #[error("archive entry {name:?} is corrupt: {detail}")]
    CorruptEntry { name: String, detail: String },
    #[error(
        "archive entry {name:?} is corrupt: its CRC-32 is {actual:08x} but its header says {expected:08x}"
    )]
    CrcMismatch {
        name: String,
        expected: u32,
        actual: u32,
    },
    #[error(
        "package unpacks to more than {limit} bytes, the limit for one provider package; the archive may be a zip bomb (if the package is genuine, raise the limit with -max-package-size)"
    )]
    TooLarge { limit: u64 },
    #[error(
        "archive entry {name:?} inflates to more than {limit} times its compressed size; the archive may be a zip bomb (if the package is genuine, raise the limit with -max-compression-ratio)"
    )]
    RatioExceeded { name: String, limit: u64 },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error(
        "provider binary not found: could not find executable file starting with terraform-provider-{provider_type}"
    )]
    ExecutableNotFound { provider_type: String },
    #[error("provider binary not found: could not read package directory: {source}")]
    ReadPackageDir { source: io::Error },
}

impl ExtractError {
    /// Names the archive as the user knows it (its URL, say) instead of the
    /// temporary file it was downloaded to, which is gone by the time the
    /// message is read.
    pub fn shown_as(self, name: &Path) -> ExtractError {
        match self {
            ExtractError::Open { source, .. } => ExtractError::Open {
                path: name.to_path_buf(),
                source,
            },
            ExtractError::InvalidArchive { detail, .. } => ExtractError::InvalidArchive {
                path: name.to_path_buf(),
                detail,
            },
            ExtractError::EmptyArchive(_) => ExtractError::EmptyArchive(name.to_path_buf()),
            other => other,
        }
    }
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

/// The zip crate's message without its "invalid Zip archive" prefix, which
/// our own messages already say in words fit for the context.
fn zip_error_detail(err: ZipError) -> String {
    match err {
        // The zip crate's own text for a header cut short names its internal
        // types ("Unexpected end of zip::format::blocks::…").
        ZipError::InvalidArchive(detail) if detail.starts_with("Unexpected end of") => {
            "a header lies past the end of the archive (truncated or corrupt)".to_owned()
        }
        ZipError::Io(err) if err.kind() == io::ErrorKind::UnexpectedEof => {
            "a header lies past the end of the archive (truncated or corrupt)".to_owned()
        }
        ZipError::InvalidArchive(detail) => detail.into_owned(),
        ZipError::UnsupportedArchive(detail) => detail.to_owned(),
        ZipError::Io(err) => err.to_string(),
        other => other.to_string(),
    }
}

/// What a file that is not a zip at all probably is, for the one case users
/// meet in practice: a web server's or proxy's HTML page saved as the package.
fn not_a_zip_hint(zip: &Path) -> &'static str {
    let mut start = [0u8; 512];
    let read = File::open(zip)
        .and_then(|mut file| file.read(&mut start))
        .unwrap_or(0);
    let text = String::from_utf8_lossy(&start[..read]).to_ascii_lowercase();
    let text = text.trim_start();
    if text.starts_with("<!doctype html") || text.starts_with("<html") || text.starts_with("<?xml")
    {
        " (it is an HTML or XML page, probably an error page from a web server or proxy)"
    } else {
        ""
    }
}

fn is_executable_name(name: &[u8], provider_type: &str) -> bool {
    let prefix = format!("terraform-provider-{provider_type}");
    name.strip_prefix(prefix.as_bytes())
        .is_some_and(|rest| matches!(rest.first(), None | Some(b'_' | b'.')))
}

struct PlannedEntry {
    index: usize,
    /// The entry name as stored, for messages.
    name: String,
    /// The validated relative path, without a directory's trailing `/`.
    path: String,
    kind: EntryKind,
    compressed_size: u64,
    declared_size: u64,
    crc32: u32,
}

#[derive(Clone, Copy)]
enum EntryKind {
    Directory,
    File { mode: u32 },
}

/// Checks every entry's metadata and decides what it becomes, so that an
/// archive with one bad name is refused before anything is inflated.
fn plan_entries<R: Read + Seek>(
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

/// Returns the relative path an entry name denotes, without a directory's
/// trailing `/`, and whether the name marked a directory.
fn validate_name(raw: &[u8]) -> Result<(&str, bool), NameProblem> {
    if raw.is_empty() {
        return Err(NameProblem::Empty);
    }
    if raw.contains(&0) {
        return Err(NameProblem::Nul);
    }
    let name = std::str::from_utf8(raw).map_err(|_| NameProblem::NotUtf8)?;
    if name.contains('\\') {
        return Err(NameProblem::Backslash);
    }
    let has_drive_letter = matches!(raw, [letter, b':', ..] if letter.is_ascii_alphabetic());
    if name.starts_with('/') || has_drive_letter {
        return Err(NameProblem::Absolute);
    }
    if name.contains(':') {
        return Err(NameProblem::Colon);
    }
    if name.len() > MAX_PATH_BYTES {
        return Err(NameProblem::PathTooLong);
    }
    let (path, is_dir) = match name.strip_suffix('/') {
        Some(path) => (path, true),
        None => (name, false),
    };
    if path.split('/').any(|component| component == "..") {
        return Err(NameProblem::DotDot);
    }
    for component in path.split('/') {
        if component.is_empty() || component == "." {
            return Err(NameProblem::EmptyOrDotComponent);
        }
        if component.len() > MAX_COMPONENT_BYTES {
            return Err(NameProblem::ComponentTooLong);
        }
    }
    Ok((path, is_dir))
}

/// Which entry owns each path, keyed by the case-folded path.
#[derive(Default)]
struct PathClaims(HashMap<String, Claim>);

struct Claim {
    spelled: String,
    entry: String,
    kind: ClaimKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ClaimKind {
    File,
    ExplicitDir,
    ImplicitDir,
}

impl PathClaims {
    fn claim_entry(&mut self, path: &str, entry: &str, is_dir: bool) -> Result<(), ExtractError> {
        for (end, _) in path.match_indices('/') {
            self.claim(&path[..end], entry, ClaimKind::ImplicitDir)?;
        }
        let kind = if is_dir {
            ClaimKind::ExplicitDir
        } else {
            ClaimKind::File
        };
        self.claim(path, entry, kind)
    }

    fn claim(&mut self, path: &str, entry: &str, wanted: ClaimKind) -> Result<(), ExtractError> {
        let existing = match self.0.entry(path.to_lowercase()) {
            Entry::Vacant(vacant) => {
                vacant.insert(Claim {
                    spelled: path.to_owned(),
                    entry: entry.to_owned(),
                    kind: wanted,
                });
                return Ok(());
            }
            Entry::Occupied(occupied) => occupied.into_mut(),
        };
        if existing.spelled != path {
            return Err(ExtractError::CaseConflict {
                first: existing.entry.clone(),
                second: entry.to_owned(),
            });
        }
        match (existing.kind, wanted) {
            (ClaimKind::ImplicitDir | ClaimKind::ExplicitDir, ClaimKind::ImplicitDir) => Ok(()),
            (ClaimKind::ImplicitDir, ClaimKind::ExplicitDir) => {
                existing.kind = ClaimKind::ExplicitDir;
                Ok(())
            }
            (ClaimKind::ImplicitDir, ClaimKind::File) => Err(ExtractError::ParentIsFile {
                file: entry.to_owned(),
                child: existing.entry.clone(),
            }),
            (ClaimKind::File, ClaimKind::ImplicitDir) => Err(ExtractError::ParentIsFile {
                file: existing.entry.clone(),
                child: entry.to_owned(),
            }),
            (ClaimKind::File | ClaimKind::ExplicitDir, _) => Err(ExtractError::NameConflict {
                first: existing.entry.clone(),
                second: entry.to_owned(),
            }),
        }
    }
}

struct PackageWriter<'a> {
    /// Where the files go; `None` when the package is only hashed: every
    /// entry is still inflated, held to the limits and checked, and nothing
    /// is written.
    dest: Option<&'a Path>,
    limits: &'a ExtractLimits,
    /// Relative paths of directories already created, so each is made once.
    created_dirs: HashSet<String>,
    inflated_total: u64,
}

impl PackageWriter<'_> {
    /// Creates `path` and its missing ancestors below `dest`, each one new:
    /// an existing entry, link or not, is an error rather than something to
    /// reuse.
    fn ensure_dir(&mut self, path: &str) -> Result<(), ExtractError> {
        let ends = path
            .match_indices('/')
            .map(|(end, _)| end)
            .chain(std::iter::once(path.len()));
        for end in ends {
            let prefix = &path[..end];
            if self.created_dirs.contains(prefix) {
                continue;
            }
            if let Some(dest) = self.dest {
                create_new_dir(&dest.join(prefix))?;
            }
            self.created_dirs.insert(prefix.to_owned());
        }
        Ok(())
    }

    fn write_file(
        &mut self,
        entry: &PlannedEntry,
        mode: u32,
        data: impl EntryReader,
    ) -> Result<ExtractedFile, ExtractError> {
        // The compressed size bounds what the zip crate reads from the
        // archive for this entry, so it is a sound denominator even if the
        // header lies about it.
        let (file, out, actual) = self.write_data(
            &entry.path,
            &entry.name,
            data,
            || entry.compressed_size,
            Some(entry.declared_size),
        )?;
        if file.size != entry.declared_size {
            return Err(ExtractError::CorruptEntry {
                name: entry.name.clone(),
                detail: format!(
                    "it inflates to {} bytes but its header declares {}",
                    file.size, entry.declared_size
                ),
            });
        }
        if actual != entry.crc32 {
            return Err(ExtractError::CrcMismatch {
                name: entry.name.clone(),
                expected: entry.crc32,
                actual,
            });
        }
        if let (Some(out), Some(dest)) = (&out, self.dest) {
            set_file_mode(out, mode).map_err(|source| ExtractError::Write {
                path: dest.join(&entry.path),
                source,
            })?;
        }
        Ok(file)
    }

    /// Inflates `data` into a new private file at `path` (entry `name` in
    /// messages), hashing it and holding it to the limits; the file, its
    /// handle (none when nothing is written) and its CRC-32. `compressed`
    /// is how many compressed bytes the entry has taken so far, the ratio's
    /// denominator; `expected_size` decides whether hashing and writing may
    /// get a thread of their own.
    fn write_data(
        &mut self,
        path: &str,
        name: &str,
        mut data: impl EntryReader,
        compressed: impl Fn() -> u64,
        expected_size: Option<u64>,
    ) -> Result<(ExtractedFile, Option<File>, u32), ExtractError> {
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.ensure_dir(parent)?;
        }
        let full_path = self
            .dest
            .map_or_else(|| PathBuf::from(path), |d| d.join(path));
        let write_err = |source| ExtractError::Write {
            path: full_path.clone(),
            source,
        };
        let out = match self.dest {
            Some(_) => Some(create_new_file(&full_path).map_err(write_err)?),
            None => None,
        };
        let output = FileOutput {
            out,
            crc32: crc32fast::Hasher::new(),
            sha256: Sha256Lane::new(),
            archive_hash: data.archive_hash(),
        };
        let mut size: u64 = 0;
        let _unpacking = Unpacking::start();
        let large = expected_size.is_none_or(|size| size >= PIPELINE_MIN_BYTES);
        // Inflates one buffer and checks the limits on it; false once the
        // entry has ended.
        let mut inflate = |buffer: &mut Vec<u8>| -> Result<bool, ExtractError> {
            let (filled, at_end) =
                fill(&mut data, buffer).map_err(|err| ExtractError::CorruptEntry {
                    name: name.to_owned(),
                    detail: err.to_string(),
                })?;
            buffer.truncate(filled);
            let chunk_len = u64::try_from(filled).unwrap_or(u64::MAX);
            size = size.saturating_add(chunk_len);
            self.inflated_total = self.inflated_total.saturating_add(chunk_len);
            if self.inflated_total > self.limits.max_total_bytes {
                return Err(ExtractError::TooLarge {
                    limit: self.limits.max_total_bytes,
                });
            }
            let ratio_cap = compressed()
                .saturating_mul(self.limits.max_ratio)
                .max(RATIO_GRACE_BYTES);
            if size > ratio_cap {
                return Err(ExtractError::RatioExceeded {
                    name: name.to_owned(),
                    limit: self.limits.max_ratio,
                });
            }
            Ok(!at_end)
        };
        let output = copy(output, &mut inflate, large.then_some(name), &write_err)?;
        let file = ExtractedFile {
            name: path.to_owned(),
            sha256: output.sha256.finalize(),
            size,
        };
        Ok((file, output.out, output.crc32.finalize()))
    }
}

/// Counts the threads unpacking entries in this process. A second thread
/// for an entry pays only while a core is idle: when packages unpack side
/// by side they already keep every core busy, and more threads would only
/// add their buffers to the memory used.
struct Unpacking;

static UNPACKING: AtomicUsize = AtomicUsize::new(0);

impl Unpacking {
    fn start() -> Unpacking {
        UNPACKING.fetch_add(1, Ordering::SeqCst);
        Unpacking
    }

    /// Counts in one more thread if a core is idle.
    fn spare_core() -> Option<Unpacking> {
        // Read once: on Linux it consults cgroup files every time.
        static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let cores =
            *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
        UNPACKING
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |busy| {
                (busy < cores).then_some(busy + 1)
            })
            .ok()
            .map(|_| Unpacking)
    }
}

impl Drop for Unpacking {
    fn drop(&mut self) {
        UNPACKING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Fills `buffer` (resized to [`COPY_BUFFER_BYTES`]) from `data`, since the
/// zip crate's inflater returns at most 8 KiB per read. Returns how much it
/// holds and whether the entry ended.
fn fill(data: &mut impl Read, buffer: &mut Vec<u8>) -> io::Result<(usize, bool)> {
    buffer.resize(COPY_BUFFER_BYTES, 0);
    let mut filled = 0;
    while filled < buffer.len() {
        match data.read(&mut buffer[filled..]) {
            Ok(0) => return Ok((filled, true)),
            Ok(read) => filled += read.min(buffer.len() - filled),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok((filled, false))
}

/// Where one file's inflated bytes go: its CRC-32, its SHA-256 (beside the
/// archive's, for a download unpacked as it arrives) and the file itself,
/// unless the package is only hashed.
struct FileOutput {
    out: Option<File>,
    crc32: crc32fast::Hasher,
    sha256: Sha256Lane,
    archive_hash: Option<ArchiveHash>,
}

impl FileOutput {
    fn take(&mut self, buffer: &[u8]) -> io::Result<()> {
        self.crc32.update(buffer);
        let alone = match &self.archive_hash {
            Some(archive) => archive
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .update_beside(&mut self.sha256, buffer),
            None => buffer,
        };
        self.sha256.update(alone);
        match &mut self.out {
            Some(out) => out.write_all(buffer),
            None => Ok(()),
        }
    }
}

/// Inflates buffer after buffer into `output` on this thread until an entry
/// that may be large (`large_entry`, named for the log) has more than one
/// buffer while a core is idle; from then on a second thread hashes and
/// writes each buffer while this one inflates the next. Inflating is the
/// larger half: one after the other, the two left a core idle for the
/// second or more a big provider takes.
fn copy(
    mut output: FileOutput,
    inflate: &mut impl FnMut(&mut Vec<u8>) -> Result<bool, ExtractError>,
    large_entry: Option<&str>,
    write_err: &impl Fn(io::Error) -> ExtractError,
) -> Result<FileOutput, ExtractError> {
    let mut buffer = Vec::with_capacity(COPY_BUFFER_BYTES);
    let mut inflated = 0;
    loop {
        let more = inflate(&mut buffer)?;
        output.take(&buffer).map_err(write_err)?;
        if !more {
            return Ok(output);
        }
        inflated += buffer.len();
        if let Some(name) = large_entry
            && let Some(core) = Unpacking::spare_core()
        {
            tracing::debug!(
                "archive entry {name:?}: hashing and writing on a second thread from byte {inflated}"
            );
            return copy_on_two_threads(output, inflate, buffer, core, write_err);
        }
    }
}

/// The rest of [`copy`] on two threads. A few buffers go round between
/// them, so memory stays flat; the hand-off is bounded both ways.
fn copy_on_two_threads(
    output: FileOutput,
    inflate: &mut impl FnMut(&mut Vec<u8>) -> Result<bool, ExtractError>,
    spare: Vec<u8>,
    core: Unpacking,
    write_err: &impl Fn(io::Error) -> ExtractError,
) -> Result<FileOutput, ExtractError> {
    const BUFFERS: usize = 3;
    let (full_tx, full_rx) = mpsc::sync_channel::<Vec<u8>>(BUFFERS);
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(BUFFERS);
    let _ = empty_tx.send(spare);
    for _ in 1..BUFFERS {
        let _ = empty_tx.send(Vec::with_capacity(COPY_BUFFER_BYTES));
    }
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name(SECOND_THREAD_NAME.to_owned())
            .spawn_scoped(scope, move || {
                let _core = core;
                let mut output = output;
                for buffer in full_rx {
                    if let Err(err) = output.take(&buffer) {
                        return (output, Err(err));
                    }
                    // The inflating side may have stopped already.
                    let _ = empty_tx.send(buffer);
                }
                (output, Ok(()))
            })
            .map_err(write_err)?;
        let inflated = (|| {
            // Ends early, without error, when the writer stopped: its own
            // error is the one to report.
            while let Ok(mut buffer) = empty_rx.recv() {
                let more = inflate(&mut buffer)?;
                if full_tx.send(buffer).is_err() || !more {
                    break;
                }
            }
            Ok(())
        })();
        drop(full_tx);
        let (output, written) = writer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        inflated?;
        written.map_err(write_err)?;
        Ok(output)
    })
}

/// Creates a file that must not exist yet (`O_EXCL`, which also refuses to
/// follow a link), readable only by us until its final mode is set.
fn create_new_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Sets the mode through the open handle, so it applies to the file we wrote
/// even if its path were swapped meanwhile; the umask plays no part.
#[cfg(unix)]
fn set_file_mode(file: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_file_mode(_file: &File, _mode: u32) -> io::Result<()> {
    Ok(())
}

fn create_new_dir(path: &Path) -> Result<(), ExtractError> {
    let write_err = |source| ExtractError::Write {
        path: path.to_path_buf(),
        source,
    };
    fs::create_dir(path).map_err(write_err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).map_err(write_err)?;
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Cursor;
    use std::os::unix::fs::PermissionsExt;

    use base64::Engine;
    use tempfile::TempDir;
    use zip::write::SimpleFileOptions;
    use zip::{System, ZipWriter};

    use super::*;
    use sha2::{Digest, Sha256};

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
            fs::read("testdata/extract/infozip-terraform-provider-null_2.1.0_linux_amd64.zip")
                .unwrap();
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
            fs::read("testdata/extract/infozip-terraform-provider-null_2.1.0_linux_amd64.zip")
                .unwrap(),
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

    // ---- names ----

    #[test]
    fn dotdot_names_are_refused() {
        for name in ["../escaped", "docs/../../escaped", ".."] {
            assert_eq!(
                refused(&package_with(name)),
                format!(
                    "archive entry {name:?} is not allowed: the name has a \"..\" component, \
                     which would point outside the package directory"
                )
            );
        }
    }

    #[test]
    fn absolute_names_are_refused() {
        let scratch_target = tempfile::tempdir().unwrap();
        let target = scratch_target.path().join("escaped");
        let target = target.to_str().unwrap();
        for name in [target, "/escaped", "C:/escaped", "c:escaped"] {
            assert_eq!(
                refused(&package_with(name)),
                format!("archive entry {name:?} is not allowed: the name is an absolute path")
            );
        }
        assert!(!Path::new(target).exists());
    }

    #[test]
    fn backslash_names_are_refused() {
        for name in ["..\\escaped", "docs\\a.md", "\\escaped"] {
            assert_eq!(
                refused(&package_with(name)),
                format!(
                    "archive entry {name:?} is not allowed: the name contains a backslash, \
                     which Windows treats as a path separator"
                )
            );
        }
    }

    #[test]
    fn colon_names_are_refused() {
        assert_eq!(
            refused(&package_with("README:stream")),
            "archive entry \"README:stream\" is not allowed: the name contains ':', \
             which Windows treats as a drive or stream separator"
        );
    }

    #[test]
    fn empty_and_dot_components_are_refused() {
        for name in ["docs//a.md", "./README", "docs/./a.md", "docs//"] {
            assert_eq!(
                refused(&package_with(name)),
                format!(
                    "archive entry {name:?} is not allowed: the name has an empty or \".\" path component"
                )
            );
        }
    }

    #[test]
    fn empty_name_is_refused() {
        assert_eq!(
            refused(&package_with("")),
            "archive entry \"\" is not allowed: the name is empty"
        );
    }

    #[test]
    fn nul_names_are_refused() {
        let mut archive = package_with("nul-X.txt");
        assert_eq!(replace_all(&mut archive, b"nul-X", b"nul-\0"), 2);
        assert_eq!(
            refused(&archive),
            "archive entry \"nul-\\0.txt\" is not allowed: the name contains a NUL byte"
        );
    }

    #[test]
    fn non_utf8_names_are_refused() {
        let mut archive = package_with("bad-X.txt");
        assert_eq!(replace_all(&mut archive, b"bad-X", b"bad-\xff"), 2);
        assert_eq!(
            refused(&archive),
            "archive entry \"bad-\u{fffd}.txt\" is not allowed: the name is not valid UTF-8"
        );
    }

    #[test]
    fn over_long_names_are_refused() {
        let component = "c".repeat(256);
        assert_eq!(
            refused(&package_with(&format!("docs/{component}"))),
            format!(
                "archive entry \"docs/{component}\" is not allowed: a path component is longer than 255 bytes"
            )
        );
        let long_path = vec!["d".repeat(200); 21].join("/");
        assert_eq!(
            refused(&package_with(&long_path)),
            format!(
                "archive entry {long_path:?} is not allowed: the name is longer than 4096 bytes"
            )
        );
    }

    // ---- duplicates and collisions ----

    #[test]
    fn exact_duplicate_names_are_refused() {
        let mut archive = build(|w| {
            add_exe(w);
            add(w, "a.txt", b"first", options());
            add(w, "b.txt", b"second", options());
        });
        assert_eq!(replace_all(&mut archive, b"b.txt", b"a.txt"), 2);
        assert_eq!(
            refused(&archive),
            "package archive has more than one entry with the same name"
        );
    }

    #[test]
    fn case_duplicate_names_are_refused() {
        let archive = build(|w| {
            add_exe(w);
            add(w, "README", b"upper", options());
            add(w, "readme", b"lower", options());
        });
        assert_eq!(
            refused(&archive),
            "archive entries \"README\" and \"readme\" have paths that differ only in letter case; \
             they would collide on case-insensitive file systems such as those of macOS and Windows"
        );
        let archive = build(|w| {
            add_exe(w);
            add(w, "Docs/a.md", b"a", options());
            add(w, "docs/b.md", b"b", options());
        });
        assert!(
            refused(&archive)
                .starts_with("archive entries \"Docs/a.md\" and \"docs/b.md\" have paths")
        );
    }

    #[test]
    fn file_and_directory_with_one_name_are_refused() {
        let archive = build(|w| {
            add_exe(w);
            add(w, "docs", b"file", options());
            w.add_directory("docs/", options()).unwrap();
        });
        assert_eq!(
            refused(&archive),
            "archive entries \"docs\" and \"docs/\" would both be written to the same path"
        );
        for files_first in [true, false] {
            let archive = build(|w| {
                add_exe(w);
                if files_first {
                    add(w, "docs", b"file", options());
                    add(w, "docs/a.md", b"a", options());
                } else {
                    add(w, "docs/a.md", b"a", options());
                    add(w, "docs", b"file", options());
                }
            });
            assert_eq!(
                refused(&archive),
                "archive entry \"docs/a.md\" needs \"docs\" to be a directory, \
                 but the archive also has a file named \"docs\""
            );
        }
    }

    #[test]
    fn mismatched_local_and_central_names_are_refused() {
        let mut archive = package_with("README.txt");
        let local = find(&archive, b"README.txt");
        archive[local] = b'X';
        let message = refused(&archive);
        assert!(
            message.ends_with(
                "package.zip is not a valid zip archive: header inconsistency detected: \
                 Local file header filename mismatch (does not match central directory)"
            ),
            "{message}"
        );
    }

    // ---- entry types ----

    #[test]
    fn symlinks_are_refused() {
        let archive = build(|w| {
            add_exe(w);
            w.add_symlink("link", "/etc/passwd", options()).unwrap();
        });
        assert_eq!(
            refused(&archive),
            "archive entry \"link\" is a symbolic link; provider packages may contain only \
             regular files and directories"
        );
    }

    #[test]
    fn special_files_are_refused() {
        let archive = build(|w| {
            add_exe(w);
            add(
                w,
                "fifo",
                b"",
                options().external_attributes(0o010_644 << 16),
            );
        });
        assert_eq!(
            refused(&archive),
            "archive entry \"fifo\" is a special file (mode 10644); provider packages may \
             contain only regular files and directories"
        );
    }

    #[test]
    fn directories_with_data_are_refused() {
        let archive = build(|w| {
            add_exe(w);
            add(w, "docs/", b"hidden", options());
        });
        assert_eq!(
            refused(&archive),
            "archive entry \"docs/\" is a directory but carries 6 bytes of data"
        );
    }

    // ---- encodings ----

    #[test]
    fn unsupported_compression_is_refused() {
        let mut archive = package_with("README");
        let (local, central) = first_headers(&archive);
        set_u16(&mut archive, local + 8, 12);
        set_u16(&mut archive, central + 10, 12);
        assert_eq!(
            refused(&archive),
            format!(
                "archive entry {EXE:?} uses compression method Bzip2; \
                 only stored and deflated entries are supported"
            )
        );
    }

    #[test]
    fn encrypted_entries_are_refused() {
        let mut archive = package_with("README");
        let (local, central) = first_headers(&archive);
        archive[local + 6] |= 1;
        archive[central + 8] |= 1;
        assert_eq!(
            refused(&archive),
            format!("archive entry {EXE:?} is encrypted; provider packages cannot be encrypted")
        );
    }

    // ---- damaged archives ----

    #[test]
    fn empty_archive_is_refused() {
        let archive = build(|_| {});
        let scratch = Scratch::new();
        let err = scratch.extract(&archive).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("empty archive: {}", scratch.zip_path().display())
        );
        scratch.assert_dest_empty();
    }

    #[test]
    fn truncated_archive_is_refused() {
        let archive = package_with("README");
        for keep in [archive.len() - 10, archive.len() / 2, 0] {
            let message = refused(&archive[..keep]);
            assert!(
                message.contains("is not a valid zip archive: "),
                "{message}"
            );
        }
    }

    #[test]
    fn not_a_zip_is_refused() {
        let message = refused(b"this is not a zip file at all\n");
        assert!(
            message.ends_with("package.zip is not a valid zip archive: Could not find EOCD"),
            "{message}"
        );
    }

    #[test]
    fn missing_archive_is_reported() {
        let scratch = Scratch::new();
        let err = extract_package(
            &scratch.dir.path().join("absent.zip"),
            &scratch.dest(),
            TYPE,
            &ExtractLimits::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("cannot open package archive "),
            "{err}"
        );
    }

    #[test]
    fn corrupt_deflate_data_is_refused() {
        let mut archive = build(add_exe);
        let (local, _) = first_headers(&archive);
        let name_len = usize::from(u16::from_le_bytes([
            archive[local + 26],
            archive[local + 27],
        ]));
        let extra_len = usize::from(u16::from_le_bytes([
            archive[local + 28],
            archive[local + 29],
        ]));
        // 0xff starts a final block of the reserved type 3.
        archive[local + 30 + name_len + extra_len] = 0xff;
        assert_eq!(
            failed_while_writing(&archive, &ExtractLimits::default()),
            format!("archive entry {EXE:?} is corrupt: corrupt deflate stream")
        );
    }

    #[test]
    fn crc_mismatch_is_refused() {
        let mut archive = build(|w| {
            add(
                w,
                EXE,
                EXE_DATA,
                options().compression_method(CompressionMethod::Stored),
            );
        });
        let (local, central) = first_headers(&archive);
        let real = get_u32(&archive, local + 14);
        set_u32(&mut archive, local + 14, real ^ 1);
        set_u32(&mut archive, central + 16, real ^ 1);
        assert_eq!(
            failed_while_writing(&archive, &ExtractLimits::default()),
            format!(
                "archive entry {EXE:?} is corrupt: its CRC-32 is {real:08x} but its header says {:08x}",
                real ^ 1
            )
        );
    }

    #[test]
    fn lying_uncompressed_size_is_refused() {
        let real = EXE_DATA.len() as u32;
        let cases = [
            (
                real - 1,
                "File is larger than its declared uncompressed size".to_owned(),
            ),
            (
                real + 1,
                format!(
                    "it inflates to {real} bytes but its header declares {}",
                    real + 1
                ),
            ),
        ];
        for (declared, detail) in cases {
            let mut archive = build(add_exe);
            let (local, central) = first_headers(&archive);
            set_u32(&mut archive, local + 22, declared);
            set_u32(&mut archive, central + 24, declared);
            assert_eq!(
                failed_while_writing(&archive, &ExtractLimits::default()),
                format!("archive entry {EXE:?} is corrupt: {detail}")
            );
        }
    }

    // ---- limits ----

    #[test]
    fn total_size_limit_is_enforced() {
        let limits = ExtractLimits {
            max_total_bytes: 60,
            ..ExtractLimits::default()
        };
        let archive = build(|w| {
            add_exe(w);
            add(w, "README", README_DATA, options());
        });
        assert_eq!(
            failed_while_writing(&archive, &limits),
            "package unpacks to more than 60 bytes, the limit for one provider package; \
             the archive may be a zip bomb (if the package is genuine, raise the limit with \
             -max-package-size)"
        );
    }

    #[test]
    fn large_entries_unpack_with_the_same_result_and_limits() {
        // Incompressible, so the ratio limit stays out of the way, and not a
        // multiple of the copy buffer, so the last piece is a partial one.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let big: Vec<u8> = (0..PIPELINE_MIN_BYTES + 12_345)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let archive = build(|w| {
            add_exe(w);
            add(w, "big", &big, options());
        });
        let scratch = Scratch::new();
        let files = scratch.extract(&archive).unwrap();
        assert_eq!(
            files[0],
            ExtractedFile {
                name: "big".into(),
                sha256: sha256(&big),
                size: big.len() as u64,
            }
        );
        assert_eq!(fs::read(scratch.dest().join("big")).unwrap(), big);

        let limits = ExtractLimits {
            max_total_bytes: PIPELINE_MIN_BYTES,
            ..ExtractLimits::default()
        };
        assert_eq!(
            failed_while_writing(&archive, &limits),
            format!(
                "package unpacks to more than {PIPELINE_MIN_BYTES} bytes, the limit for one provider package; \
                 the archive may be a zip bomb (if the package is genuine, raise the limit with \
                 -max-package-size)"
            )
        );
    }

    /// An "inflater" that hands out `data` as it is, as for a stored entry.
    fn stored(data: Vec<u8>) -> impl FnMut(&mut Vec<u8>) -> Result<bool, ExtractError> {
        let mut reader = Cursor::new(data);
        move |buffer| {
            let (filled, at_end) = fill(&mut reader, buffer).unwrap();
            buffer.truncate(filled);
            Ok(!at_end)
        }
    }

    #[test]
    fn the_two_thread_copy_writes_everything_and_stops_on_either_sides_error() {
        let data: Vec<u8> = (0..COPY_BUFFER_BYTES * 5 + 7).map(|i| i as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let write_err = |source| ExtractError::Write {
            path: dir.path().to_path_buf(),
            source,
        };
        let on_two_threads = |out, mut inflate: &mut dyn FnMut(&mut Vec<u8>) -> _| {
            let output = FileOutput {
                out: Some(out),
                crc32: crc32fast::Hasher::new(),
                sha256: Sha256Lane::new(),
                archive_hash: None,
            };
            copy_on_two_threads(
                output,
                &mut inflate,
                Vec::new(),
                Unpacking::start(),
                &write_err,
            )
        };
        let mut inflate = stored(data.clone());
        let out = File::create(dir.path().join("out")).unwrap();
        let output = on_two_threads(out, &mut inflate).unwrap();
        assert_eq!(output.sha256.finalize(), sha256(&data));
        assert_eq!(output.crc32.finalize(), crc32fast::hash(&data));
        assert_eq!(fs::read(dir.path().join("out")).unwrap(), data);

        // The inflating side fails on its third buffer.
        let mut calls = 0;
        let mut failing = |buffer: &mut Vec<u8>| {
            calls += 1;
            buffer.clear();
            buffer.extend_from_slice(b"piece");
            if calls == 3 {
                return Err(ExtractError::TooLarge { limit: 10 });
            }
            Ok(true)
        };
        let out = File::create(dir.path().join("out2")).unwrap();
        let err = on_two_threads(out, &mut failing).err().unwrap();
        assert!(matches!(err, ExtractError::TooLarge { limit: 10 }), "{err}");

        // The writing side fails: a file opened only for reading.
        let mut inflate = stored(data.clone());
        let read_only = File::open(dir.path().join("out")).unwrap();
        let err = on_two_threads(read_only, &mut inflate).err().unwrap();
        assert!(matches!(err, ExtractError::Write { .. }), "{err}");
    }

    #[test]
    fn entry_count_limit_is_enforced() {
        let limits = ExtractLimits {
            max_entries: 2,
            ..ExtractLimits::default()
        };
        let archive = build(|w| {
            add_exe(w);
            add(w, "a", b"a", options());
            add(w, "b", b"b", options());
        });
        assert_eq!(
            refused_with(&archive, &limits),
            "package archive has 3 entries, more than the limit of 2; \
             if the package is genuine, raise the limit with -max-package-files"
        );
    }

    #[test]
    fn compression_ratio_limit_is_enforced() {
        let zeros = vec![0u8; 8 << 20];
        let archive = build(|w| {
            add_exe(w);
            add(w, "bomb", &zeros, options());
        });
        assert_eq!(
            failed_while_writing(&archive, &ExtractLimits::default()),
            "archive entry \"bomb\" inflates to more than 200 times its compressed size; \
             the archive may be a zip bomb (if the package is genuine, raise the limit with \
             -max-compression-ratio)"
        );
        let small = vec![0u8; 512 << 10];
        let archive = build(|w| {
            add_exe(w);
            add(w, "small", &small, options());
        });
        Scratch::new().extract(&archive).unwrap();
    }

    // ---- the executable ----

    #[test]
    fn package_without_executable_is_refused() {
        let archive = build(|w| {
            add(w, "terraform-provider-nullx", b"other provider", options());
            add(w, "docs/terraform-provider-null", b"nested", options());
            w.add_directory("terraform-provider-null_dir/", options())
                .unwrap();
            add(w, "README", README_DATA, options());
        });
        assert_eq!(
            refused(&archive),
            "provider binary not found: could not find executable file starting with \
             terraform-provider-null"
        );
    }

    #[test]
    fn find_executable_follows_terraform_rules() {
        let dir = tempfile::tempdir().unwrap();
        let touch = |name: &str| fs::write(dir.path().join(name), b"").unwrap();
        touch("terraform-provider-nullx");
        fs::create_dir(dir.path().join("terraform-provider-null.d")).unwrap();
        let err = find_executable(dir.path(), TYPE).unwrap_err();
        assert_eq!(
            err.to_string(),
            "provider binary not found: could not find executable file starting with \
             terraform-provider-null"
        );
        touch("terraform-provider-null_v2.0.0_x5");
        assert_eq!(
            find_executable(dir.path(), TYPE).unwrap(),
            dir.path().join("terraform-provider-null_v2.0.0_x5")
        );
        touch("terraform-provider-null.exe");
        assert_eq!(
            find_executable(dir.path(), TYPE).unwrap(),
            dir.path().join("terraform-provider-null.exe")
        );
        std::os::unix::fs::symlink("nowhere", dir.path().join("terraform-provider-null")).unwrap();
        assert_eq!(
            find_executable(dir.path(), TYPE).unwrap(),
            dir.path().join("terraform-provider-null")
        );
    }

    #[test]
    fn find_executable_reports_unreadable_directory() {
        let dir = tempfile::tempdir().unwrap();
        let err = find_executable(&dir.path().join("absent"), TYPE).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("provider binary not found: could not read package directory: "),
            "{err}"
        );
    }

    // ---- the destination ----

    #[test]
    fn planted_symlinks_in_dest_are_not_followed() {
        let with_docs = build(|w| {
            add(w, "docs/a.md", b"a", options());
            add_exe(w);
        });
        let exe_only = build(add_exe);
        for (planted, archive) in [("docs", with_docs), (EXE, exe_only)] {
            let scratch = Scratch::new();
            let outside = tempfile::tempdir().unwrap();
            std::os::unix::fs::symlink(outside.path(), scratch.dest().join(planted)).unwrap();
            let err = scratch.extract(&archive).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "cannot write {}: File exists (os error 17)",
                    scratch.dest().join(planted).display()
                )
            );
            assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        }
    }
}
