//! Zip archives for tests: well-formed provider packages written with the
//! `zip` crate, and hostile archives written byte by byte, because a
//! well-behaved writer refuses to produce exactly the things an extractor
//! must survive (duplicate names, lying sizes, bombs).

use std::io::{Cursor, Seek, Write};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

/// One file for [`build_zip`].
#[derive(Clone, Debug)]
pub struct ZipEntry {
    pub name: String,
    pub data: Vec<u8>,
    /// Unix permission bits, e.g. `0o755`.
    pub mode: u32,
}

impl ZipEntry {
    pub fn new(name: impl Into<String>, data: impl Into<Vec<u8>>, mode: u32) -> Self {
        ZipEntry {
            name: name.into(),
            data: data.into(),
            mode,
        }
    }

    /// Mode 0755, like a provider executable.
    pub fn executable(name: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        Self::new(name, data, 0o755)
    }

    /// Mode 0644, like a README or LICENSE beside the executable.
    pub fn file(name: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        Self::new(name, data, 0o644)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Deflated,
    Stored,
}

/// A well-formed zip with Unix modes and a fixed timestamp, so the same
/// entries always give the same bytes (and so the same `zh:` hash).
pub fn build_zip(entries: &[ZipEntry], compression: Compression) -> Vec<u8> {
    let method = match compression {
        Compression::Deflated => CompressionMethod::Deflated,
        Compression::Stored => CompressionMethod::Stored,
    };
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    write_entries(&mut writer, entries, method);
    writer.finish().expect("finish zip").into_inner()
}

/// A deflated zip written front to back as Go's `archive/zip` writes every
/// provider release goreleaser packs: each entry's sizes and CRC-32 in a
/// data descriptor after its data, none in its local header.
pub fn build_zip_sizes_after(entries: &[ZipEntry]) -> Vec<u8> {
    let mut writer = ZipWriter::new_stream(Vec::new());
    write_entries(&mut writer, entries, CompressionMethod::Deflated);
    writer.finish().expect("finish zip").into_inner()
}

/// Each entry with its mode and the fixed timestamp.
fn write_entries<W: Write + Seek>(
    writer: &mut ZipWriter<W>,
    entries: &[ZipEntry],
    method: CompressionMethod,
) {
    for entry in entries {
        let options = SimpleFileOptions::default()
            .compression_method(method)
            .last_modified_time(DateTime::default())
            .unix_permissions(entry.mode);
        writer
            .start_file(entry.name.as_str(), options)
            .expect("start zip entry");
        writer.write_all(&entry.data).expect("write zip entry");
    }
}

/// Unix file-type bits for the external attributes of a raw entry.
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;

struct RawEntry {
    name: Vec<u8>,
    method: u16,
    stored_data: Vec<u8>,
    crc32: u32,
    uncompressed_size: u32,
    external_mode: u32,
}

/// A byte-level zip writer for hostile archives.
///
/// Names are written exactly as given: `../escape`, `/etc/absolute`,
/// `a\\b`, non-UTF-8 bytes and repeated names all end up in the archive.
///
/// ```ignore
/// let zip = RawZip::new()
///     .file("../outside", b"x", 0o644)
///     .symlink("link", "/etc/passwd")
///     .file("same", b"1", 0o644)
///     .file("same", b"2", 0o644)
///     .deflate_bomb("terraform-provider-bomb", 1 << 30)
///     .build();
/// ```
#[derive(Default)]
pub struct RawZip {
    entries: Vec<RawEntry>,
}

impl RawZip {
    pub fn new() -> Self {
        Self::default()
    }

    /// A stored (uncompressed) regular file.
    pub fn file(self, name: impl AsRef<[u8]>, data: &[u8], mode: u32) -> Self {
        self.stored(name.as_ref(), data, S_IFREG | mode)
    }

    /// A directory entry; by convention the name ends with `/`.
    pub fn dir(self, name: impl AsRef<[u8]>) -> Self {
        self.stored(name.as_ref(), b"", S_IFDIR | 0o755)
    }

    /// A symlink entry: Unix mode `0o120777`, content = the link target.
    pub fn symlink(self, name: impl AsRef<[u8]>, target: &str) -> Self {
        self.stored(name.as_ref(), target.as_bytes(), S_IFLNK | 0o777)
    }

