//! Unpacking a package while its bytes arrive, so that a download is never
//! written to disk as an archive and read back: for ten 20 MB providers that
//! round trip was a sixth of a cold install's CPU.
//!
//! A zip is meant to be read from its end, where the central directory lists
//! the entries; a stream meets the local headers first. So this path walks
//! the local headers as they come, inflating each entry into a private
//! staging directory, and keeps every byte that is not file data: the
//! headers, the data descriptors, the central directory and the last 64 KiB.
//! At the end it hands those bytes, at their offsets, to the same checks
//! [`extract_package`] makes on a saved archive (the zip crate's reading of
//! the central directory and its comparison of every local header with it,
//! then our names, kinds and modes), and compares what it inflated with what
//! the central directory says of each entry: offset, sizes and CRC-32.
//!
//! It is a fast path, not a second judge. Whatever it cannot vouch for (an
//! archive with data before its first entry or between entries, zip64
//! entries, a stored entry whose size follows its data, anything the checks
//! refuse, or a read the kept bytes cannot answer) it hands back as
//! [`Declined`], and the caller saves the archive and lets
//! [`extract_package`] decide. So an archive either unpacks here to exactly
//! the tree [`extract_package`] makes of it, or gets [`extract_package`]'s
//! verdict and message.
//!
//! Written by hand because the zip crate's own stream reader refuses entries
//! whose sizes follow their data (as Go's `archive/zip`, and so most provider
//! releases, writes them), although a deflated entry ends by itself.
//!
//! [`extract_package`]: super::extract_package

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use flate2::{Decompress, FlushDecompress, Status};
use zip::ZipArchive;

use super::{
    EntryKind, EntryReader, ExtractLimits, ExtractedFile, PackageWriter, PathClaims, plan_entries,
    validate_name,
};
use crate::sha256::QueuedLane;

const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const DATA_DESCRIPTOR: u32 = 0x0807_4b50;
/// How far back from its end a reader looks for the end-of-central-directory
/// record: its fixed part and the longest comment.
const TAIL_WINDOW: u64 = 22 + 0xFFFF;
/// Most bytes of headers, descriptors and central directory kept: real
/// packages need a few KiB; past this the saved-archive path decides.
const MAX_KEPT_BYTES: u64 = 16 << 20;

/// Why an archive was handed back to the full extractor. Only for the debug
/// log: the full extractor gives the user its own verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declined(pub String);

impl std::fmt::Display for Declined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn declined<T>(reason: impl Into<String>) -> Result<T, Declined> {
    Err(Declined(reason.into()))
}

/// The SHA-256 of a download's bytes as they arrive, queued to be hashed
/// beside the files they unpack to: shared between the thread that reads
/// them and the one that hashes a file, which may be another.
pub type ArchiveHash = Arc<Mutex<QueuedLane>>;

/// A download's bytes in the pieces they arrived in, `None` at the end; an
/// error when the bytes so far are void (the download started over).
pub trait Chunks {
    fn next_chunk(&mut self) -> io::Result<Option<Bytes>>;

    /// The hash of these bytes, if the source keeps one: each unpacked
    /// file's bytes are hashed beside it, two lanes at once (see
    /// [`crate::sha256`]).
    fn archive_hash(&self) -> Option<ArchiveHash> {
        None
    }
}

impl<I: Iterator<Item = Bytes>> Chunks for I {
    fn next_chunk(&mut self) -> io::Result<Option<Bytes>> {
        Ok(self.next())
    }
}

/// Unpacks the archive that `chunks` delivers into `dest` (an existing,
/// empty, private directory) and returns its regular files sorted by name,
/// as [`extract_package`](super::extract_package) does, or [`Declined`].
/// After a decline `dest` holds partial output for the caller to remove,
/// and `chunks` may not have been read to its end.
pub fn unpack_stream(
    chunks: &mut impl Chunks,
    dest: &Path,
    provider_type: &str,
    limits: &ExtractLimits,
) -> Result<Vec<ExtractedFile>, Declined> {
    walk_stream(chunks, Some(dest), provider_type, limits)
}

