//! The streaming writer: each entry inflated, held to the limits, hashed
//! and written in one pass, a large one on two threads.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::sha256::Sha256Lane;

use super::error::ExtractError;
use super::limits::{ExtractLimits, RATIO_GRACE_BYTES};
use super::read::PlannedEntry;
use super::{ArchiveHash, ExtractedFile};

/// An entry's inflated bytes, read by [`PackageWriter::write_data`].
pub(super) trait EntryReader: Read {
    /// For a download unpacked as it arrives, the hash of the archive: the
    /// entry's bytes are hashed beside it, two lanes at once, on whichever
    /// thread hashes the file.
    fn archive_hash(&self) -> Option<ArchiveHash> {
        None
    }
}

impl<R: Read> EntryReader for zip::read::ZipFile<'_, R> {}

/// Reads of the archive and writes of its files go in pieces this large: the
/// inflater hands out no more than its input buffer holds, and with the
/// default 8 KiB a 200 MB package took 25,000 reads and as many writes.
pub(super) const COPY_BUFFER_BYTES: usize = 256 * 1024;
/// Entries declaring at least this size (or no size: a download's entry
/// whose sizes follow its data) may get a second thread once their first
/// buffer is done (see [`copy`]); below it a thread costs more than it
/// saves.
pub(super) const PIPELINE_MIN_BYTES: u64 = 8 << 20;
/// The name of the thread that hashes and writes a large entry while the
/// one that started it inflates. Created by a download's unpacking thread,
/// it takes that thread's scheduling priority (Linux threads start with
/// their creator's nice value), so it yields to the network thread too.
pub(super) const SECOND_THREAD_NAME: &str = "hash-and-write";

pub(super) struct PackageWriter<'a> {
    /// Where the files go; `None` when the package is only hashed: every
    /// entry is still inflated, held to the limits and checked, and nothing
    /// is written.
    pub(super) dest: Option<&'a Path>,
    pub(super) limits: &'a ExtractLimits,
    /// Relative paths of directories already created, so each is made once.
    pub(super) created_dirs: HashSet<String>,
    pub(super) inflated_total: u64,
}

