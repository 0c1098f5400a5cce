//! Package hashes as they appear in lock files and registry responses (the
//! dependency lock file docs, "Checksum verification"; Terraform's
//! `internal/getproviders/providerreqs/hash.go`).
//!
//! `h1:` must be byte-identical to Go's `golang.org/x/mod/sumdb/dirhash`
//! `Hash1`, because lock files written by Terraform and by us have to agree.
//! Every file is hashed as a stream so that a large provider binary never has
//! to fit in memory.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// A hash string `<scheme>:<value>`. Unknown schemes are kept verbatim so a
/// lock file written by a newer Terraform survives a round trip through us.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackageHash(String);

#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("hash string must start with a scheme keyword followed by a colon")]
    MissingScheme,
    #[error("zip: not a valid zip file")]
    NotAZip,
    #[error("zip: unsupported compression algorithm")]
    UnsupportedZip,
    #[error("dirhash: filenames with newlines are not supported")]
    NewlineInName,
    #[error("ziphash scheme (\"zh:\" prefix) is not supported for unpacked provider packages")]
    ZipHashOfDirectory,
    #[error("unsupported hash format (this may require a newer version of Terraform)")]
    UnsupportedScheme,
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Where a package sits on local disk; the two forms hash differently (`zh:`
/// exists only for archives).
#[derive(Clone, Copy, Debug)]
pub enum LocalPackage<'a> {
    Archive(&'a Path),
    Directory(&'a Path),
}

const SCHEME_H1: &str = "h1";
const SCHEME_ZIP: &str = "zh";

impl PackageHash {
    pub fn parse(s: &str) -> Result<Self, HashError> {
        match s.find(':') {
            Some(colon) if colon >= 1 => Ok(PackageHash(s.to_owned())),
            _ => Err(HashError::MissingScheme),
        }
    }

    /// The scheme without its colon. Only `parse` builds values from outside
    /// input, so a colon is always present.
    pub fn scheme(&self) -> &str {
        self.0.split_once(':').map_or("", |(scheme, _)| scheme)
    }

    pub fn value(&self) -> &str {
        self.0.split_once(':').map_or("", |(_, value)| value)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Terraform only verifies against the schemes it knows; the rest are
    /// carried along but can never match.
    pub fn is_preferred(&self) -> bool {
        matches!(self.scheme(), SCHEME_H1 | SCHEME_ZIP)
    }

    /// `EvalSymlinks` on the root but `Lstat` below it, as Go's
    /// `dirhash.HashDir` does: a symlink inside the package is hashed by its
    /// target's content, and a symlink to a directory makes hashing fail.
    pub fn h1_of_dir(dir: &Path) -> io::Result<PackageHash> {
        let root = fs::canonicalize(dir)?;
        if !fs::symlink_metadata(&root)?.is_dir() {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                root.display()
            )));
        }
        let mut files = Vec::new();
        let mut pending: Vec<(PathBuf, Vec<u8>)> = vec![(root, Vec::new())];
        while let Some((path, rel)) = pending.pop() {
            for entry in fs::read_dir(&path)? {
                let entry = entry?;
                let mut name = rel.clone();
                if !name.is_empty() {
                    name.push(b'/');
                }
                name.extend_from_slice(&os_name_bytes(&entry.file_name()));
                if entry.file_type()?.is_dir() {
                    pending.push((entry.path(), name));
                } else {
                    let digest = sha256_file(&entry.path())?;
                    files.push((name, digest));
                }
            }
        }
        hash1(files).map_err(|err| match err {
            HashError::Io(err) => err,
            other => io::Error::other(other.to_string()),
        })
    }

    /// Follows Go's `dirhash.HashZip`: central-directory names taken raw,
    /// directory entries hashed as empty files, and a name listed twice
    /// counted twice with the content of its last entry.
    pub fn h1_of_zip(zip_path: &Path) -> Result<PackageHash, HashError> {
        let file = File::open(zip_path)?;
        let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(zip_error)?;
        let names: Vec<Vec<u8>> = if archive.has_duplicate_names() {
            let mut reader = BufReader::new(File::open(zip_path)?);
            central_directory_names(&mut reader, archive.central_directory_start())?
        } else {
            archive.file_names_raw().map(<[u8]>::to_vec).collect()
        };
        let mut digests: HashMap<usize, [u8; 32]> = HashMap::new();
        let mut files = Vec::with_capacity(names.len());
        for name in names {
            let index = archive
                .index_for_name_raw(&name)
                .ok_or(HashError::NotAZip)?;
            let digest = match digests.get(&index) {
                Some(digest) => *digest,
                None => {
                    let digest = zip_entry_digest(&mut archive, index, &name)?;
                    digests.insert(index, digest);
                    digest
                }
            };
            files.push((name, digest));
        }
        hash1(files)
    }

    /// Lets extraction compute `h1:` from the digests it took while writing
    /// the files, instead of reading the package back from disk.
    pub fn h1_of_files(files: &[(String, [u8; 32])]) -> Result<PackageHash, HashError> {
        hash1(
            files
                .iter()
                .map(|(name, digest)| (name.as_bytes().to_vec(), *digest))
                .collect(),
        )
    }

    pub fn zh_of_digest(digest: &[u8; 32]) -> PackageHash {
        PackageHash(format!("{SCHEME_ZIP}:{}", hex::encode(digest)))
    }

    pub fn zh_of_file(path: &Path) -> io::Result<PackageHash> {
        Ok(Self::zh_of_digest(&sha256_file(path)?))
    }

    /// Terraform's `PackageMatchesHash`.
    pub fn matches(&self, package: LocalPackage<'_>) -> Result<bool, HashError> {
        match self.scheme() {
            SCHEME_H1 => Ok(h1_of_package(package)? == *self),
            SCHEME_ZIP => match package {
                LocalPackage::Archive(path) => Ok(Self::zh_of_file(path)? == *self),
                LocalPackage::Directory(_) => Err(HashError::ZipHashOfDirectory),
            },
            _ => Err(HashError::UnsupportedScheme),
        }
    }

    /// Terraform's `PackageMatchesAnyHash`. Each scheme's hash is computed at
    /// most once and only when a candidate of that scheme is reached, so an
    /// early match spares reading the package again (and hides later I/O
    /// errors, exactly as in Terraform).
    pub fn matches_any(
        package: LocalPackage<'_>,
        candidates: &[PackageHash],
    ) -> Result<bool, HashError> {
        let mut h1: Option<PackageHash> = None;
        let mut zh: Option<PackageHash> = None;
        for want in candidates {
            match want.scheme() {
                SCHEME_H1 => {
                    if h1.is_none() {
                        h1 = Some(h1_of_package(package)?);
                    }
                    if h1.as_ref() == Some(want) {
                        return Ok(true);
                    }
                }
                SCHEME_ZIP => {
                    let LocalPackage::Archive(path) = package else {
                        continue;
                    };
                    if zh.is_none() {
                        zh = Some(Self::zh_of_file(path)?);
                    }
                    if zh.as_ref() == Some(want) {
                        return Ok(true);
                    }
                }
                _ => {}
            }
        }
        Ok(false)
    }
}