/// The files [`unpack_stream`] would write, with the same checks, the same
/// declines and the same digests, computed without writing anything: the
/// `h1:` of another platform's package as its download arrives, for the
/// lock file, with no byte of it on disk.
pub fn hash_stream(
    chunks: &mut impl Chunks,
    provider_type: &str,
    limits: &ExtractLimits,
) -> Result<Vec<ExtractedFile>, Declined> {
    walk_stream(chunks, None, provider_type, limits)
}

/// [`unpack_stream`] into `dest`, or [`hash_stream`] without one.
fn walk_stream(
    chunks: &mut impl Chunks,
    dest: Option<&Path>,
    provider_type: &str,
    limits: &ExtractLimits,
) -> Result<Vec<ExtractedFile>, Declined> {
    let mut input = Input {
        chunks,
        current: Bytes::new(),
        offset: 0,
        kept: Vec::new(),
        kept_bytes: 0,
        recent: VecDeque::new(),
        recent_bytes: 0,
    };
    let mut unpacker = Unpacker {
        writer: PackageWriter {
            dest,
            limits,
            created_dirs: Default::default(),
            inflated_total: 0,
        },
        claims: PathClaims::default(),
        entries: Vec::new(),
        files: Vec::new(),
    };
    let central_start = loop {
        let header_start = input.offset;
        match input.read_u32()? {
            LOCAL_HEADER => unpacker.entry(&mut input, header_start)?,
            CENTRAL_HEADER => break header_start,
            _ => return declined("not a local header where the next entry should start"),
        }
    };
    input.keep_rest()?;
    if input.kept_bytes > MAX_KEPT_BYTES {
        return declined("the central directory is too large to keep");
    }
    unpacker.check(input.into_image(central_start), provider_type)
}

/// The stream, read from the front, keeping what the end checks need.
struct Input<'a, C> {
    chunks: &'a mut C,
    current: Bytes,
    /// Offset in the archive of `current`'s first byte.
    offset: u64,
    /// Headers, descriptors and the central directory, at their offsets.
    kept: Vec<(u64, Bytes)>,
    kept_bytes: u64,
    /// The last [`TAIL_WINDOW`] bytes or more, at their offsets.
    recent: VecDeque<(u64, Bytes)>,
    recent_bytes: u64,
}

impl<C: Chunks> Input<'_, C> {
    /// Makes `current` non-empty; false at the end of the stream.
    fn refill(&mut self) -> Result<bool, Declined> {
        while self.current.is_empty() {
            match self.chunks.next_chunk() {
                Ok(Some(chunk)) => self.current = chunk,
                Ok(None) => return Ok(false),
                Err(err) => return declined(format!("reading the download: {err}")),
            }
        }
        Ok(true)
    }

    /// The next bytes of file data, without taking them; `None` at the end.
    fn peek(&mut self) -> Result<Option<Bytes>, Declined> {
        Ok(self.refill()?.then(|| self.current.clone()))
    }

    /// Takes `len` bytes of file data that [`peek`](Self::peek) showed; they
    /// are not kept.
    fn consume(&mut self, len: usize) {
        let taken = self.current.split_to(len);
        self.advance(&taken);
    }

    /// Takes exactly `len` bytes of structure and keeps them.
    fn structure(&mut self, len: usize) -> Result<Bytes, Declined> {
        let start = self.offset;
        let mut parts = Vec::new();
        let mut missing = len;
        while missing > 0 {
            if !self.refill()? {
                return declined("the archive ends inside a header");
            }
            let taken = self.current.split_to(missing.min(self.current.len()));
            self.advance(&taken);
            missing -= taken.len();
            parts.push(taken);
        }
        // Copied: a slice would keep its whole network buffer alive, and an
        // archive of many small entries would pin most of the download.
        let bytes = Bytes::from(parts.concat());
        self.kept_bytes += len as u64;
        if self.kept_bytes > MAX_KEPT_BYTES {
            return declined("too many header bytes to keep");
        }
        self.kept.push((start, bytes.clone()));
        Ok(bytes)
    }

    fn read_u32(&mut self) -> Result<u32, Declined> {
        Ok(self.structure(4)?.get_u32_le())
    }

    /// Keeps everything up to the end of the stream.
    fn keep_rest(&mut self) -> Result<(), Declined> {
        while self.refill()? {
            let len = self.current.len();
            self.structure(len)?;
        }
        Ok(())
    }

    fn advance(&mut self, taken: &Bytes) {
        self.recent.push_back((self.offset, taken.clone()));
        self.recent_bytes += taken.len() as u64;
        self.offset += taken.len() as u64;
        while let Some((_, oldest)) = self.recent.front() {
            if self.recent_bytes - (oldest.len() as u64) < TAIL_WINDOW {
                break;
            }
            self.recent_bytes -= oldest.len() as u64;
            self.recent.pop_front();
        }
    }

    fn into_image(self, central_start: u64) -> KeptImage {
        let mut all = self.kept;
        all.extend(self.recent);
        all.sort_by_key(|(at, _)| *at);
        // Kept and recent bytes overlap where they are the same bytes of the
        // stream; merged, the pieces can be found by binary search.
        let mut pieces: Vec<(u64, Bytes)> = Vec::with_capacity(all.len());
        for (mut start, mut bytes) in all {
            if let Some((last_start, last)) = pieces.last() {
                let last_end = last_start + last.len() as u64;
                let end = start + bytes.len() as u64;
                if end <= last_end {
                    continue;
                }
                if start < last_end {
                    bytes = bytes.slice((last_end - start) as usize..);
                    start = last_end;
                }
            }
            if !bytes.is_empty() {
                pieces.push((start, bytes));
            }
        }
        KeptImage {
            pieces,
            len: self.offset,
            position: 0,
            central_start,
        }
    }
}

