//! Reading a registry's SHA256SUMS document (Terraform's
//! `matchingChecksumAuthentication` and `AcceptableHashes` in
//! `internal/getproviders/package_authentication.go`).
//!
//! Terraform parses this document twice with two different tokenizers
//! (`bytes.Split` + `bytes.Fields` for the package's own line, `bufio.Scanner`
//! for the list of acceptable hashes); both are reproduced because their edge
//! cases decide which hashes end up in a lock file.

use super::AuthError;
use super::hash::PackageHash;
use crate::addr::Platform;
use crate::go_quote::{go_quote, go_quote_bytes, is_print};

/// The SHA-256 the document lists for `filename`: the first line whose second
/// field is exactly `filename` wins.
pub fn checksum_for(sums: &[u8], filename: &str) -> Result<[u8; 32], AuthError> {
    let checksum = sums
        .split(|&b| b == b'\n')
        .map(go_fields)
        .find(|parts| parts.len() > 1 && parts[1] == filename.as_bytes())
        .map(|parts| parts[0])
        .ok_or_else(|| {
            AuthError(format!(
                "checksum list has no SHA-256 hash for {}",
                go_quote(filename)
            ))
        })?;
    go_hex_decode_sha256(checksum).map_err(|err| {
        AuthError(format!(
            "checksum list has invalid SHA256 hash {}: {err}",
            go_quote_bytes(checksum)
        ))
    })
}

/// The whole of Terraform's `matchingChecksumAuthentication`, the first step
/// of a registry package's authentication: the document must list
/// `filename` with the digest the registry announced for the download.
pub fn matching_checksum(sums: &[u8], filename: &str, want: &[u8; 32]) -> Result<(), AuthError> {
    let got = checksum_for(sums, filename)?;
    if got != *want {
        return Err(AuthError(format!(
            "checksum list has unexpected SHA-256 hash {} (expected {})",
            hex::encode(got),
            hex::encode(want)
        )));
    }
    Ok(())
}

/// Every hash a signed SHA256SUMS vouches for the release that `filename`
/// (the package being installed, `…_OS_ARCH.zip`) belongs to, as `zh:`
/// hashes in document order: the lines naming a file with the same
/// `terraform-provider-TYPE_VERSION_` prefix, the release's manifest
/// included, as real HashiCorp releases list it and Terraform records it.
///
/// Terraform takes every line, and a blank one crashes it. Sums files in
/// the field hold blank lines, other providers' releases and stray files,
/// so those lines are skipped, never fatal: a lock file vouches for the
/// other platforms of this release, whatever else the file holds. A line
/// needs a 64-digit hex digest and a file name to count.
pub fn acceptable_hashes(sums: &[u8], filename: &str, platform: &Platform) -> Vec<PackageHash> {
    let release = filename.strip_suffix(&format!("{}_{}.zip", platform.os, platform.arch));
    scanner_lines(sums)
        .filter_map(|line| match go_fields(line)[..] {
            [digest, name, ..] if digest.len() == 64 => Some((digest, name)),
            _ => None,
        })
        .filter(|(_, name)| release.is_none_or(|prefix| name.starts_with(prefix.as_bytes())))
        .filter_map(|(digest, _)| go_hex_decode_sha256(digest).ok())
        .map(|digest| PackageHash::zh_of_digest(&digest))
        .collect()
}

/// Lines as `bufio.ScanLines` yields them: no trailing empty line after a
/// final newline (the `\r` it strips is white space to `go_fields` anyway).
fn scanner_lines(doc: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = doc.strip_suffix(b"\n").unwrap_or(doc);
    let empty = doc.is_empty();
    body.split(|&b| b == b'\n').filter(move |_| !empty)
}

/// `bytes.Fields`: split on runs of Unicode white space, reading the input as
/// UTF-8 where it is valid (invalid bytes are never white space).
fn go_fields(line: &[u8]) -> Vec<&[u8]> {
    let mut fields = Vec::new();
    let mut start: Option<usize> = None;
    let mut pos = 0;
    while pos < line.len() {
        let (ch, len) = decode_utf8(&line[pos..]);
        let is_space = ch.is_some_and(char::is_whitespace);
        match (is_space, start) {
            (true, Some(s)) => {
                fields.push(&line[s..pos]);
                start = None;
            }
            (false, None) => start = Some(pos),
            _ => {}
        }
        pos += len;
    }
    if let Some(s) = start {
        fields.push(&line[s..]);
    }
    fields
}

