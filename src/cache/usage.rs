//! What the cache holds and what it costs: `cache stats`, and the figures
//! `cache prune` decides and reports on. Sizes are allocated blocks, as
//! `du` counts them, each inode once: an entry's files are hard-linked into
//! working directories, and only link counts tell what removing one frees.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::PluginCache;
use crate::addr::{Platform, ProviderAddr};
use crate::version::Version;

/// One entry: where it is, what it takes, when it was last used.
#[derive(Clone, Debug)]
pub struct EntryUsage {
    pub provider: ProviderAddr,
    pub version: Version,
    pub platform: Platform,
    pub dir: PathBuf,
    /// The entry's files and its provenance, archive and use record.
    pub bytes: u64,
    /// Of `bytes`, what nothing outside the entry links: what removing it
    /// gives back. The rest stays on disk for the working directories.
    pub unshared_bytes: u64,
    /// `None` only when the entry vanished while it was being looked at.
    pub last_use: Option<SystemTime>,
}

/// The whole cache directory, as `cache stats` reports it.
#[derive(Debug)]
pub struct CacheStats {
    pub entries: Vec<EntryUsage>,
    /// Everything below the cache directory (entries, lock files, `.tmp/`),
    /// as `du -s` reports it.
    pub bytes_on_disk: u64,
    /// What the other links of the cache's files would take as copies.
    pub bytes_saved_by_links: u64,
}

/// One provider's entries in [`CacheStats`].
#[derive(Debug)]
pub struct ProviderStats {
    pub provider: ProviderAddr,
    /// Newest first, each once however many platforms it is cached for.
    pub versions: Vec<Version>,
    pub entries: usize,
    pub bytes: u64,
}

impl CacheStats {
    pub fn providers(&self) -> Vec<ProviderStats> {
        let mut by_provider: BTreeMap<&ProviderAddr, ProviderStats> = BTreeMap::new();
        for entry in &self.entries {
            let stats = by_provider
                .entry(&entry.provider)
                .or_insert_with(|| ProviderStats {
                    provider: entry.provider.clone(),
                    versions: Vec::new(),
                    entries: 0,
                    bytes: 0,
                });
            if !stats.versions.contains(&entry.version) {
                stats.versions.push(entry.version.clone());
            }
            stats.entries += 1;
            stats.bytes += entry.bytes;
        }
        let mut providers: Vec<ProviderStats> = by_provider.into_values().collect();
        for stats in &mut providers {
            stats.versions.sort_by(|a, b| b.cmp(a));
        }
        providers
    }

    pub fn oldest_use(&self) -> Option<SystemTime> {
        self.entries.iter().filter_map(|e| e.last_use).min()
    }

    pub fn newest_use(&self) -> Option<SystemTime> {
        self.entries.iter().filter_map(|e| e.last_use).max()
    }
}

impl PluginCache {
    /// Every entry with its usage, and the directory's totals.
    pub fn stats(&self) -> CacheStats {
        let entries = self.usage();
        let mut seen = HashSet::new();
        let mut total = Blocks::default();
        if let Ok(meta) = fs::symlink_metadata(&self.root) {
            tally(&meta, &mut seen, &mut total);
        }
        tally_tree(&self.root, &mut seen, &mut total);
        CacheStats {
            entries,
            bytes_on_disk: total.bytes,
            bytes_saved_by_links: total.saved,
        }
    }

    /// Every entry with its usage.
    pub fn usage(&self) -> Vec<EntryUsage> {
        self.entries()
            .into_iter()
            .filter_map(|(provider, version, platform, dir)| {
                let (bytes, unshared_bytes) = self.entry_size(&dir).ok()?;
                Some(EntryUsage {
                    last_use: self.last_use(&dir),
                    provider,
                    version,
                    platform,
                    dir,
                    bytes,
                    unshared_bytes,
                })
            })
            .collect()
    }

    /// The entry's files and sidecars, except the lock file (which stays:
    /// see [`PluginCache::prune`]): their bytes, and the bytes of those
    /// nothing else links.
    pub(super) fn entry_size(&self, dir: &Path) -> io::Result<(u64, u64)> {
        let mut seen = HashSet::new();
        let mut blocks = Blocks::default();
        tally(&fs::symlink_metadata(dir)?, &mut seen, &mut blocks);
        if fs::symlink_metadata(dir)?.is_dir() {
            tally_tree(dir, &mut seen, &mut blocks);
        }
        for sidecar in self.removed_sidecars(dir) {
            if let Ok(meta) = fs::symlink_metadata(&sidecar) {
                tally(&meta, &mut seen, &mut blocks);
            }
        }
        Ok((blocks.bytes, blocks.unshared))
    }

    /// The sidecars that go with an entry when it is removed.
    pub(super) fn removed_sidecars(&self, dir: &Path) -> [PathBuf; 3] {
        [
            self.archive_of_dir(dir),
            self.meta_path(dir),
            self.used_path(dir),
        ]
    }

    /// When a run last used the entry: its use record, else its
    /// provenance or its directory (written when it was filled), whichever
    /// is newest. Entries from before use was recorded, and entries only
    /// Terraform uses, thus age from when they were filled.
    pub(super) fn last_use(&self, dir: &Path) -> Option<SystemTime> {
        [self.used_path(dir), self.meta_path(dir), dir.to_path_buf()]
            .iter()
            .filter_map(|path| fs::symlink_metadata(path).and_then(|m| m.modified()).ok())
            .max()
    }
}

/// What `paths` take (each tree whole, links not followed, each inode
/// once), and of that what nothing else links; the first must exist.
pub(super) fn size_of(paths: &[PathBuf]) -> io::Result<(u64, u64)> {
    let mut seen = HashSet::new();
    let mut blocks = Blocks::default();
    for (n, path) in paths.iter().enumerate() {
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(err) if n == 0 => return Err(err),
            Err(_) => continue,
        };
        tally(&meta, &mut seen, &mut blocks);
        if meta.is_dir() {
            tally_tree(path, &mut seen, &mut blocks);
        }
    }
    Ok((blocks.bytes, blocks.unshared))
}

#[derive(Default)]
struct Blocks {
    bytes: u64,
    unshared: u64,
    saved: u64,
}

/// Adds everything below `dir` (not following symlinks), each inode once.
fn tally_tree(dir: &Path, seen: &mut HashSet<(u64, u64)>, blocks: &mut Blocks) {
    let Ok(children) = fs::read_dir(dir) else {
        return;
    };
    for child in children.flatten() {
        let Ok(meta) = child.metadata() else {
            continue;
        };
        tally(&meta, seen, blocks);
        if meta.is_dir() {
            tally_tree(&child.path(), seen, blocks);
        }
    }
}

#[cfg(unix)]
fn tally(meta: &fs::Metadata, seen: &mut HashSet<(u64, u64)>, blocks: &mut Blocks) {
    use std::os::unix::fs::MetadataExt as _;
    if !seen.insert((meta.dev(), meta.ino())) {
        return;
    }
    // st_blocks is in 512-byte units whatever the filesystem's block size.
    let bytes = meta.blocks() * 512;
    blocks.bytes += bytes;
    if meta.is_dir() || meta.nlink() == 1 {
        blocks.unshared += bytes;
    } else if meta.is_file() {
        blocks.saved += bytes * (meta.nlink() - 1);
    }
}

#[cfg(not(unix))]
fn tally(meta: &fs::Metadata, _seen: &mut HashSet<(u64, u64)>, blocks: &mut Blocks) {
    blocks.bytes += meta.len();
    blocks.unshared += meta.len();
}
