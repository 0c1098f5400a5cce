//! Placing the files of an unpacked package somewhere else without copying
//! bytes when the filesystem allows it.

use std::fs;
use std::io;
use std::path::Path;

/// Recreates the tree under `src` at `dst` (which must not exist), hard-linking
/// each regular file and copying where links are refused (another filesystem,
/// or a filesystem without links). After the first refusal every later file is
/// copied straight away, so a cross-device tree costs one failed call, not one
/// per file. Symlinks inside `src` are followed: a package must be
/// self-contained once installed.
pub fn link_or_copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    let mut strategy = Strategy::Hardlink;
    place_tree(src, dst, &mut strategy)
}

/// How each file is placed; `Hardlink` and `HardlinkReadOnly` turn into
/// `Copy` after a refusal.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Strategy {
    Hardlink,
    /// Hard links for read-only files only; writable ones are copied.
    HardlinkReadOnly,
    HardlinkOnly,
    Copy,
}

fn place_tree(src: &Path, dst: &Path, strategy: &mut Strategy) -> io::Result<()> {
    fs::create_dir(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let meta = fs::metadata(&from)?;
        if meta.is_dir() {
            place_tree(&from, &to, strategy)?;
        } else if meta.is_file() {
            match *strategy {
                Strategy::HardlinkOnly => fs::hard_link(&from, &to)?,
                Strategy::HardlinkReadOnly if !meta.permissions().readonly() => {
                    copy_file(&from, &to)?
                }
                Strategy::Hardlink | Strategy::HardlinkReadOnly => {
                    if fs::hard_link(&from, &to).is_err() {
                        *strategy = Strategy::Copy;
                        copy_file(&from, &to)?;
                    }
                }
                Strategy::Copy => copy_file(&from, &to)?,
            }
        }
    }
    Ok(())
}

/// A copy is writable even when its source is a read-only cache file, so
/// the working directory owns it outright.
fn copy_file(from: &Path, to: &Path) -> io::Result<()> {
    fs::copy(from, to)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(to)?.permissions().mode();
        fs::set_permissions(to, fs::Permissions::from_mode(mode | 0o200))?;
    }
    Ok(())
}

/// How an unpacked package (from the plugin cache or an unpacked mirror) is
/// placed into the install directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LinkMode {
    /// Hard links, falling back to copies after the first refusal; from
    /// the plugin cache, only read-only files (tfinstall's) are linked. On
    /// filesystems that support it (Btrfs, XFS), a copy shares blocks with
    /// its source anyway: std's copy uses `copy_file_range`, which reflinks.
    #[default]
    Auto,
    /// Hard links only; an error where the filesystem refuses them.
    Hardlink,
    /// One symlink to the package directory, as Terraform links its cache.
    Symlink,
    /// Independent copies.
    Copy,
}

/// Places the package at `src` at `dst` (which must not exist) as `mode` says.
pub fn link_package(src: &Path, dst: &Path, mode: LinkMode) -> io::Result<()> {
    match mode {
        LinkMode::Auto => link_or_copy_tree(src, dst),
        LinkMode::Hardlink => {
            let mut hardlinks_only = Strategy::HardlinkOnly;
            place_tree(src, dst, &mut hardlinks_only)
        }
        LinkMode::Copy => {
            let mut copies = Strategy::Copy;
            place_tree(src, dst, &mut copies)
        }
        LinkMode::Symlink => symlink_dir(&std::path::absolute(src)?, dst),
    }
}

/// Places a plugin-cache entry at `dst` as `mode` says, except that `Auto`
/// hard-links only read-only files. tfinstall makes the files of its
/// entries read-only, so no working directory can write through its links
/// into the copy every other project shares. Entries Terraform made are
/// writable: their files are copied, so one project's accidental write
/// cannot change every project's provider.
pub fn link_cached_package(src: &Path, dst: &Path, mode: LinkMode) -> io::Result<()> {
    match mode {
        LinkMode::Auto => {
            let mut read_only_links = Strategy::HardlinkReadOnly;
            place_tree(src, dst, &mut read_only_links)
        }
        other => link_package(src, dst, other),
    }
}

#[cfg(unix)]
fn symlink_dir(src: &Path, dst: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(src, dst)
}

#[cfg(windows)]
fn symlink_dir(src: &Path, dst: &Path) -> io::Result<()> {
    std::os::windows::fs::symlink_dir(src, dst)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    #[test]
    fn cached_packages_link_read_only_files_and_copy_writable_ones() {
        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("entry");
        fs::create_dir_all(src.join("docs")).unwrap();
        for (name, mode) in [("read-only", 0o555), ("docs/writable", 0o644)] {
            fs::write(src.join(name), name).unwrap();
            fs::set_permissions(src.join(name), fs::Permissions::from_mode(mode)).unwrap();
        }
        let dst = root.path().join("installed");
        link_cached_package(&src, &dst, LinkMode::Auto).unwrap();
        let ino = |p: &Path| fs::metadata(p).unwrap().ino();
        assert_eq!(ino(&dst.join("read-only")), ino(&src.join("read-only")));
        assert_ne!(
            ino(&dst.join("docs/writable")),
            ino(&src.join("docs/writable"))
        );
        assert_eq!(
            fs::read(dst.join("docs/writable")).unwrap(),
            b"docs/writable"
        );

        let forced = root.path().join("forced");
        link_cached_package(&src, &forced, LinkMode::Hardlink).unwrap();
        assert_eq!(
            ino(&forced.join("docs/writable")),
            ino(&src.join("docs/writable"))
        );
    }
}