impl PackageWriter<'_> {
    /// Creates `path` and its missing ancestors below `dest`, each one new:
    /// an existing entry, link or not, is an error rather than something to
    /// reuse.
    pub(super) fn ensure_dir(&mut self, path: &str) -> Result<(), ExtractError> {
        let ends = path
            .match_indices('/')
            .map(|(end, _)| end)
            .chain(std::iter::once(path.len()));
        for end in ends {
            let prefix = &path[..end];
            if self.created_dirs.contains(prefix) {
                continue;
            }
            if let Some(dest) = self.dest {
                create_new_dir(&dest.join(prefix))?;
            }
            self.created_dirs.insert(prefix.to_owned());
        }
        Ok(())
    }

    pub(super) fn write_file(
        &mut self,
        entry: &PlannedEntry,
        mode: u32,
        data: impl EntryReader,
    ) -> Result<ExtractedFile, ExtractError> {
        // The compressed size bounds what the zip crate reads from the
        // archive for this entry, so it is a sound denominator even if the
        // header lies about it.
        let (file, out, actual) = self.write_data(
            &entry.path,
            &entry.name,
            data,
            || entry.compressed_size,
            Some(entry.declared_size),
        )?;
        if file.size != entry.declared_size {
            return Err(ExtractError::CorruptEntry {
                name: entry.name.clone(),
                detail: format!(
                    "it inflates to {} bytes but its header declares {}",
                    file.size, entry.declared_size
                ),
            });
        }
        if actual != entry.crc32 {
            return Err(ExtractError::CrcMismatch {
                name: entry.name.clone(),
                expected: entry.crc32,
                actual,
            });
        }
        if let (Some(out), Some(dest)) = (&out, self.dest) {
            set_file_mode(out, mode).map_err(|source| ExtractError::Write {
                path: dest.join(&entry.path),
                source,
            })?;
        }
        Ok(file)
    }

    /// Inflates `data` into a new private file at `path` (entry `name` in
    /// messages), hashing it and holding it to the limits; the file, its
    /// handle (none when nothing is written) and its CRC-32. `compressed`
    /// is how many compressed bytes the entry has taken so far, the ratio's
    /// denominator; `expected_size` decides whether hashing and writing may
    /// get a thread of their own.
    pub(super) fn write_data(
        &mut self,
        path: &str,
        name: &str,
        mut data: impl EntryReader,
        compressed: impl Fn() -> u64,
        expected_size: Option<u64>,
    ) -> Result<(ExtractedFile, Option<File>, u32), ExtractError> {
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.ensure_dir(parent)?;
        }
        let full_path = self
            .dest
            .map_or_else(|| PathBuf::from(path), |d| d.join(path));
        let write_err = |source| ExtractError::Write {
            path: full_path.clone(),
            source,
        };
        let out = match self.dest {
            Some(_) => Some(create_new_file(&full_path).map_err(write_err)?),
            None => None,
        };
        let output = FileOutput {
            out,
            crc32: crc32fast::Hasher::new(),
            sha256: Sha256Lane::new(),
            archive_hash: data.archive_hash(),
        };
        let mut size: u64 = 0;
        let _unpacking = Unpacking::start();
        let large = expected_size.is_none_or(|size| size >= PIPELINE_MIN_BYTES);
        // Inflates one buffer and checks the limits on it; false once the
        // entry has ended.
        let mut inflate = |buffer: &mut Vec<u8>| -> Result<bool, ExtractError> {
            let (filled, at_end) =
                fill(&mut data, buffer).map_err(|err| ExtractError::CorruptEntry {
                    name: name.to_owned(),
                    detail: err.to_string(),
                })?;
            buffer.truncate(filled);
            let chunk_len = u64::try_from(filled).unwrap_or(u64::MAX);
            size = size.saturating_add(chunk_len);
            self.inflated_total = self.inflated_total.saturating_add(chunk_len);
            if self.inflated_total > self.limits.max_total_bytes {
                return Err(ExtractError::TooLarge {
                    limit: self.limits.max_total_bytes,
                });
            }
            let ratio_cap = compressed()
                .saturating_mul(self.limits.max_ratio)
                .max(RATIO_GRACE_BYTES);
            if size > ratio_cap {
                return Err(ExtractError::RatioExceeded {
                    name: name.to_owned(),
                    limit: self.limits.max_ratio,
                });
            }
            Ok(!at_end)
        };
        let output = copy(output, &mut inflate, large.then_some(name), &write_err)?;
        let file = ExtractedFile {
            name: path.to_owned(),
            sha256: output.sha256.finalize(),
            size,
        };
        Ok((file, output.out, output.crc32.finalize()))
    }
}

/// Counts the threads unpacking entries in this process. A second thread
/// for an entry pays only while a core is idle: when packages unpack side
/// by side they already keep every core busy, and more threads would only
/// add their buffers to the memory used.
pub(super) struct Unpacking;

pub(super) static UNPACKING: AtomicUsize = AtomicUsize::new(0);

impl Unpacking {
    pub(super) fn start() -> Unpacking {
        UNPACKING.fetch_add(1, Ordering::SeqCst);
        Unpacking
    }

    /// Counts in one more thread if a core is idle.
    fn spare_core() -> Option<Unpacking> {
        // Read once: on Linux it consults cgroup files every time.
        static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let cores =
            *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
        UNPACKING
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |busy| {
                (busy < cores).then_some(busy + 1)
            })
            .ok()
            .map(|_| Unpacking)
    }
}

