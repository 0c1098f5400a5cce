//! One picture of a directory tree, for the two questions tests ask of one:
//! "did this run change nothing?" (paths, kinds, modes, bytes and file
//! modification times, links kept as links) and "do these two programs
//! leave the same files behind?" (links followed, times left out).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// The lock file `init` writes beside `.terraform`.
pub const LOCK_FILE: &str = ".terraform.lock.hcl";

/// One path of a [`Snapshot`].
#[derive(Clone, PartialEq, Eq)]
pub enum Entry {
    Dir {
        mode: u32,
    },
    File {
        mode: u32,
        content: Vec<u8>,
        /// `None` in snapshots that compare contents only.
        modified: Option<SystemTime>,
    },
    Symlink {
        target: PathBuf,
    },
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Dir { mode } => write!(f, "dir {mode:o}"),
            Entry::File {
                mode,
                content,
                modified,
            } => {
                let digest = hex::encode(Sha256::digest(content));
                write!(
                    f,
                    "file {mode:o} {} bytes sha256:{}",
                    content.len(),
                    &digest[..16]
                )?;
                match modified {
                    Some(time) => write!(f, " modified {time:?}"),
                    None => Ok(()),
                }
            }
            Entry::Symlink { target } => write!(f, "symlink -> {}", target.display()),
        }
    }
}

/// Paths (relative, `/`-separated) with what is at each. Equal snapshots of
/// the same place taken with [`Snapshot::of`] mean nothing was touched.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub entries: BTreeMap<String, Entry>,
    /// Paths that were symlinks, in a [`Snapshot::resolved`] snapshot.
    pub symlinks: Vec<String>,
}

impl Snapshot {
    /// Everything below `root` (not `root` itself), links kept as links;
    /// an absent `root` gives an empty snapshot.
    pub fn of(root: &Path) -> Self {
        Self::walk(root, false)
    }

    /// What `init` owns in work directory `work`: `.terraform/` and the
    /// lock file, each if present.
    pub fn of_install(work: &Path) -> Self {
        let mut snapshot = Self::empty();
        for name in [".terraform", LOCK_FILE] {
            snapshot.record(&work.join(name), name.to_owned(), false);
        }
        snapshot
    }

    /// Everything below `root` as a program reading it sees it: links
    /// followed (and listed in `symlinks`), no modification times. For
    /// comparing trees that different runs or programs wrote.
    pub fn resolved(root: &Path) -> Self {
        Self::walk(root, true)
    }

    /// The same snapshot without modification times, for comparing trees
    /// written at different times, or files rewritten with the same bytes.
    pub fn without_times(mut self) -> Self {
        for entry in self.entries.values_mut() {
            if let Entry::File { modified, .. } = entry {
                *modified = None;
            }
        }
        self
    }

    /// Panics with the differing paths unless both snapshots hold the same
    /// paths with the same entries. A directory that is a symlink in one
    /// resolved tree is the link target's in that tree and the installer's
    /// own in the other, so its mode is not compared.
    #[track_caller]
    pub fn assert_same(&self, other: &Snapshot, what: &str) {
        let linked = |path: &String| self.symlinks.contains(path) || other.symlinks.contains(path);
        let mut report = String::new();
        let paths: BTreeSet<&String> = self.entries.keys().chain(other.entries.keys()).collect();
        for path in paths {
            let (left, right) = (self.entries.get(path), other.entries.get(path));
            let same = match (left, right) {
                (Some(Entry::Dir { .. }), Some(Entry::Dir { .. })) if linked(path) => true,
                _ => left == right,
            };
            if !same {
                report.push_str(&format!("  {path}: {left:?} vs {right:?}\n"));
            }
        }
        assert!(report.is_empty(), "{what} differ:\n{report}");
    }

    fn empty() -> Self {
        Snapshot {
            entries: BTreeMap::new(),
            symlinks: Vec::new(),
        }
    }

    fn walk(root: &Path, resolve: bool) -> Self {
        let mut snapshot = Self::empty();
        if root.exists() {
            snapshot.record_children(root, "", resolve);
        }
        snapshot
    }

    fn record_children(&mut self, dir: &Path, prefix: &str, resolve: bool) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
            .map(|entry| entry.expect("directory entry"))
            .collect();
        // Sorted, so that `symlinks` lists the same tree the same way.
        entries.sort_by_key(|entry| entry.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            self.record(&entry.path(), format!("{prefix}{name}"), resolve);
        }
    }

    /// Records `path` as `relative`, and everything below it; nothing if it
    /// does not exist.
    fn record(&mut self, path: &Path, relative: String, resolve: bool) {
        let Ok(link_meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        let meta = if link_meta.file_type().is_symlink() {
            if !resolve {
                let target = std::fs::read_link(path).expect("read symlink");
                self.entries.insert(relative, Entry::Symlink { target });
                return;
            }
            self.symlinks.push(relative.clone());
            std::fs::metadata(path).unwrap_or_else(|err| panic!("stat {}: {err}", path.display()))
        } else {
            link_meta
        };
        let mode = permission_bits(&meta);
        if meta.is_dir() {
            self.entries.insert(relative.clone(), Entry::Dir { mode });
            self.record_children(path, &format!("{relative}/"), resolve);
        } else {
            let content = std::fs::read(path)
                .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
            let modified = if resolve {
                None
            } else {
                Some(meta.modified().expect("modification time"))
            };
            self.entries.insert(
                relative,
                Entry::File {
                    mode,
                    content,
                    modified,
                },
            );
        }
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (path, entry) in &self.entries {
            writeln!(f, "{path}: {entry:?}")?;
        }
        if !self.symlinks.is_empty() {
            writeln!(f, "symlinks: {:?}", self.symlinks)?;
        }
        Ok(())
    }
}

/// The permission bits of `path` (not following a link), as tests compare
/// them: `0o7777` of the mode, `0` where there are none.
pub fn mode_of(path: &Path) -> u32 {
    permission_bits(
        &std::fs::symlink_metadata(path)
            .unwrap_or_else(|err| panic!("stat {}: {err}", path.display())),
    )
}

#[cfg(unix)]
fn permission_bits(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn permission_bits(_meta: &std::fs::Metadata) -> u32 {
    0
}