impl fmt::Display for PackageHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn h1_of_package(package: LocalPackage<'_>) -> Result<PackageHash, HashError> {
    match package {
        LocalPackage::Archive(path) => PackageHash::h1_of_zip(path),
        LocalPackage::Directory(path) => Ok(PackageHash::h1_of_dir(path)?),
    }
}

/// The dirhash `Hash1` summary: sorted `"<hex>  <name>\n"` lines, hashed
/// again and base64-encoded.
fn hash1(mut files: Vec<(Vec<u8>, [u8; 32])>) -> Result<PackageHash, HashError> {
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut summary = Sha256::new();
    for (name, digest) in &files {
        if name.contains(&b'\n') {
            return Err(HashError::NewlineInName);
        }
        summary.update(hex::encode(digest).as_bytes());
        summary.update(b"  ");
        summary.update(name);
        summary.update(b"\n");
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(summary.finalize());
    Ok(PackageHash(format!("{SCHEME_H1}:{encoded}")))
}

/// The SHA-256 of a file's content, read in blocks so a provider archive of
/// hundreds of megabytes never sits in memory.
pub fn sha256_file(path: &Path) -> io::Result<[u8; 32]> {
    sha256_of_reader(File::open(path)?)
}

pub(crate) fn sha256_of_reader(mut reader: impl Read) -> io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    let mut digest = [0u8; 32];
    digest.copy_from_slice(&hasher.finalize());
    Ok(digest)
}

