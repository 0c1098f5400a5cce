//! Why a package could not be extracted, worded for the user who must
//! act on it.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use zip::result::ZipError;

use super::names::NameProblem;

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
    /// they are checked (`module.rs`); a zip's are refused, as a provider
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

/// The zip crate's message without its "invalid Zip archive" prefix, which
/// our own messages already say in words fit for the context.
pub(super) fn zip_error_detail(err: ZipError) -> String {
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
pub(super) fn not_a_zip_hint(zip: &Path) -> &'static str {
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
