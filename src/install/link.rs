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

/// How each file is placed; `Hardlink` turns into `Copy` after a refusal.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Strategy {
    Hardlink,
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
                Strategy::Hardlink => {
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
    /// Hard links, falling back to copies after the first refusal. On
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

#[cfg(unix)]
fn symlink_dir(src: &Path, dst: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(src, dst)
}

#[cfg(windows)]
fn symlink_dir(src: &Path, dst: &Path) -> io::Result<()> {
    std::os::windows::fs::symlink_dir(src, dst)
}
