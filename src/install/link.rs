//! Placing the files of an unpacked package somewhere else without copying
//! bytes when the filesystem allows it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::verify::hash::PackageHash;

/// Recreates the tree under `src` at `dst` (which must not exist), hard-linking
/// each regular file and copying where links are refused (another filesystem,
/// or a filesystem without links). After the first refusal every later file is
/// copied straight away, so a cross-device tree costs one failed call, not one
/// per file. Symlinks inside `src` are followed: a package must be
/// self-contained once installed.
pub fn link_or_copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    let mut strategy = Strategy::Hardlink;
    place_tree(src, dst, &mut strategy, Symlinks::Follow)
}

/// [`link_or_copy_tree`] for a module package, whose symbolic links are
/// recreated as links, as `git` and go-getter leave them: a module's links
/// are part of it (archives keep only those that stay inside the package),
/// and following one that names a directory outside, such as `/`, would
/// copy whatever it names.
pub fn link_or_copy_module_tree(src: &Path, dst: &Path) -> io::Result<()> {
    if link_module_tree_at(src, dst)? {
        return Ok(());
    }
    let mut strategy = Strategy::Hardlink;
    place_tree(src, dst, &mut strategy, Symlinks::Keep)
}

/// Hard-links the module package at `src` into the new directory `dst`
/// through directory handles, so that each link names one path component
/// instead of walking two long paths: `init DIR…` links every module file
/// into every directory (16,000 links for 20 directories of 8 modules of
/// 100 files), and those walks were a third of the time. `false`, with
/// nothing left at `dst`, when any link is refused (another filesystem):
/// the caller then places it file by file, copying. std has no `linkat`
/// relative to a directory handle; rustix is the safe binding of it.
#[cfg(unix)]
fn link_module_tree_at(src: &Path, dst: &Path) -> io::Result<bool> {
    use rustix::fs::{Mode, OFlags};
    let open_dir = |path: &Path| {
        rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let src_dir = open_dir(src)?;
    fs::create_dir(dst)?;
    let linked = open_dir(dst)
        .map_err(io::Error::from)
        .and_then(|dst_dir| link_dir_at(src_dir, &dst_dir));
    if linked.is_err() {
        fs::remove_dir_all(dst)?;
    }
    Ok(linked.is_ok())
}

#[cfg(not(unix))]
fn link_module_tree_at(_: &Path, _: &Path) -> io::Result<bool> {
    Ok(false)
}

/// Links every entry of the directory `src` into the directory `dst`:
/// files as hard links, symbolic links recreated, subdirectories made and
/// linked in turn; other kinds of entry are left out, as [`place_tree`]
/// leaves them.
#[cfg(unix)]
fn link_dir_at(src: std::os::fd::OwnedFd, dst: &std::os::fd::OwnedFd) -> io::Result<()> {
    use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
    let open_in = |dir: &std::os::fd::OwnedFd, name: &std::ffi::CStr| {
        rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )
    };
    let mut entries = Dir::new(src)?;
    let src = entries.fd()?.try_clone_to_owned()?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => FileType::from_raw_mode(
                rustix::fs::statat(&src, name, AtFlags::SYMLINK_NOFOLLOW)?.st_mode,
            ),
            kind => kind,
        };
        match kind {
            FileType::RegularFile => rustix::fs::linkat(&src, name, dst, name, AtFlags::empty())?,
            FileType::Directory => {
                rustix::fs::mkdirat(dst, name, Mode::from_raw_mode(0o777))?;
                link_dir_at(open_in(&src, name)?, &open_in(dst, name)?)?;
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(&src, name, Vec::new())?;
                rustix::fs::symlinkat(target.as_c_str(), dst, name)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// How module packages from the module cache are placed in
/// `.terraform/modules`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ModuleLinkMode {
    /// Hard links to the cache's read-only files (copies where the
    /// filesystem refuses links); directories are made anew, so a module
    /// may add files to its own directory, but not change the cached ones.
    #[default]
    Auto,
    /// Independent, writable copies, for a module that edits its own files.
    Copy,
}

/// Places the module package at `src` at `dst` (which must not exist) as
/// `mode` says; symbolic links are recreated as links either way.
pub fn place_module_tree(src: &Path, dst: &Path, mode: ModuleLinkMode) -> io::Result<()> {
    match mode {
        ModuleLinkMode::Auto => link_or_copy_module_tree(src, dst),
        ModuleLinkMode::Copy => place_tree(src, dst, &mut Strategy::Copy, Symlinks::Keep),
    }
}

/// What [`place_tree`] does with a symbolic link in the tree it places.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Symlinks {
    /// Places what it names: a provider package must be self-contained.
    Follow,
    /// Recreates the link.
    Keep,
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

fn place_tree(
    src: &Path,
    dst: &Path,
    strategy: &mut Strategy,
    symlinks: Symlinks,
) -> io::Result<()> {
    fs::create_dir(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        // The entry's own type comes with the directory listing: only a
        // link followed, or a mode to look at, costs a stat (of which
        // `init DIR…` would make one for each of thousands of files).
        let mut kind = entry.file_type()?;
        if kind.is_symlink() {
            if symlinks == Symlinks::Keep {
                recreate_symlink(&from, &to)?;
                continue;
            }
            kind = fs::metadata(&from)?.file_type();
        }
        if kind.is_dir() {
            place_tree(&from, &to, strategy, symlinks)?;
        } else if kind.is_file() {
            let writable = *strategy == Strategy::HardlinkReadOnly
                && !fs::metadata(&from)?.permissions().readonly();
            match *strategy {
                Strategy::HardlinkOnly => fs::hard_link(&from, &to)?,
                Strategy::HardlinkReadOnly if writable => copy_file(&from, &to)?,
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

#[cfg(unix)]
fn recreate_symlink(from: &Path, to: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(fs::read_link(from)?, to)
}

#[cfg(not(unix))]
fn recreate_symlink(from: &Path, _to: &Path) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "{} is a symbolic link, which tfinstall places only on Unix",
            from.display()
        ),
    ))
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

/// Gives every regular file under `dir` owner write, as a copy has it
/// ([`LinkMode::Copy`]): for packages hard-linked from a store that only
/// this run uses and then removes, whose read-only modes (a cache's, kept
/// so that no one edits a shared entry) would otherwise outlive it in the
/// working directory, where Terraform leaves owner-writable files.
pub fn add_owner_write(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            add_owner_write(&entry.path())?;
        } else if kind.is_file() {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = entry.metadata()?.permissions().mode();
                if mode & 0o200 == 0 {
                    fs::set_permissions(entry.path(), fs::Permissions::from_mode(mode | 0o200))?;
                }
            }
        }
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
            place_tree(src, dst, &mut hardlinks_only, Symlinks::Follow)
        }
        LinkMode::Copy => {
            let mut copies = Strategy::Copy;
            place_tree(src, dst, &mut copies, Symlinks::Follow)
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
            place_tree(src, dst, &mut read_only_links, Symlinks::Follow)
        }
        other => link_package(src, dst, other),
    }
}