/// The archive as far as it was kept: a reader over the kept bytes at their
/// offsets that fails on anything else, so that a check needing file data
/// declines instead of judging without it.
struct KeptImage {
    /// Sorted, not overlapping.
    pieces: Vec<(u64, Bytes)>,
    len: u64,
    position: u64,
    central_start: u64,
}

impl Read for KeptImage {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.position >= self.len || buf.is_empty() {
            return Ok(0);
        }
        let at = self.position;
        let after = self.pieces.partition_point(|(start, _)| *start <= at);
        let found = after
            .checked_sub(1)
            .map(|index| &self.pieces[index])
            .filter(|(start, bytes)| at < start + bytes.len() as u64);
        let Some((start, bytes)) = found else {
            return Err(io::Error::other(
                "a byte the streaming unpacker did not keep",
            ));
        };
        let from = (at - start) as usize;
        let len = (bytes.len() - from).min(buf.len());
        buf[..len].copy_from_slice(&bytes[from..from + len]);
        self.position += len as u64;
        Ok(len)
    }
}

impl Seek for KeptImage {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let target = match pos {
            SeekFrom::Start(at) => Some(at),
            SeekFrom::End(delta) => self.len.checked_add_signed(delta),
            SeekFrom::Current(delta) => self.position.checked_add_signed(delta),
        };
        self.position =
            target.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad seek"))?;
        Ok(self.position)
    }
}

/// One local entry as the stream showed it.
struct StreamedEntry {
    header_start: u64,
    name: Vec<u8>,
    /// A regular file's index in `files`, its compressed size and CRC-32;
    /// `None` for a directory.
    file: Option<(usize, u64, u32)>,
}

struct Unpacker<'a> {
    writer: PackageWriter<'a>,
    claims: PathClaims,
    entries: Vec<StreamedEntry>,
    files: Vec<ExtractedFile>,
}

