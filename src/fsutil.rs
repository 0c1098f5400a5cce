//! Small filesystem helpers shared by every writer of user-visible files.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Writes `path` so that readers see either the old or the new content,
/// never a mix: a temp file beside it, flushed, given `mode`, then renamed.
/// Missing parent directories are created.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    fs::create_dir_all(parent_dir(path))?;
    replace_atomic(path, mode, |file| file.write_all(contents))
}

/// Like [`write_atomic`], but the file gets `mode` less the process umask,
/// as a plain create gives: what Go's `os.WriteFile(path, data, mode)`
/// leaves, and so what Terraform leaves for most of its files.
pub fn write_atomic_umask(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    write_umask(path, contents, mode, Flush::ToDisk)
}

/// [`write_atomic_umask`], flushed to the disk or not as `flush` says.
/// tfinstall's own caches are not ([`Flush::No`]): their readers check
/// them and drop them when they do not hold. Nor is `modules.json`, which
/// Terraform does not flush either. The rename still shows readers, and a
/// run killed at any moment, the old file or the new one; only a crash of
/// the machine can leave one empty or old, and then the next run
/// recomputes what it held. The flush it saves costs 5–10 ms on
/// some disks, once per working directory.
pub fn write_umask(path: &Path, contents: &[u8], mode: u32, flush: Flush) -> io::Result<()> {
    fs::create_dir_all(parent_dir(path))?;
    let temp = write_temp_beside(path, Some(mode), flush, |file| file.write_all(contents))?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Whether a written file is flushed to the disk before it is renamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Flushed: the file survives a crash of the machine once renamed.
    ToDisk,
    /// A file a crash of the machine may lose: a cache's, or one Terraform
    /// does not flush either (see [`write_umask`]).
    No,
}

/// The atomic write of [`write_atomic`] into a directory that must already
/// exist, as Terraform's `replacefile.AtomicWriteFile` does for the lock
/// file: a lock file is never written where Terraform would fail to. If
/// `write` fails, the temp file is removed and `path` is left as it was.
pub fn replace_atomic(
    path: &Path,
    mode: u32,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let temp = write_temp_beside(path, None, Flush::ToDisk, write)?;
    set_mode(temp.path(), mode)?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A temp file beside `path` filled by `write` and flushed as `flush` says, created with
/// `create_mode` (less the umask) if given, else tempfile's private 0600.
fn write_temp_beside(
    path: &Path,
    create_mode: Option<u32>,
    flush: Flush,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<tempfile::NamedTempFile> {
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
    let mut temp = builder.tempfile_in(parent_dir(path))?;
    write(temp.as_file_mut())?;
    if flush == Flush::ToDisk {
        temp.as_file().sync_all()?;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_write_keeps_old_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".terraform.lock.hcl");
        fs::write(&path, "old content\n").unwrap();

        let err = replace_atomic(&path, 0o644, |file| {
            file.write_all(b"partial")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(fs::read_to_string(&path).unwrap(), "old content\n");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [".terraform.lock.hcl"]);
    }
}