fn zip_entry_digest<R: Read + Seek>(
    archive: &mut zip::ZipArchive<R>,
    index: usize,
    name: &[u8],
) -> Result<[u8; 32], HashError> {
    let entry = archive.by_index(index).map_err(zip_error)?;
    if name.ends_with(b"/") {
        // Go's archive/zip reads a directory entry as empty and rejects one
        // that claims content.
        if entry.size() != 0 {
            return Err(HashError::NotAZip);
        }
        return sha256_of_reader(io::empty()).map_err(HashError::Io);
    }
    sha256_of_reader(entry).map_err(|err| match err.kind() {
        io::ErrorKind::InvalidData => HashError::NotAZip,
        _ => HashError::Io(err),
    })
}

fn zip_error(err: zip::result::ZipError) -> HashError {
    match err {
        zip::result::ZipError::Io(err) if err.kind() != io::ErrorKind::UnexpectedEof => {
            HashError::Io(err)
        }
        zip::result::ZipError::UnsupportedArchive(_)
        | zip::result::ZipError::CompressionMethodNotSupported(_) => HashError::UnsupportedZip,
        _ => HashError::NotAZip,
    }
}

/// The zip crate keeps one entry per name, but Go's `HashZip` lists every
/// central-directory record, so with duplicates we walk the records ourselves
/// just for their names.
fn central_directory_names<R: Read + Seek>(
    reader: &mut R,
    start: u64,
) -> Result<Vec<Vec<u8>>, HashError> {
    const SIGNATURE: [u8; 4] = [0x50, 0x4b, 0x01, 0x02];
    const FIXED_LEN: usize = 46;
    reader.seek(SeekFrom::Start(start))?;
    let mut names = Vec::new();
    let mut header = [0u8; FIXED_LEN];
    loop {
        if !read_full_or_eof(reader, &mut header)? || header[..4] != SIGNATURE {
            return Ok(names);
        }
        let name_len = usize::from(u16::from_le_bytes([header[28], header[29]]));
        let extra_len = i64::from(u16::from_le_bytes([header[30], header[31]]));
        let comment_len = i64::from(u16::from_le_bytes([header[32], header[33]]));
        let mut name = vec![0u8; name_len];
        reader
            .read_exact(&mut name)
            .map_err(|_| HashError::NotAZip)?;
        reader.seek(SeekFrom::Current(extra_len + comment_len))?;
        names.push(name);
    }
}

/// Reads a whole header, or reports a clean end of input.
fn read_full_or_eof(reader: &mut impl Read, buf: &mut [u8]) -> Result<bool, HashError> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => return Ok(false),
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(HashError::Io(err)),
        }
    }
    Ok(true)
}

#[cfg(unix)]
fn os_name_bytes(name: &std::ffi::OsStr) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes().to_vec()
}

