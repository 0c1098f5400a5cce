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
    let mut hardlinks_work = true;
    link_dir(src, dst, &mut hardlinks_work)
}

fn link_dir(src: &Path, dst: &Path, hardlinks_work: &mut bool) -> io::Result<()> {
    fs::create_dir(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let meta = fs::metadata(&from)?;
        if meta.is_dir() {
            link_dir(&from, &to, hardlinks_work)?;
        } else if meta.is_file() {
            if *hardlinks_work {
                match fs::hard_link(&from, &to) {
                    Ok(()) => continue,
                    Err(_) => *hardlinks_work = false,
                }
            }
            fs::copy(&from, &to)?;
        }
    }
    Ok(())
}