impl Drop for Unpacking {
    fn drop(&mut self) {
        UNPACKING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Fills `buffer` (resized to [`COPY_BUFFER_BYTES`]) from `data`, since the
/// zip crate's inflater returns at most 8 KiB per read. Returns how much it
/// holds and whether the entry ended.
pub(super) fn fill(data: &mut impl Read, buffer: &mut Vec<u8>) -> io::Result<(usize, bool)> {
    buffer.resize(COPY_BUFFER_BYTES, 0);
    let mut filled = 0;
    while filled < buffer.len() {
        match data.read(&mut buffer[filled..]) {
            Ok(0) => return Ok((filled, true)),
            Ok(read) => filled += read.min(buffer.len() - filled),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok((filled, false))
}

/// Where one file's inflated bytes go: its CRC-32, its SHA-256 (beside the
/// archive's, for a download unpacked as it arrives) and the file itself,
/// unless the package is only hashed.
pub(super) struct FileOutput {
    pub(super) out: Option<File>,
    pub(super) crc32: crc32fast::Hasher,
    pub(super) sha256: Sha256Lane,
    pub(super) archive_hash: Option<ArchiveHash>,
}

impl FileOutput {
    fn take(&mut self, buffer: &[u8]) -> io::Result<()> {
        self.crc32.update(buffer);
        let alone = match &self.archive_hash {
            Some(archive) => archive
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .update_beside(&mut self.sha256, buffer),
            None => buffer,
        };
        self.sha256.update(alone);
        match &mut self.out {
            Some(out) => out.write_all(buffer),
            None => Ok(()),
        }
    }
}

/// Inflates buffer after buffer into `output` on this thread until an entry
/// that may be large (`large_entry`, named for the log) has more than one
/// buffer while a core is idle; from then on a second thread hashes and
/// writes each buffer while this one inflates the next. Inflating is the
/// larger half: one after the other, the two left a core idle for the
/// second or more a big provider takes.
pub(super) fn copy(
    mut output: FileOutput,
    inflate: &mut impl FnMut(&mut Vec<u8>) -> Result<bool, ExtractError>,
    large_entry: Option<&str>,
    write_err: &impl Fn(io::Error) -> ExtractError,
) -> Result<FileOutput, ExtractError> {
    let mut buffer = Vec::with_capacity(COPY_BUFFER_BYTES);
    let mut inflated = 0;
    loop {
        let more = inflate(&mut buffer)?;
        output.take(&buffer).map_err(write_err)?;
        if !more {
            return Ok(output);
        }
        inflated += buffer.len();
        if let Some(name) = large_entry
            && let Some(core) = Unpacking::spare_core()
        {
            tracing::debug!(
                "archive entry {name:?}: hashing and writing on a second thread from byte {inflated}"
            );
            return copy_on_two_threads(output, inflate, buffer, core, write_err);
        }
    }
}

/// The rest of [`copy`] on two threads. A few buffers go round between
/// them, so memory stays flat; the hand-off is bounded both ways.
pub(super) fn copy_on_two_threads(
    output: FileOutput,
    inflate: &mut impl FnMut(&mut Vec<u8>) -> Result<bool, ExtractError>,
    spare: Vec<u8>,
    core: Unpacking,
    write_err: &impl Fn(io::Error) -> ExtractError,
) -> Result<FileOutput, ExtractError> {
    const BUFFERS: usize = 3;
    let (full_tx, full_rx) = mpsc::sync_channel::<Vec<u8>>(BUFFERS);
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Vec<u8>>(BUFFERS);
    let _ = empty_tx.send(spare);
    for _ in 1..BUFFERS {
        let _ = empty_tx.send(Vec::with_capacity(COPY_BUFFER_BYTES));
    }
    std::thread::scope(|scope| {
        let writer = std::thread::Builder::new()
            .name(SECOND_THREAD_NAME.to_owned())
            .spawn_scoped(scope, move || {
                let _core = core;
                let mut output = output;
                for buffer in full_rx {
                    if let Err(err) = output.take(&buffer) {
                        return (output, Err(err));
                    }
                    // The inflating side may have stopped already.
                    let _ = empty_tx.send(buffer);
                }
                (output, Ok(()))
            })
            .map_err(write_err)?;
        let inflated = (|| {
            // Ends early, without error, when the writer stopped: its own
            // error is the one to report.
            while let Ok(mut buffer) = empty_rx.recv() {
                let more = inflate(&mut buffer)?;
                if full_tx.send(buffer).is_err() || !more {
                    break;
                }
            }
            Ok(())
        })();
        drop(full_tx);
        let (output, written) = writer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        inflated?;
        written.map_err(write_err)?;
        Ok(output)
    })
}

/// Creates a file that must not exist yet (`O_EXCL`, which also refuses to
/// follow a link), readable only by us until its final mode is set.
pub(super) fn create_new_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// Sets the mode through the open handle, so it applies to the file we wrote
/// even if its path were swapped meanwhile; the umask plays no part.
#[cfg(unix)]
pub(super) fn set_file_mode(file: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
pub(super) fn set_file_mode(_file: &File, _mode: u32) -> io::Result<()> {
    Ok(())
}

pub(super) fn create_new_dir(path: &Path) -> Result<(), ExtractError> {
    let write_err = |source| ExtractError::Write {
        path: path.to_path_buf(),
        source,
    };
    fs::create_dir(path).map_err(write_err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).map_err(write_err)?;
    }
    Ok(())
}