    /// A deflated regular file (mode 0755) that inflates to
    /// `uncompressed_len` zero bytes from about a thousandth of that, with
    /// honest sizes and CRC, so only a size or ratio limit can stop it.
    pub fn deflate_bomb(mut self, name: impl AsRef<[u8]>, uncompressed_len: u64) -> Self {
        let uncompressed_size =
            u32::try_from(uncompressed_len).expect("bombs are limited to 4 GiB (no zip64)");
        self.entries.push(RawEntry {
            name: name.as_ref().to_vec(),
            method: 8,
            stored_data: deflate_zeros(uncompressed_len),
            crc32: crc32_of_zeros(uncompressed_len),
            uncompressed_size,
            external_mode: S_IFREG | 0o755,
        });
        self
    }

    /// Makes the last entry's headers claim `size` uncompressed bytes
    /// (local header and central directory alike) without changing its data.
    pub fn declared_size(mut self, size: u32) -> Self {
        let entry = self
            .entries
            .last_mut()
            .expect("declared_size needs an entry");
        entry.uncompressed_size = size;
        self
    }

    fn stored(mut self, name: &[u8], data: &[u8], external_mode: u32) -> Self {
        let mut crc = crc32fast::Hasher::new();
        crc.update(data);
        self.entries.push(RawEntry {
            name: name.to_vec(),
            method: 0,
            stored_data: data.to_vec(),
            crc32: crc.finalize(),
            uncompressed_size: u32::try_from(data.len()).expect("entry under 4 GiB"),
            external_mode,
        });
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for entry in &self.entries {
            let offset = u32::try_from(out.len()).expect("archive under 4 GiB");
            let compressed_size =
                u32::try_from(entry.stored_data.len()).expect("entry under 4 GiB");
            // Bit 11 tells readers the name is UTF-8; only claim it when true.
            let flags: u16 = match std::str::from_utf8(&entry.name) {
                Ok(name) if !name.is_ascii() => 0x0800,
                _ => 0,
            };
            let name_len = u16::try_from(entry.name.len()).expect("name under 64 KiB");
            // 1980-01-01 00:00, the DOS epoch: deterministic output.
            let (dos_time, dos_date) = (0u16, 0x0021u16);

            put_u32(&mut out, 0x0403_4b50);
            put_u16(&mut out, 20);
            put_u16(&mut out, flags);
            put_u16(&mut out, entry.method);
            put_u16(&mut out, dos_time);
            put_u16(&mut out, dos_date);
            put_u32(&mut out, entry.crc32);
            put_u32(&mut out, compressed_size);
            put_u32(&mut out, entry.uncompressed_size);
            put_u16(&mut out, name_len);
            put_u16(&mut out, 0);
            out.extend_from_slice(&entry.name);
            out.extend_from_slice(&entry.stored_data);

            put_u32(&mut central, 0x0201_4b50);
            // "Made by" Unix (3), spec 2.0: readers then honour the mode bits.
            put_u16(&mut central, (3 << 8) | 20);
            put_u16(&mut central, 20);
            put_u16(&mut central, flags);
            put_u16(&mut central, entry.method);
            put_u16(&mut central, dos_time);
            put_u16(&mut central, dos_date);
            put_u32(&mut central, entry.crc32);
            put_u32(&mut central, compressed_size);
            put_u32(&mut central, entry.uncompressed_size);
            put_u16(&mut central, name_len);
            put_u16(&mut central, 0);
            put_u16(&mut central, 0);
            put_u16(&mut central, 0);
            put_u16(&mut central, 0);
            let dos_directory_bit = u32::from(entry.external_mode & S_IFDIR == S_IFDIR) << 4;
            put_u32(
                &mut central,
                (entry.external_mode << 16) | dos_directory_bit,
            );
            put_u32(&mut central, offset);
            central.extend_from_slice(&entry.name);
        }
        let central_offset = u32::try_from(out.len()).expect("archive under 4 GiB");
        let central_size = u32::try_from(central.len()).expect("directory under 4 GiB");
        let count = u16::try_from(self.entries.len()).expect("under 65536 entries");
        out.extend_from_slice(&central);
        put_u32(&mut out, 0x0605_4b50);
        put_u16(&mut out, 0);
        put_u16(&mut out, 0);
        put_u16(&mut out, count);
        put_u16(&mut out, count);
        put_u32(&mut out, central_size);
        put_u32(&mut out, central_offset);
        put_u16(&mut out, 0);
        out
    }
}

fn put_u16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// The CRC-32 of `len` zero bytes without touching `len` bytes: the CRC of
/// a 1 MiB block, combined with itself by doubling (all blocks are equal, so
/// their order does not matter).
fn crc32_of_zeros(len: u64) -> u32 {
    const BLOCK: u64 = 1 << 20;
    let zeros = vec![0u8; BLOCK as usize];
    let mut power = crc32fast::Hasher::new();
    power.update(&zeros);
    let mut total = crc32fast::Hasher::new();
    let mut blocks = len / BLOCK;
    while blocks > 0 {
        if blocks & 1 == 1 {
            total.combine(&power);
        }
        let doubled = power.clone();
        power.combine(&doubled);
        blocks >>= 1;
    }
    let mut tail = crc32fast::Hasher::new();
    tail.update(&zeros[..(len % BLOCK) as usize]);
    total.combine(&tail);
    total.finalize()
}

/// A raw deflate stream of `len` zero bytes, ~1000:1.
///
/// One dynamic-Huffman block whose codes are chosen so that a 258-byte
/// back-reference costs 2 bits: literal/length code 285 (length 258) gets a
/// 1-bit code, literal 0 and end-of-block 2 bits each; two distance codes of
/// 1 bit (only distance 1 is used, the second keeps the code complete).
fn deflate_zeros(len: u64) -> Vec<u8> {
    let mut bits = BitWriter::default();
    bits.put(1, 1); // BFINAL
    bits.put(2, 2); // BTYPE = dynamic Huffman
    bits.put(286 - 257, 5); // HLIT: literal/length codes 0..=285
    bits.put(2 - 1, 5); // HDIST: distance codes 0..=1
    // Code-length code lengths in RFC 1951's permuted order, up to the
    // entry for length 1 (the 18th): symbol 18 gets 1 bit, 1 and 2 get 2.
    const ORDER: [u8; 18] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1];
    bits.put(ORDER.len() as u32 - 4, 4); // HCLEN
    for symbol in ORDER {
        let length = match symbol {
            18 => 1,
            1 | 2 => 2,
            _ => 0,
        };
        bits.put(length, 3);
    }
    // Canonical codes of the code-length alphabet: 18 = 0, 1 = 10, 2 = 11.
    let code_length_2 = |bits: &mut BitWriter| bits.huffman(0b11, 2);
    let code_length_1 = |bits: &mut BitWriter| bits.huffman(0b10, 2);
    let zero_run = |bits: &mut BitWriter, run: u32| {
        bits.huffman(0b0, 1);
        bits.put(run - 11, 7);
    };
    code_length_2(&mut bits); // literal 0
    zero_run(&mut bits, 138); // literals 1..=138
    zero_run(&mut bits, 117); // literals 139..=255
    code_length_2(&mut bits); // 256, end of block
    zero_run(&mut bits, 28); // lengths 257..=284
    code_length_1(&mut bits); // 285, length 258
    code_length_1(&mut bits); // distance code 0
    code_length_1(&mut bits); // distance code 1