/// Copies the unpacked package at `src` to `dst` (which must not exist) and
/// returns the `h1:` of what it wrote, from digests taken while copying: one
/// read of the source vouches for the copy. Files keep their permission
/// bits (executables stay executable) plus owner write, so whoever owns the
/// copy can replace it even when it came from read-only cache files. The
/// tree is walked as `h1_of_dir` walks it, so the hash is the one the
/// source would have: a symlink inside is copied as the file it points to,
/// and a symlink to a directory, or anything else that is not a file or a
/// directory, is refused.
pub fn copy_tree_hashed(src: &Path, dst: &Path) -> io::Result<PackageHash> {
    let root = fs::canonicalize(src)?;
    let mut files: Vec<(String, [u8; 32])> = Vec::new();
    let mut pending = vec![(root, dst.to_path_buf(), String::new())];
    while let Some((from_dir, to_dir, rel)) = pending.pop() {
        fs::create_dir(&to_dir)?;
        for entry in fs::read_dir(&from_dir)? {
            let entry = entry?;
            let from = entry.path();
            let to = to_dir.join(entry.file_name());
            let name = entry.file_name().into_string().map_err(|name| {
                io::Error::other(format!(
                    "{}: the file name {name:?} is not UTF-8",
                    from_dir.display()
                ))
            })?;
            let name = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let kind = entry.file_type()?;
            if kind.is_dir() {
                pending.push((from, to, name));
                continue;
            }
            let meta = fs::metadata(&from)?;
            if !meta.is_file() {
                return Err(io::Error::other(format!(
                    "{} is not a file or a directory (symlinks to directories are not followed)",
                    from.display()
                )));
            }
            files.push((name, copy_file_hashed(&from, &to, &meta)?));
        }
    }
    PackageHash::h1_of_files(&files).map_err(io::Error::other)
}

