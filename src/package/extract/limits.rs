//! The bounds on what one package may unpack to.

/// Bytes an entry may inflate to before its compression ratio is judged: tiny
/// files of repeated bytes legitimately compress far better than 200:1, and
/// the ratio only matters once an entry is big enough to hurt.
pub(super) const RATIO_GRACE_BYTES: u64 = 1 << 20;

/// Bounds on what one provider package may unpack to.
///
/// The defaults leave ample room for real packages while stopping zip bombs
/// long before they fill a disk:
/// * `max_total_bytes` 2 GiB: the largest provider today (aws) is about
///   180 MB zipped and 830 MB unpacked, so this allows more than twice that.
/// * `max_entries` 10 000: real packages hold one to five files (the binary,
///   a licence, a readme, a changelog).
/// * `max_ratio` 200: Go binaries deflate 3–5×, text 3–10×, while DEFLATE can
///   reach about 1 032×; 200 is more than 20 times the real worst case. It is
///   applied per entry once the entry passes 1 MiB inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractLimits {
    pub max_total_bytes: u64,
    pub max_entries: u64,
    pub max_ratio: u64,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        ExtractLimits {
            max_total_bytes: 2 << 30,
            max_entries: 10_000,
            max_ratio: 200,
        }
    }
}