impl Unpacker<'_> {
    /// Reads one local entry after its signature and unpacks it.
    fn entry(
        &mut self,
        input: &mut Input<'_, impl Chunks>,
        header_start: u64,
    ) -> Result<(), Declined> {
        if self.entries.len() as u64 >= self.writer.limits.max_entries {
            return declined("more entries than the limit");
        }
        let mut header = input.structure(26)?;
        let _version = header.get_u16_le();
        let flags = header.get_u16_le();
        let method = header.get_u16_le();
        let _time = header.get_u32_le();
        let crc32 = header.get_u32_le();
        let compressed = header.get_u32_le();
        let size = header.get_u32_le();
        let name_len = header.get_u16_le();
        let extra_len = header.get_u16_le();
        let name = input.structure(usize::from(name_len))?.to_vec();
        input.structure(usize::from(extra_len))?;
        if flags & 0x0001 != 0 {
            return declined("an encrypted entry");
        }
        if compressed == u32::MAX || size == u32::MAX {
            return declined("a zip64 entry");
        }
        let described_after = flags & 0x0008 != 0;
        let Ok((path, named_as_dir)) = validate_name(&name) else {
            return declined("an unsafe entry name");
        };
        let path = path.to_owned();
        let shown = String::from_utf8_lossy(&name).into_owned();
        self.claims
            .claim_entry(&path, &shown, named_as_dir)
            .map_err(|err| Declined(err.to_string()))?;
        if named_as_dir {
            if method != 0 || compressed != 0 || size != 0 || described_after {
                return declined("a directory entry with data");
            }
            self.ensure_dir(&path)?;
            self.entries.push(StreamedEntry {
                header_start,
                name,
                file: None,
            });
            return Ok(());
        }
        let known = (!described_after).then_some(u64::from(compressed));
        let data = match (method, known) {
            (0, Some(len)) => EntryData::Stored { left: len },
            (8, _) => EntryData::Deflated {
                inflater: Box::new(Decompress::new(false)),
                left: known,
                ended: false,
            },
            _ => return declined("an entry that cannot be read from the front"),
        };
        let expected_size = (!described_after).then_some(u64::from(size));
        let (file, consumed, file_crc) = self.write_file(input, &path, data, expected_size)?;
        let mut described = (crc32, u64::from(compressed), u64::from(size));
        if described_after {
            let mut descriptor = input.structure(12)?;
            if descriptor.clone().get_u32_le() == DATA_DESCRIPTOR {
                descriptor.advance(4);
                let more = input.structure(4)?;
                descriptor = [descriptor, more].concat().into();
            }
            described = (
                descriptor.get_u32_le(),
                u64::from(descriptor.get_u32_le()),
                u64::from(descriptor.get_u32_le()),
            );
        }
        if described != (file_crc, consumed, file.size) {
            return declined("an entry that is not what its header says");
        }
        self.files.push(file);
        self.entries.push(StreamedEntry {
            header_start,
            name,
            file: Some((self.files.len() - 1, consumed, file_crc)),
        });
        Ok(())
    }

    fn ensure_dir(&mut self, path: &str) -> Result<(), Declined> {
        self.writer
            .ensure_dir(path)
            .map_err(|err| Declined(err.to_string()))
    }

    /// Inflates, hashes and writes one file, private until the central
    /// directory gives its mode; the file, the compressed bytes it took and
    /// its CRC-32.
    fn write_file(
        &mut self,
        input: &mut Input<'_, impl Chunks>,
        path: &str,
        mut data: EntryData,
        expected_size: Option<u64>,
    ) -> Result<(ExtractedFile, u64, u32), Declined> {
        let consumed = Cell::new(0);
        let reader = DataReader {
            input,
            data: &mut data,
            consumed: &consumed,
        };
        let (file, _, crc32) = self
            .writer
            .write_data(path, path, reader, || consumed.get(), expected_size)
            .map_err(|err| Declined(err.to_string()))?;
        Ok((file, consumed.get(), crc32))
    }

    /// Runs [`extract_package`](super::extract_package)'s checks on the kept
    /// bytes and compares each entry with what was unpacked.
    fn check(self, image: KeptImage, provider_type: &str) -> Result<Vec<ExtractedFile>, Declined> {
        let central_start = image.central_start;
        let mut archive = ZipArchive::new(image)
            .map_err(|err| Declined(format!("the central directory: {err}")))?;
        if archive.is_empty() || archive.len() != self.entries.len() {
            return declined("the central directory lists other entries");
        }
        if archive.has_duplicate_names() {
            return declined("duplicate names");
        }
        archive
            .validate_header_consistency()
            .map_err(|err| Declined(format!("inconsistent headers: {err}")))?;
        let plan =
            plan_entries(&archive, Some(provider_type)).map_err(|err| Declined(err.to_string()))?;
        let by_start: HashMap<u64, &StreamedEntry> = self
            .entries
            .iter()
            .map(|entry| (entry.header_start, entry))
            .collect();
        for planned in &plan {
            let central = archive
                .by_index_data(planned.index)
                .map_err(|err| Declined(err.to_string()))?;
            if central.header_start() >= central_start {
                return declined("an entry inside the central directory");
            }
            let Some(streamed) = by_start.get(&central.header_start()) else {
                return declined("an entry the stream did not show");
            };
            if streamed.name != central.name_raw() {
                return declined("an entry named differently in the central directory");
            }
            match (planned.kind, streamed.file) {
                (EntryKind::Directory, None) => {}
                (EntryKind::File { mode }, Some((index, compressed, crc32))) => {
                    let file = &self.files[index];
                    if (compressed, file.size, crc32)
                        != (
                            planned.compressed_size,
                            planned.declared_size,
                            planned.crc32,
                        )
                    {
                        return declined("an entry the central directory describes otherwise");
                    }
                    if let Some(dest) = self.writer.dest {
                        set_mode(&dest.join(&planned.path), mode)
                            .map_err(|err| Declined(err.to_string()))?;
                    }
                }
                _ => return declined("an entry of another kind in the central directory"),
            }
        }
        let mut files = self.files;
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }
}

