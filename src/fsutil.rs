//! Small filesystem helpers shared by every writer of user-visible files.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Writes `path` so that readers see either the old or the new content,
/// never a mix: a temp file beside it, flushed, given `mode`, then renamed.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let temp = write_temp_beside(path, contents, None)?;
    set_mode(temp.path(), mode)?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Like [`write_atomic`], but the file gets `mode` less the process umask,
/// as a plain create gives: what Go's `os.WriteFile(path, data, mode)`
/// leaves, and so what Terraform leaves for most of its files.
pub fn write_atomic_umask(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let temp = write_temp_beside(path, contents, Some(mode))?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A flushed temp file beside `path` holding `contents`, created with
/// `create_mode` (less the umask) if given, else tempfile's private 0600.
fn write_temp_beside(
    path: &Path,
    contents: &[u8],
    create_mode: Option<u32>,
) -> io::Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{file_name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    #[cfg(unix)]
    if let Some(mode) = create_mode {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = create_mode;
    let mut temp = builder.tempfile_in(dir)?;
    temp.write_all(contents)?;
    temp.as_file().sync_all()?;
    Ok(temp)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}

/// Runs hashing, unpacking and other file work off the async threads, so
/// one large package never stalls the downloads of the others.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}
