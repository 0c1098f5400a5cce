//! SHA-256, two messages at a time.
//!
//! Unpacking a download hashes nearly every byte twice: the archive for its
//! checksum (`zh:`, checked against the signed `SHA256SUMS`) and each file
//! in it for `h1:`. With the x86 SHA extensions a block waits for the block
//! before it, round after round, so one hash leaves the core's SHA unit
//! idle between rounds; two independent messages advanced in the same loop
//! fill those gaps. On the benchmark machine (AMD EPYC) two lanes hash
//! 2.9 GB/s together against 1.7 GB/s one after the other, and SHA-256 is
//! the largest part of a cold install's CPU time. No maintained crate
//! hashes two messages together (sha2 and ring take one at a time), so the
//! two-lane block loop is written here; everything else (one block alone,
//! and every processor without the extensions) is sha2's
//! `compress256`, and the tests compare each result with sha2's `Sha256`.

use std::collections::VecDeque;

use bytes::{Buf, Bytes};
use sha2::block_api::compress256;

const BLOCK: usize = 64;

/// FIPS 180-4, 5.3.3.
const INITIAL_STATE: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// One SHA-256 computation, advanced alone with [`update`](Self::update)
/// or beside another with [`update_both`].
#[derive(Clone, Debug)]
pub struct Sha256Lane {
    state: [u32; 8],
    /// The start of a block that has not been compressed yet.
    partial: [u8; BLOCK],
    partial_len: usize,
    /// Bytes taken in so far.
    length: u64,
}

impl Default for Sha256Lane {
    fn default() -> Self {
        Sha256Lane {
            state: INITIAL_STATE,
            partial: [0; BLOCK],
            partial_len: 0,
            length: 0,
        }
    }
}

impl Sha256Lane {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, data: &[u8]) {
        let rest = self.top_up(data);
        let (blocks, tail) = rest.as_chunks::<BLOCK>();
        compress256(&mut self.state, blocks);
        self.keep(tail);
    }

    pub fn finalize(self) -> [u8; 32] {
        // FIPS 180-4, 5.1.1: a one bit, zeros, and the length in bits as a
        // 64-bit big-endian number, ending on a block boundary.
        let mut state = self.state;
        let mut padded = [0u8; 2 * BLOCK];
        padded[..self.partial_len].copy_from_slice(&self.partial[..self.partial_len]);
        padded[self.partial_len] = 0x80;
        let end = if self.partial_len + 1 + 8 <= BLOCK {
            BLOCK
        } else {
            2 * BLOCK
        };
        padded[end - 8..end].copy_from_slice(&self.length.wrapping_mul(8).to_be_bytes());
        let (blocks, _) = padded[..end].as_chunks::<BLOCK>();
        compress256(&mut state, blocks);
        let mut digest = [0u8; 32];
        for (bytes, word) in digest.chunks_exact_mut(4).zip(state) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
        digest
    }

    /// Counts `data` in and completes a started block from its front; the
    /// rest of `data`, which starts on a block boundary unless it is empty.
    fn top_up<'d>(&mut self, data: &'d [u8]) -> &'d [u8] {
        self.length = self.length.wrapping_add(data.len() as u64);
        if self.partial_len == 0 {
            return data;
        }
        let take = (BLOCK - self.partial_len).min(data.len());
        self.partial[self.partial_len..self.partial_len + take].copy_from_slice(&data[..take]);
        self.partial_len += take;
        if self.partial_len == BLOCK {
            compress256(&mut self.state, &[self.partial]);
            self.partial_len = 0;
        }
        &data[take..]
    }

    /// Keeps what is left after the whole blocks of a topped-up update.
    fn keep(&mut self, tail: &[u8]) {
        if !tail.is_empty() {
            self.partial[..tail.len()].copy_from_slice(tail);
            self.partial_len = tail.len();
        }
    }
}

/// Advances `a` by `a_data` and `b` by `b_data`, the same as two
/// [`update`](Sha256Lane::update)s; as many blocks as both have are
/// compressed in pairs.
pub fn update_both(a: &mut Sha256Lane, a_data: &[u8], b: &mut Sha256Lane, b_data: &[u8]) {
    let (a_blocks, a_tail) = a.top_up(a_data).as_chunks::<BLOCK>();
    let (b_blocks, b_tail) = b.top_up(b_data).as_chunks::<BLOCK>();
    let paired = a_blocks.len().min(b_blocks.len());
    compress_pair(
        &mut a.state,
        &a_blocks[..paired],
        &mut b.state,
        &b_blocks[..paired],
    );
    compress256(&mut a.state, &a_blocks[paired..]);
    compress256(&mut b.state, &b_blocks[paired..]);
    a.keep(a_tail);
    b.keep(b_tail);
}