/// One UTF-8 sequence from the front of `bytes`; `None` and length 1 for an
/// invalid byte, as Go's `utf8.DecodeRune` reports `RuneError`.
fn decode_utf8(bytes: &[u8]) -> (Option<char>, usize) {
    let max = bytes.len().min(4);
    for len in 1..=max {
        if let Ok(s) = std::str::from_utf8(&bytes[..len]) {
            return (s.chars().next(), len);
        }
    }
    (None, 1)
}

/// Go's `hex.Decode` into a 32-byte array: a short string leaves zeros behind
/// (caught later as a mismatch), the first bad digit wins over a bad length.
/// A string longer than 64 digits crashes Terraform; here it is an error.
fn go_hex_decode_sha256(src: &[u8]) -> Result<[u8; 32], String> {
    let mut out = [0u8; 32];
    let mut pairs = src.chunks_exact(2);
    for (written, pair) in pairs.by_ref().enumerate() {
        let high = hex_value(pair[0]).ok_or_else(|| invalid_byte(pair[0]))?;
        let low = hex_value(pair[1]).ok_or_else(|| invalid_byte(pair[1]))?;
        let slot = out
            .get_mut(written)
            .ok_or_else(|| "encoding/hex: hash is longer than 32 bytes".to_owned())?;
        *slot = (high << 4) | low;
    }
    if let [last] = pairs.remainder() {
        if hex_value(*last).is_none() {
            return Err(invalid_byte(*last));
        }
        return Err("encoding/hex: odd length hex string".to_owned());
    }
    Ok(out)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `hex.InvalidByteError`, formatted with Go's `%#U` of the byte as a rune.
fn invalid_byte(b: u8) -> String {
    let ch = char::from(b);
    if is_print(ch) {
        format!("encoding/hex: invalid byte: U+{:04X} '{ch}'", u32::from(b))
    } else {
        format!("encoding/hex: invalid byte: U+{:04X}", u32::from(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WANT: [u8; 32] = {
        let mut want = [0u8; 32];
        want[0] = 0xde;
        want[1] = 0xca;
        want[2] = 0xde;
        want
    };
    const WANT_HEX: &str = "decade0000000000000000000000000000000000000000000000000000000000";

    fn vector(name: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/testdata/vectors/hashicorp/terraform/extracted/internal/getproviders/package_authentication_test/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn matching_checksum_vectors() {
        let doc = format!("{} README.txt\n{WANT_HEX} my-package.zip\n", "0".repeat(64));
        assert_eq!(
            checksum_for(doc.as_bytes(), "my-package.zip").unwrap(),
            WANT
        );
        matching_checksum(doc.as_bytes(), "my-package.zip", &WANT).unwrap();

        let missing = format!("{WANT_HEX} README.txt\n");
        assert_eq!(
            matching_checksum(missing.as_bytes(), "my-package.zip", &WANT)
                .unwrap_err()
                .to_string(),
            "checksum list has no SHA-256 hash for \"my-package.zip\""
        );

        assert_eq!(
            matching_checksum(
                b"horses README.txt\nchickens my-package.zip",
                "my-package.zip",
                &WANT
            )
            .unwrap_err()
            .to_string(),
            "checksum list has invalid SHA256 hash \"chickens\": encoding/hex: invalid byte: U+0068 'h'"
        );

        let wrong = format!("c0ffee{} my-package.zip\n", "0".repeat(58));
        assert_eq!(
            matching_checksum(wrong.as_bytes(), "my-package.zip", &WANT)
                .unwrap_err()
                .to_string(),
            format!(
                "checksum list has unexpected SHA-256 hash c0ffee{} (expected {WANT_HEX})",
                "0".repeat(58)
            )
        );
    }

    #[test]
    fn checksum_line_edge_cases() {
        // The first matching line wins, fields may be separated by any white
        // space, and a CRLF document still matches.
        let doc = format!(
            "{WANT_HEX}\t my-package.zip\r\n{} my-package.zip\n",
            "1".repeat(64)
        );
        assert_eq!(
            checksum_for(doc.as_bytes(), "my-package.zip").unwrap(),
            WANT
        );

        assert_eq!(
            checksum_for(b"abc my-package.zip", "my-package.zip")
                .unwrap_err()
                .to_string(),
            "checksum list has invalid SHA256 hash \"abc\": encoding/hex: odd length hex string"
        );
        assert_eq!(
            checksum_for(b"abz my-package.zip", "my-package.zip")
                .unwrap_err()
                .to_string(),
            "checksum list has invalid SHA256 hash \"abz\": encoding/hex: invalid byte: U+007A 'z'"
        );
        // A short hash decodes into the front of the digest, like Go.
        let mut short = [0u8; 32];
        short[0] = 0xab;
        assert_eq!(
            checksum_for(b"ab my-package.zip", "my-package.zip").unwrap(),
            short
        );
        let long = format!("{}00 my-package.zip", "0".repeat(64));
        assert!(checksum_for(long.as_bytes(), "my-package.zip").is_err());
        assert_eq!(
            checksum_for(b"\x01\xff my-package.zip", "my-package.zip")
                .unwrap_err()
                .to_string(),
            "checksum list has invalid SHA256 hash \"\\x01\\xff\": encoding/hex: invalid byte: U+0001"
        );
    }

    fn linux() -> Platform {
        Platform::parse("linux_amd64").unwrap()
    }

    fn zh_list(sums: &[u8], filename: &str) -> Vec<String> {
        acceptable_hashes(sums, filename, &linux())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn acceptable_hashes_vector() {
        // A Terraform release's sums file: no file has a provider's prefix,
        // so an archive named otherwise vouches for every line, as in
        // Terraform.
        let got = zh_list(
            &vector("terraform_0.14.0-alpha20200923_SHA256SUMS"),
            "terraform_0.14.0-alpha20200923_linux_amd64.zip",
        );
        let prefixes = [
            "zh:7d7e888f",
            "zh:f8b6cf9a",
            "zh:a5ba9945",
            "zh:df3a5a8d",
            "zh:086119a2",
            "zh:1e5f7a5f",
            "zh:0e9fd0f3",
            "zh:66a947e7",
            "zh:def1b738",
            "zh:48f1826e",
            "zh:17e0b496",
            "zh:2696c862",
        ];
        assert_eq!(got.len(), prefixes.len());
        for (hash, prefix) in got.iter().zip(prefixes) {
            assert!(hash.starts_with(prefix), "{hash} vs {prefix}");
            assert_eq!(hash.len(), 3 + 64);
        }
        assert!(got[11].ends_with("4bcd"));
        assert!(got[0].ends_with("d4ee"));
        assert_eq!(
            zh_list(
                &vector("terraform_0.14.0-alpha20200923_SHA256SUMS"),
                "unrelated.zip"
            ),
            got
        );
    }

    #[test]
    fn acceptable_hashes_of_a_real_provider_release() {
        let sums = vector("terraform-provider-null_3.1.0_SHA256SUMS");
        let got = zh_list(&sums, "terraform-provider-null_3.1.0_linux_amd64.zip");
        assert_eq!(got.len(), 11);
        assert_eq!(
            got[0],
            "zh:fea4227271ebf7d9e2b61b89ce2328c7262acd9fd190e1fd6d15a591abfa848e"
        );
    }

    #[test]
    fn acceptable_hashes_skip_blank_foreign_and_malformed_lines() {
        const ZIP: &str = "terraform-provider-x_1.0.0_linux_amd64.zip";
        let line = |hex: &str, name: &str| format!("{hex}  {name}\n");
        let good = line(&"A".repeat(64), ZIP);
        let other = line(
            &"b".repeat(64),
            "terraform-provider-x_1.0.0_darwin_arm64.zip",
        );
        let manifest = line(&"d".repeat(64), "terraform-provider-x_1.0.0_manifest.json");
        let zh = |c: char| format!("zh:{}", c.to_string().repeat(64));
        assert_eq!(zh_list(good.as_bytes(), ZIP), [zh('a')]);
        assert_eq!(
            zh_list(format!("{good}\n\r\n{other}").as_bytes(), ZIP),
            [zh('a'), zh('b')]
        );
        let foreign = [
            line(&"c".repeat(64), "README.txt"),
            line(
                &"c".repeat(64),
                "terraform-provider-x_1.0.1_linux_amd64.zip",
            ),
            line(
                &"c".repeat(64),
                "terraform-provider-xy_1.0.0_linux_amd64.zip",
            ),
            line(
                &"c".repeat(63),
                "terraform-provider-x_1.0.0_windows_amd64.zip",
            ),
            line(
                &"g".repeat(64),
                "terraform-provider-x_1.0.0_windows_amd64.zip",
            ),
            "lonely\n".to_owned(),
            format!("{}\n", "x".repeat(70_000)),
        ]
        .concat();
        assert_eq!(
            zh_list(format!("{good}{foreign}{other}{manifest}").as_bytes(), ZIP),
            [zh('a'), zh('b'), zh('d')]
        );
        assert!(zh_list(b"", ZIP).is_empty());
        assert!(zh_list(b"example shasums data", ZIP).is_empty());
        assert_eq!(zh_list(format!("{good}{good}").as_bytes(), ZIP).len(), 2);
    }
}