/// One file of [`copy_tree_hashed`]: created new (never through a link
/// left at `to`), its SHA-256 taken from the bytes as they are written.
fn copy_file_hashed(from: &Path, to: &Path, meta: &fs::Metadata) -> io::Result<[u8; 32]> {
    let mut input = File::open(from)?;
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    let mut output = options.open(to)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        hasher.update(&buf[..n]);
        output.write_all(&buf[..n])?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        output.set_permissions(fs::Permissions::from_mode(mode | 0o200))?;
    }
    #[cfg(not(unix))]
    let _ = meta;
    Ok(hasher.finalize().into())
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

    /// A module's links stay links: one that names a directory outside
    /// the package (a hostile repository's `/`) is never walked or copied.
    #[test]
    fn module_trees_keep_their_symlinks_as_links() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        fs::create_dir_all(outside.join("deep")).unwrap();
        fs::write(outside.join("deep/secret"), "secret").unwrap();
        let src = root.path().join("package");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("main.tf"), "# main").unwrap();
        std::os::unix::fs::symlink(&outside, src.join("escape")).unwrap();
        std::os::unix::fs::symlink("../main.tf", src.join("sub/main.tf")).unwrap();

        let dst = root.path().join("placed");
        link_or_copy_module_tree(&src, &dst).unwrap();
        assert_eq!(fs::read_link(dst.join("escape")).unwrap(), outside);
        assert_eq!(
            fs::read_link(dst.join("sub/main.tf")).unwrap(),
            Path::new("../main.tf")
        );
        assert!(
            fs::symlink_metadata(dst.join("escape"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(dst.join("main.tf")).unwrap(), b"# main");

        // A provider package's links are followed, as before.
        let followed = root.path().join("followed");
        link_or_copy_tree(&src, &followed).unwrap();
        assert!(followed.join("escape/deep/secret").is_file());
    }

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

    #[test]
    fn hashed_copies_keep_modes_and_hash_as_the_source_does() {
        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("entry");
        fs::create_dir_all(src.join("docs")).unwrap();
        for (name, mode) in [("terraform-provider-x", 0o555), ("docs/README", 0o444)] {
            fs::write(src.join(name), name).unwrap();
            fs::set_permissions(src.join(name), fs::Permissions::from_mode(mode)).unwrap();
        }
        std::os::unix::fs::symlink("README", src.join("docs/link")).unwrap();
        let dst = root.path().join("copy");
        let h1 = copy_tree_hashed(&src, &dst).unwrap();
        assert_eq!(h1, PackageHash::h1_of_dir(&src).unwrap());
        assert_eq!(h1, PackageHash::h1_of_dir(&dst).unwrap());
        let mode = |p: &str| fs::metadata(dst.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("terraform-provider-x"), 0o755);
        assert_eq!(mode("docs/README"), 0o644);
        assert!(
            !fs::symlink_metadata(dst.join("docs/link"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(fs::read(dst.join("docs/link")).unwrap(), b"docs/README");

        std::os::unix::fs::symlink(src.join("docs"), src.join("dir-link")).unwrap();
        let err = copy_tree_hashed(&src, &root.path().join("refused")).unwrap_err();
        assert!(
            err.to_string().contains("is not a file or a directory"),
            "{err}"
        );
    }
}