/// A message's SHA-256 whose bytes wait in a queue to be hashed beside
/// another message's, two lanes at once: a download's archive, queued as it
/// arrives and hashed beside the files it unpacks to. Past `bound` queued
/// bytes the oldest are hashed alone, so the queue holds little memory
/// when nothing pairs with it (headers, an archive no longer unpacked).
#[derive(Debug)]
pub struct QueuedLane {
    lane: Sha256Lane,
    /// Not yet hashed, oldest first.
    queue: VecDeque<Bytes>,
    queued: usize,
    bound: usize,
}

impl QueuedLane {
    pub fn new(bound: usize) -> Self {
        QueuedLane {
            lane: Sha256Lane::new(),
            queue: VecDeque::new(),
            queued: 0,
            bound,
        }
    }

    /// Queues the message's next bytes.
    pub fn push(&mut self, bytes: Bytes) {
        self.queued += bytes.len();
        self.queue.push_back(bytes);
        self.hash_alone_beyond(self.bound);
    }

    /// Advances `other` by `data`, as many of its bytes as are queued here
    /// beside as many queued bytes; the rest of `data`, not yet in `other`,
    /// for the caller to hash alone.
    pub fn update_beside<'d>(&mut self, other: &mut Sha256Lane, mut data: &'d [u8]) -> &'d [u8] {
        while !data.is_empty() {
            let Some(oldest) = self.queue.front_mut() else {
                break;
            };
            let len = oldest.len().min(data.len());
            update_both(&mut self.lane, &oldest[..len], other, &data[..len]);
            oldest.advance(len);
            if oldest.is_empty() {
                self.queue.pop_front();
            }
            self.queued -= len;
            data = &data[len..];
        }
        data
    }

    /// The hash of every byte pushed.
    pub fn finalize(mut self) -> [u8; 32] {
        self.hash_alone_beyond(0);
        self.lane.finalize()
    }

    fn hash_alone_beyond(&mut self, limit: usize) {
        while self.queued > limit {
            let Some(oldest) = self.queue.pop_front() else {
                break;
            };
            self.lane.update(&oldest);
            self.queued -= oldest.len();
        }
    }
}

/// Equally many blocks into each state.
fn compress_pair(a: &mut [u32; 8], a_blocks: &[[u8; 64]], b: &mut [u32; 8], b_blocks: &[[u8; 64]]) {
    #[cfg(target_arch = "x86_64")]
    if shani::available() {
        // SAFETY: the processor has every extension the function is
        // compiled for.
        unsafe { shani::compress_pair(a, a_blocks, b, b_blocks) };
        return;
    }
    compress256(a, a_blocks);
    compress256(b, b_blocks);
}

/// The block loop with the x86 SHA extensions: Intel's published schedule
/// for one message (state kept as ABEF/CDGH, four rounds per step), each
/// step done for both messages before the next.
#[cfg(target_arch = "x86_64")]
mod shani {
    use std::arch::x86_64::*;