#[cfg(not(unix))]
fn os_name_bytes(name: &std::ffi::OsStr) -> Vec<u8> {
    name.to_string_lossy().into_owned().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const VECTORS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/testdata/vectors/hashicorp/terraform"
    );

    fn vector(rel: &str) -> PathBuf {
        Path::new(VECTORS).join(rel)
    }

    fn h1_dir(rel: &str) -> String {
        PackageHash::h1_of_dir(&vector(rel)).unwrap().to_string()
    }

    const NULL_H1: &str = "h1:qjsREM4DqEWECD43FcPqddZ9oxCG+IaMTxvWPciS05g=";
    const MIRROR: &str = "internal/getproviders/testdata/filesystem-mirror";

    #[test]
    fn h1_of_fixture_directories() {
        let cases = [
            (
                format!("{MIRROR}/registry.terraform.io/hashicorp/null/2.0.0/linux_amd64"),
                NULL_H1,
            ),
            (
                format!("{MIRROR}/registry.terraform.io/hashicorp/null/2.0.0/darwin_amd64"),
                NULL_H1,
            ),
            (
                format!("{MIRROR}/registry.terraform.io/hashicorp/null/2.0.0/windows_amd64"),
                "h1:kGhswZiaZEZCbem7JPB+GCzba57SfLtNV20LNIBP1CU=",
            ),
            (
                format!("{MIRROR}/registry.terraform.io/hashicorp/random/1.2.0/linux_amd64"),
                "h1:qWk5Hr1Xw9sEbxS5zNAhmVPxQtius4R/4hrOPgH1sDY=",
            ),
            (
                format!("{MIRROR}/registry.terraform.io/hashicorp/random-beta/1.2.0/linux_amd64"),
                "h1:N8DD/Gk20FXTX4vRLCU4ALq0CPQfRzROct61H9xIPl8=",
            ),
            (
                format!("{MIRROR}/registry.terraform.io/-/legacy/1.0.0/linux_amd64"),
                "h1:L0FggsTJoRyllCWXkBEgtoiw7dIWeJaLF/VZ1PgTRSU=",
            ),
            (
                format!("{MIRROR}/tfe.example.com/AwesomeCorp/happycloud/0.1.0-alpha.2/darwin_amd64"),
                "h1:HEMwKd3ofW3IXaAaIb5PPn0zsRUAbMK8UxZCtLQthVI=",
            ),
            (
                "internal/getproviders/testdata/search-local-directory/underscore-namespace/example.com/my_org/foo/1.0.0/linux_amd64".to_owned(),
                "h1:8ygrogzMaTqDHjmGr+KBPZvyF+15qct2NVKfi19JHRI=",
            ),
            (
                "internal/getproviders/testdata/search-local-directory/symlinks/real/example.com/foo/bar/1.0.0/linux_amd64".to_owned(),
                "h1:6cU1EXqJ1xuhhaeWD2wav+GdmtD70XFXAO+QJpFtU/E=",
            ),
            (
                "internal/providercache/testdata/beep-provider".to_owned(),
                "h1:2y06Ykj0FRneZfGCTxI9wRTori8iB7ZL5kQ6YyEnh84=",
            ),
            (
                "internal/providercache/testdata/beep-provider-other-platform".to_owned(),
                "h1:McUbAIn350hdBfTeZ3GjDCUEpGAwQwVNbIafx83zoH8=",
            ),
            (
                "internal/providercache/testdata/cachedir/registry.terraform.io/missing/executable/2.0.0/linux_amd64".to_owned(),
                "h1:+V5tOWT4nve6QpDZ7mnRhc0bCLqrfEI5gmwmokLVAZ8=",
            ),
        ];
        for (rel, want) in cases {
            assert_eq!(h1_dir(&rel), want, "{rel}");
        }
    }

    #[test]
    fn zip_fixtures() {
        let real =
            vector("internal/providercache/testdata/terraform-provider-null_2.1.0_linux_amd64.zip");
        assert_eq!(PackageHash::h1_of_zip(&real).unwrap().as_str(), NULL_H1);
        assert_eq!(
            PackageHash::zh_of_file(&real).unwrap().as_str(),
            "zh:299dd806df78cb0537e5c111019eaca6e6b7797e1b63cb37cc6a76f91c6c0782"
        );

        let sample =
            vector("internal/releaseauth/testdata/sample_release/sample_0.1.0_darwin_amd64.zip");
        assert_eq!(
            PackageHash::h1_of_zip(&sample).unwrap().as_str(),
            "h1:mDR0Q2eYA+3fAtyWdXp1raVqxhSY+gnzonNGDari0Zg="
        );
        assert_eq!(
            PackageHash::zh_of_file(&sample).unwrap().as_str(),
            "zh:22db2f0c70b50cff42afd4878fea9f6848a63f1b6532bd8b64b899f574acb35d"
        );
    }

    #[test]
    fn text_file_named_zip() {
        let fake = vector(&format!(
            "{MIRROR}/registry.terraform.io/hashicorp/null/terraform-provider-null_2.1.0_linux_amd64.zip"
        ));
        assert_eq!(
            PackageHash::zh_of_file(&fake).unwrap().as_str(),
            "zh:4fb39849f2e138eb16a18ba0c682635d781cb8c3b25901dd5a792ade9711f501"
        );
        assert_eq!(
            PackageHash::h1_of_zip(&fake).unwrap_err().to_string(),
            "zip: not a valid zip file"
        );
        for name in [
            "terraform-provider-null_invalid.zip",
            "terraform-provider-null_invalid_invalid_invalid.zip",
        ] {
            let path = vector(&format!(
                "{MIRROR}/registry.terraform.io/hashicorp/null/{name}"
            ));
            assert_eq!(
                PackageHash::zh_of_file(&path).unwrap().as_str(),
                "zh:8610a6d93c01e05a0d3920fe66c79b3c7c3b084f1f5c70715afd919fee1d978e"
            );
        }
    }

    fn digest(content: &[u8]) -> [u8; 32] {
        sha256_of_reader(content).unwrap()
    }

    #[test]
    fn synthetic_dirhash_vectors() {
        let files = [
            ("abc".to_owned(), digest(b"data for abc")),
            ("xyz".to_owned(), digest(b"data for xyz")),
        ];
        assert_eq!(
            PackageHash::h1_of_files(&files).unwrap().as_str(),
            "h1:EP6WfDoQTSk9klnxcjriWJOGztueJUywHNmWeq+efB8="
        );
        let reversed = [files[1].clone(), files[0].clone()];
        assert_eq!(
            PackageHash::h1_of_files(&reversed).unwrap().as_str(),
            "h1:EP6WfDoQTSk9klnxcjriWJOGztueJUywHNmWeq+efB8="
        );
        let prefixed = [
            ("prefix/abc".to_owned(), digest(b"data for abc")),
            ("prefix/xyz".to_owned(), digest(b"data for xyz")),
        ];
        assert_eq!(
            PackageHash::h1_of_files(&prefixed).unwrap().as_str(),
            "h1:rLyfpGMAgqOnGE2aKOY5Xb6cOc0/YQhPjHBHBwkblhs="
        );
        assert_eq!(
            PackageHash::h1_of_files(&[]).unwrap().as_str(),
            "h1:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        let newline = [("a\nb".to_owned(), digest(b""))];
        assert_eq!(
            PackageHash::h1_of_files(&newline).unwrap_err().to_string(),
            "dirhash: filenames with newlines are not supported"
        );
    }

    #[test]
    fn fake_packages_from_init_tests() {
        let cases = [
            (
                "test",
                "1.2.3",
                "h1:wlbEC2mChQZ2hhgUhl6SeVLPP7fMqOFUZAQhQ9GIIno=",
            ),
            (
                "foobar",
                "9.9.9",
                "h1:cHfrPr8b4Wjf8x014vgi4H3qQ6tOd+vEVchLY0PnuFE=",
            ),
            (
                "test-beta",
                "1.2.4",
                "h1:see6W06w09Ea+AobFJ+mbvPTie6ASqZAAdlFZbs8BSM=",
            ),
        ];
        for (ty, version, want) in cases {
            let content = format!(
                "This is a fake provider package for registry.terraform.io/hashicorp/{ty} {version}, not a real provider.\n"
            );
            let files = [(
                format!("terraform-provider-{ty}_{version}"),
                digest(content.as_bytes()),
            )];
            assert_eq!(PackageHash::h1_of_files(&files).unwrap().as_str(), want);
        }
    }

    #[test]
    fn parse_vectors() {
        for ok in ["h1:foo", "zh:bar", "unknown:baz", "unknown:"] {
            assert_eq!(PackageHash::parse(ok).unwrap().as_str(), ok);
        }
        assert_eq!(
            PackageHash::parse("unknown:baz").unwrap().scheme(),
            "unknown"
        );
        assert_eq!(PackageHash::parse("unknown:").unwrap().value(), "");
        for bad in [
            "",
            "299dd806df78cb0537e5c111019eaca6e6b7797e1b63cb37cc6a76f91c6c0782",
            ":blah",
        ] {
            assert_eq!(
                PackageHash::parse(bad).unwrap_err().to_string(),
                "hash string must start with a scheme keyword followed by a colon"
            );
        }
        assert!(PackageHash::parse("h1:x").unwrap().is_preferred());
        assert!(PackageHash::parse("zh:x").unwrap().is_preferred());
        assert!(!PackageHash::parse("h0:x").unwrap().is_preferred());
    }

    #[test]
    fn ordering_is_bytewise() {
        let mut hashes: Vec<PackageHash> = ["zh:a", "h1:b", "h1:B", "h1:a"]
            .iter()
            .map(|s| PackageHash::parse(s).unwrap())
            .collect();
        hashes.sort();
        let sorted: Vec<&str> = hashes.iter().map(PackageHash::as_str).collect();
        assert_eq!(sorted, ["h1:B", "h1:a", "h1:b", "zh:a"]);
    }

    #[cfg(unix)]
    #[test]
    fn directory_walk_reads_symlinks_and_ignores_empty_dirs() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let pkg = tmp.path().join("pkg");
        fs::create_dir_all(pkg.join("sub/empty")).unwrap();
        fs::write(pkg.join("abc"), b"data for abc").unwrap();
        fs::write(tmp.path().join("outside"), b"data for xyz").unwrap();
        symlink(tmp.path().join("outside"), pkg.join("sub/xyz")).unwrap();
        let expected = PackageHash::h1_of_files(&[
            ("abc".to_owned(), digest(b"data for abc")),
            ("sub/xyz".to_owned(), digest(b"data for xyz")),
        ])
        .unwrap();
        assert_eq!(PackageHash::h1_of_dir(&pkg).unwrap(), expected);

        // The root itself may be a link (a package linked in from a cache).
        let link = tmp.path().join("link");
        symlink(&pkg, &link).unwrap();
        assert_eq!(PackageHash::h1_of_dir(&link).unwrap(), expected);

        symlink(pkg.join("sub"), pkg.join("dirlink")).unwrap();
        assert!(PackageHash::h1_of_dir(&pkg).is_err());
    }

    #[test]
    fn directory_hash_requires_a_directory() {
        let file =
            vector("internal/providercache/testdata/terraform-provider-null_2.1.0_linux_amd64.zip");
        assert!(PackageHash::h1_of_dir(&file).is_err());
    }

    fn write_zip(path: &Path, entries: &[(&str, &[u8])]) {
        let mut writer = zip::ZipWriter::new(File::create(path).unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, content) in entries {
            if name.ends_with('/') {
                writer.add_directory(*name, options).unwrap();
            } else {
                writer.start_file(*name, options).unwrap();
                writer.write_all(content).unwrap();
            }
        }
        writer.finish().unwrap();
    }

    #[test]
    fn zip_directory_entries_hash_as_empty_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("p.zip");
        write_zip(&path, &[("dir/", b""), ("dir/abc", b"data for abc")]);
        let expected = PackageHash::h1_of_files(&[
            ("dir/".to_owned(), digest(b"")),
            ("dir/abc".to_owned(), digest(b"data for abc")),
        ])
        .unwrap();
        assert_eq!(PackageHash::h1_of_zip(&path).unwrap(), expected);
    }

    /// Builds a stored (uncompressed) zip by hand, because no zip writer
    /// will emit the same name twice.
    fn stored_zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, content) in entries {
            let offset = u32::try_from(out.len()).unwrap();
            let crc = crc32(content);
            let size = u32::try_from(content.len()).unwrap();
            let name_len = u16::try_from(name.len()).unwrap();
            out.extend_from_slice(&[0x50, 0x4b, 0x03, 0x04, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&crc.to_le_bytes());
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&name_len.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(content);

            central
                .extend_from_slice(&[0x50, 0x4b, 0x01, 0x02, 20, 3, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
            central.extend_from_slice(&crc.to_le_bytes());
            central.extend_from_slice(&size.to_le_bytes());
            central.extend_from_slice(&size.to_le_bytes());
            central.extend_from_slice(&name_len.to_le_bytes());
            central.extend_from_slice(&[0; 12]);
            central.extend_from_slice(&offset.to_le_bytes());
            central.extend_from_slice(name.as_bytes());
        }
        let central_start = u32::try_from(out.len()).unwrap();
        let count = u16::try_from(entries.len()).unwrap();
        out.extend_from_slice(&central);
        out.extend_from_slice(&[0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0]);
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&u32::try_from(central.len()).unwrap().to_le_bytes());
        out.extend_from_slice(&central_start.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for byte in data {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn zip_duplicate_names_count_twice_with_last_content() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("dup.zip");
        fs::write(
            &path,
            stored_zip(&[("a", b"first"), ("b", b"bee"), ("a", b"second")]),
        )
        .unwrap();
        let expected = PackageHash::h1_of_files(&[
            ("a".to_owned(), digest(b"second")),
            ("a".to_owned(), digest(b"second")),
            ("b".to_owned(), digest(b"bee")),
        ])
        .unwrap();
        assert_eq!(PackageHash::h1_of_zip(&path).unwrap(), expected);
    }

    #[test]
    fn matching_rules() {
        let dir = vector(&format!(
            "{MIRROR}/registry.terraform.io/hashicorp/null/2.0.0/linux_amd64"
        ));
        let zip =
            vector("internal/providercache/testdata/terraform-provider-null_2.1.0_linux_amd64.zip");
        let fake = vector(&format!(
            "{MIRROR}/registry.terraform.io/hashicorp/null/terraform-provider-null_2.1.0_linux_amd64.zip"
        ));
        let h1 = PackageHash::parse(NULL_H1).unwrap();
        let zh = PackageHash::parse(
            "zh:299dd806df78cb0537e5c111019eaca6e6b7797e1b63cb37cc6a76f91c6c0782",
        )
        .unwrap();
        let other = PackageHash::parse("h0:whatever").unwrap();

        assert!(h1.matches(LocalPackage::Directory(&dir)).unwrap());
        assert!(h1.matches(LocalPackage::Archive(&zip)).unwrap());
        assert!(zh.matches(LocalPackage::Archive(&zip)).unwrap());
        assert!(!zh.matches(LocalPackage::Archive(&fake)).unwrap());
        assert_eq!(
            zh.matches(LocalPackage::Directory(&dir))
                .unwrap_err()
                .to_string(),
            "ziphash scheme (\"zh:\" prefix) is not supported for unpacked provider packages"
        );
        assert_eq!(
            other
                .matches(LocalPackage::Directory(&dir))
                .unwrap_err()
                .to_string(),
            "unsupported hash format (this may require a newer version of Terraform)"
        );

        let dir_pkg = LocalPackage::Directory(&dir);
        assert!(
            PackageHash::matches_any(dir_pkg, &[other.clone(), zh.clone(), h1.clone()]).unwrap()
        );
        assert!(!PackageHash::matches_any(dir_pkg, &[other.clone(), zh.clone()]).unwrap());
        assert!(
            PackageHash::matches_any(LocalPackage::Archive(&zip), std::slice::from_ref(&zh))
                .unwrap()
        );

        // A matching zh: listed first spares the h1: of a file that is not a zip.
        let fake_zh = PackageHash::zh_of_file(&fake).unwrap();
        let fake_pkg = LocalPackage::Archive(&fake);
        assert!(PackageHash::matches_any(fake_pkg, &[fake_zh.clone(), h1.clone()]).unwrap());
        assert_eq!(
            PackageHash::matches_any(fake_pkg, &[h1, fake_zh])
                .unwrap_err()
                .to_string(),
            "zip: not a valid zip file"
        );
    }
}
