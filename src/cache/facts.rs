//! What a plugin cache entry's files are, and what vouches for them: the
//! one reading of an entry that `init`'s cache use and the lock file's
//! other-platform hashes share, so the two never disagree about whether a
//! record still describes the files.

use crate::cache::{CacheEntry, EntryMeta};
use crate::fsutil::blocking;
use crate::package::extract::find_executable;
use crate::package::stamps::DirStamps;
use crate::verify::AuthResult;
use crate::verify::hash::PackageHash;

/// The `h1:` of a cache entry's files, with the stamps they had before it
/// was found (a write since shows in them).
pub struct EntryHash {
    pub h1: PackageHash,
    pub stamps: Option<DirStamps>,
    /// Hashed now, rather than taken from provenance whose stamps still hold.
    pub computed: bool,
}

/// The `h1:` of a cache entry's files: the one its provenance recorded,
/// when the files' stamps still hold, or else their hash now. `None` when
/// the entry holds no provider executable or cannot be read.
pub async fn entry_h1(entry: CacheEntry, type_name: String) -> Option<EntryHash> {
    blocking(move || {
        find_executable(&entry.dir, &type_name).map_err(std::io::Error::other)?;
        // Taken once, before any hashing: a write while hashing shows in
        // them later.
        let stamps = DirStamps::of(&entry.dir)?;
        let stamped = entry
            .meta
            .as_ref()
            .filter(|m| {
                m.stamps
                    .as_ref()
                    .zip(stamps.as_ref())
                    .is_some_and(|(then, now)| then.still_hold_in(now))
            })
            .and_then(EntryMeta::h1);
        Ok(match stamped {
            Some(h1) => EntryHash {
                h1,
                stamps,
                computed: false,
            },
            None => EntryHash {
                h1: PackageHash::h1_of_dir(&entry.dir)?,
                stamps,
                computed: true,
            },
        })
    })
    .await
    .ok()
}

/// What vouches for a cache entry's files: their `h1:`, and the entry's
/// provenance when it describes these files.
#[derive(Clone, Debug)]
pub struct EntryFacts {
    pub h1: PackageHash,
    /// The archive's hash, from tfinstall's record.
    pub zh: Option<PackageHash>,
    /// Whether tfinstall's record of how the entry was verified holds.
    pub recorded: bool,
    pub auth: AuthResult,
    pub signed_hashes: Vec<PackageHash>,
}

impl EntryFacts {
    /// The facts of files hashing to `h1` under the provenance `meta`; a
    /// record of another hash describes other files and counts for nothing.
    pub fn of(h1: PackageHash, meta: Option<&EntryMeta>) -> Self {
        let meta = meta.filter(|m| m.h1().as_ref() == Some(&h1));
        EntryFacts {
            zh: meta
                .and_then(|m| m.zh.as_deref())
                .and_then(|z| PackageHash::parse(z).ok()),
            recorded: meta.is_some(),
            auth: meta.map_or(AuthResult::Unauthenticated, |m| AuthResult::from(&m.auth)),
            signed_hashes: meta.map(EntryMeta::signed_hashes).unwrap_or_default(),
            h1,
        }
    }
}