    /// FIPS 180-4, 4.2.2.
    const ROUND_CONSTANTS: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];

    pub fn available() -> bool {
        is_x86_feature_detected!("sha")
            && is_x86_feature_detected!("sse2")
            && is_x86_feature_detected!("ssse3")
            && is_x86_feature_detected!("sse4.1")
    }

    /// One message's working state between blocks.
    #[derive(Clone, Copy)]
    struct Lane {
        abef: __m128i,
        cdgh: __m128i,
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn load(state: &[u32; 8]) -> Lane {
        let dcba = _mm_set_epi32(
            state[3] as i32,
            state[2] as i32,
            state[1] as i32,
            state[0] as i32,
        );
        let hgfe = _mm_set_epi32(
            state[7] as i32,
            state[6] as i32,
            state[5] as i32,
            state[4] as i32,
        );
        let cdab = _mm_shuffle_epi32(dcba, 0xB1);
        let efgh = _mm_shuffle_epi32(hgfe, 0x1B);
        Lane {
            abef: _mm_alignr_epi8(cdab, efgh, 8),
            cdgh: _mm_blend_epi16(efgh, cdab, 0xF0),
        }
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn store(lane: Lane, state: &mut [u32; 8]) {
        let feba = _mm_shuffle_epi32(lane.abef, 0x1B);
        let dchg = _mm_shuffle_epi32(lane.cdgh, 0xB1);
        let dcba = _mm_blend_epi16(feba, dchg, 0xF0);
        let hgef = _mm_alignr_epi8(dchg, feba, 8);
        for (word, value) in state.iter_mut().zip([
            _mm_extract_epi32(dcba, 0),
            _mm_extract_epi32(dcba, 1),
            _mm_extract_epi32(dcba, 2),
            _mm_extract_epi32(dcba, 3),
            _mm_extract_epi32(hgef, 0),
            _mm_extract_epi32(hgef, 1),
            _mm_extract_epi32(hgef, 2),
            _mm_extract_epi32(hgef, 3),
        ]) {
            *word = value as u32;
        }
    }

    /// The block's sixteen words, big-endian, four to a vector.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn message(block: &[u8; 64]) -> [__m128i; 4] {
        let swap = _mm_set_epi64x(
            0x0C0D_0E0F_0809_0A0Bu64 as i64,
            0x0405_0607_0001_0203u64 as i64,
        );
        let vectors = block.as_ptr().cast::<__m128i>();
        // SAFETY: the four unaligned 16-byte loads are the block's 64 bytes.
        let word = |at: usize| _mm_shuffle_epi8(unsafe { _mm_loadu_si128(vectors.add(at)) }, swap);
        [word(0), word(1), word(2), word(3)]
    }

    /// The next four schedule words from the last sixteen.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn schedule(w0: __m128i, w1: __m128i, w2: __m128i, w3: __m128i) -> __m128i {
        let t = _mm_add_epi32(_mm_sha256msg1_epu32(w0, w1), _mm_alignr_epi8(w3, w2, 4));
        _mm_sha256msg2_epu32(t, w3)
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn rounds(lane: &mut Lane, words: __m128i, step: usize) {
        let k = &ROUND_CONSTANTS[step * 4..step * 4 + 4];
        let input = _mm_add_epi32(
            words,
            _mm_set_epi32(k[3] as i32, k[2] as i32, k[1] as i32, k[0] as i32),
        );
        lane.cdgh = _mm_sha256rnds2_epu32(lane.cdgh, lane.abef, input);
        lane.abef = _mm_sha256rnds2_epu32(lane.abef, lane.cdgh, _mm_shuffle_epi32(input, 0x0E));
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub fn compress_pair(
        a_state: &mut [u32; 8],
        a_blocks: &[[u8; 64]],
        b_state: &mut [u32; 8],
        b_blocks: &[[u8; 64]],
    ) {
        assert_eq!(a_blocks.len(), b_blocks.len());
        let mut a = load(a_state);
        let mut b = load(b_state);
        for (a_block, b_block) in a_blocks.iter().zip(b_blocks) {
            let (a_before, b_before) = (a, b);
            let mut a_words = message(a_block);
            let mut b_words = message(b_block);
            for step in 0..16 {
                if step >= 4 {
                    let [w0, w1, w2, w3] = a_words;
                    a_words = [w1, w2, w3, schedule(w0, w1, w2, w3)];
                    let [w0, w1, w2, w3] = b_words;
                    b_words = [w1, w2, w3, schedule(w0, w1, w2, w3)];
                }
                let at = if step >= 4 { 3 } else { step };
                rounds(&mut a, a_words[at], step);
                rounds(&mut b, b_words[at], step);
            }
            a.abef = _mm_add_epi32(a.abef, a_before.abef);
            a.cdgh = _mm_add_epi32(a.cdgh, a_before.cdgh);
            b.abef = _mm_add_epi32(b.abef, b_before.abef);
            b.cdgh = _mm_add_epi32(b.cdgh, b_before.cdgh);
        }
        store(a, a_state);
        store(b, b_state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
            .collect()
    }

    fn reference(data: &[u8]) -> [u8; 32] {
        Sha256::digest(data).into()
    }

    #[test]
    fn known_answers() {
        // FIPS 180-2, appendix B.1 and B.2.
        let mut lane = Sha256Lane::new();
        lane.update(b"abc");
        assert_eq!(
            hex::encode(lane.finalize()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut lane = Sha256Lane::new();
        lane.update(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
        assert_eq!(
            hex::encode(lane.finalize()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(
            hex::encode(Sha256Lane::new().finalize()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn every_length_around_the_padding_boundaries_matches_sha2() {
        for len in 0..=200 {
            let data = bytes(len, 7);
            let mut lane = Sha256Lane::new();
            lane.update(&data);
            assert_eq!(lane.finalize(), reference(&data), "{len} bytes");
        }
    }

    #[test]
    fn two_lanes_fed_unevenly_match_sha2() {
        let a = bytes(70_001, 1);
        let b = bytes(53_333, 2);
        // Piece sizes that split blocks every way, and give one lane more
        // blocks than the other in most calls.
        for (a_piece, b_piece) in [
            (1, 1),
            (3, 64),
            (63, 65),
            (64, 64),
            (4103, 29),
            (16384, 16384),
            (100_000, 7),
        ] {
            let (mut a_lane, mut b_lane) = (Sha256Lane::new(), Sha256Lane::new());
            let (mut a_rest, mut b_rest) = (&a[..], &b[..]);
            while !a_rest.is_empty() || !b_rest.is_empty() {
                let (a_now, a_later) = a_rest.split_at(a_piece.min(a_rest.len()));
                let (b_now, b_later) = b_rest.split_at(b_piece.min(b_rest.len()));
                update_both(&mut a_lane, a_now, &mut b_lane, b_now);
                (a_rest, b_rest) = (a_later, b_later);
            }
            assert_eq!(a_lane.finalize(), reference(&a), "{a_piece}/{b_piece}");
            assert_eq!(b_lane.finalize(), reference(&b), "{a_piece}/{b_piece}");
        }
    }

    #[test]
    fn lanes_updated_alone_and_in_pairs_mix() {
        let a = bytes(10_000, 3);
        let b = bytes(10_000, 4);
        let (mut a_lane, mut b_lane) = (Sha256Lane::new(), Sha256Lane::new());
        a_lane.update(&a[..100]);
        update_both(&mut a_lane, &a[100..5000], &mut b_lane, &b[..5000]);
        b_lane.update(&b[5000..5001]);
        update_both(&mut a_lane, &a[5000..], &mut b_lane, &b[5001..]);
        assert_eq!(a_lane.finalize(), reference(&a));
        assert_eq!(b_lane.finalize(), reference(&b));
    }

    #[test]
    fn a_queued_lane_hashes_what_was_pushed_however_it_pairs() {
        let archive = bytes(300_000, 8);
        let file = bytes(500_000, 9);
        for (piece, bound) in [(16_384, 1 << 20), (1_000, 50_000), (77_777, 0)] {
            let mut queued = QueuedLane::new(bound);
            let mut file_lane = Sha256Lane::new();
            let mut pieces = archive.chunks(piece);
            for data in file.chunks(40_000) {
                if let Some(next) = pieces.next() {
                    queued.push(Bytes::copy_from_slice(next));
                }
                let rest = queued.update_beside(&mut file_lane, data);
                file_lane.update(rest);
            }
            pieces.for_each(|next| queued.push(Bytes::copy_from_slice(next)));
            assert_eq!(queued.finalize(), reference(&archive), "{piece}/{bound}");
            assert_eq!(file_lane.finalize(), reference(&file), "{piece}/{bound}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_paired_block_loop_matches_sha2_block_by_block() {
        if !shani::available() {
            return;
        }
        let a = bytes(64 * 37, 5);
        let b = bytes(64 * 37, 6);
        let (a_blocks, _) = a.as_chunks::<BLOCK>();
        let (b_blocks, _) = b.as_chunks::<BLOCK>();
        let (mut a_state, mut b_state) = ([1u32, 2, 3, 4, 5, 6, 7, 8], INITIAL_STATE);
        let (mut a_expected, mut b_expected) = (a_state, b_state);
        compress256(&mut a_expected, a_blocks);
        compress256(&mut b_expected, b_blocks);
        // SAFETY: the extensions are there.
        unsafe { shani::compress_pair(&mut a_state, a_blocks, &mut b_state, b_blocks) };
        assert_eq!((a_state, b_state), (a_expected, b_expected));
    }
}