/// How an entry's data is read off the stream.
enum EntryData {
    Stored {
        left: u64,
    },
    /// A deflate stream ends by itself, so its length need not be known.
    Deflated {
        inflater: Box<Decompress>,
        left: Option<u64>,
        ended: bool,
    },
}

/// One entry's data as a reader, counting the compressed bytes it takes.
struct DataReader<'i, 'c, C> {
    input: &'i mut Input<'c, C>,
    data: &'i mut EntryData,
    consumed: &'i Cell<u64>,
}

impl<C: Chunks> EntryReader for DataReader<'_, '_, C> {
    fn archive_hash(&self) -> Option<ArchiveHash> {
        self.input.chunks.archive_hash()
    }
}

impl<C: Chunks> Read for DataReader<'_, '_, C> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let decline = |reason: Declined| io::Error::other(reason.0);
        match self.data {
            EntryData::Stored { left } => {
                if *left == 0 || buf.is_empty() {
                    return Ok(0);
                }
                let Some(chunk) = self.input.peek().map_err(decline)? else {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                };
                let len = chunk
                    .len()
                    .min(buf.len())
                    .min(usize::try_from(*left).unwrap_or(usize::MAX));
                buf[..len].copy_from_slice(&chunk[..len]);
                self.input.consume(len);
                *left -= len as u64;
                self.consumed.set(self.consumed.get() + len as u64);
                Ok(len)
            }
            EntryData::Deflated {
                inflater,
                left,
                ended,
            } => loop {
                if *ended || buf.is_empty() {
                    return Ok(0);
                }
                let mut chunk = self.input.peek().map_err(decline)?.unwrap_or_default();
                if let Some(left) = left {
                    chunk.truncate(usize::try_from(*left).unwrap_or(usize::MAX));
                }
                let (before_in, before_out) = (inflater.total_in(), inflater.total_out());
                let status = inflater
                    .decompress(&chunk, buf, FlushDecompress::None)
                    .map_err(io::Error::other)?;
                let used = (inflater.total_in() - before_in) as usize;
                let produced = (inflater.total_out() - before_out) as usize;
                self.input.consume(used);
                self.consumed.set(self.consumed.get() + used as u64);
                if let Some(left) = left {
                    *left -= used as u64;
                }
                if status == Status::StreamEnd {
                    *ended = true;
                } else if produced == 0 && used == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                if produced > 0 || *ended {
                    return Ok(produced);
                }
            },
        }
    }
}

/// Sets a file's final mode by its path: the staging directory is private
/// and holds only what this unpacker created, so no link can stand there.
#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
    Ok(())
}