    // Canonical literal/length codes: 285 = 0, literal 0 = 10, 256 = 11.
    if len > 0 {
        bits.huffman(0b10, 2);
        let remaining = len - 1;
        // Each back-reference is length code "0" then distance code "0".
        bits.zero_bits(2 * (remaining / 258));
        for _ in 0..remaining % 258 {
            bits.huffman(0b10, 2);
        }
    }
    bits.huffman(0b11, 2); // end of block
    bits.finish()
}

/// Deflate's bit order: fields fill each byte from the least significant
/// bit; Huffman codes go most significant bit first.
#[derive(Default)]
struct BitWriter {
    out: Vec<u8>,
    pending: u64,
    pending_bits: u32,
}

impl BitWriter {
    fn put(&mut self, value: u32, count: u32) {
        self.pending |= u64::from(value) << self.pending_bits;
        self.pending_bits += count;
        while self.pending_bits >= 8 {
            self.out.push(self.pending as u8);
            self.pending >>= 8;
            self.pending_bits -= 8;
        }
    }

    fn huffman(&mut self, code: u32, length: u32) {
        let reversed = code.reverse_bits() >> (32 - length);
        self.put(reversed, length);
    }

    /// `count` zero bits, appended a byte at a time where aligned: a
    /// 4 GiB bomb is 32 million of them.
    fn zero_bits(&mut self, mut count: u64) {
        while count > 0 && self.pending_bits != 0 {
            self.put(0, 1);
            count -= 1;
        }
        let whole_bytes = usize::try_from(count / 8).expect("fits in memory");
        self.out.resize(self.out.len() + whole_bytes, 0);
        self.put(0, (count % 8) as u32);
    }

    fn finish(mut self) -> Vec<u8> {
        if self.pending_bits > 0 {
            self.out.push(self.pending as u8);
        }
        self.out
    }
}
