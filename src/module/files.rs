//! Finding and reading a module directory's configuration files in
//! Terraform's order (parser_config_dir.go), with OpenTofu's `.tofu` files
//! when it is the engine.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::diag::{Diagnostic, Diagnostics, SourceText, with_known_texts};
use crate::engine::Engine;

use super::assemble::{ModuleConfig, assemble};
use super::decode::{FileDecls, decode_file};
use super::range::LineIndex;
use super::syntax::TOP_LEVEL;
use super::{json, native};

/// A module directory's files, each by the name Terraform shows for it
/// (the module's display directory joined with the file name).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ConfigFiles {
    pub primary: Vec<PathBuf>,
    pub overrides: Vec<PathBuf>,
}

/// Editor backups, swap files and hidden files are never configuration.
pub(super) fn is_ignored(name: &str) -> bool {
    name.starts_with('.') || name.ends_with('~') || (name.starts_with('#') && name.ends_with('#'))
}

/// A configuration file's name without its extension, for the extensions
/// `engine` reads: OpenTofu reads `.tofu` and `.tofu.json` files too.
fn stem_of_config_file(name: &str, engine: Engine) -> Option<&str> {
    let extensions: &[&str] = match engine {
        Engine::Terraform => &[".tf.json", ".tf"],
        Engine::OpenTofu => &[".tf.json", ".tf", ".tofu.json", ".tofu"],
    };
    extensions.iter().find_map(|ext| name.strip_suffix(ext))
}

fn is_override(stem: &str) -> bool {
    stem == "override" || stem.ends_with("_override")
}

fn is_json(name: &str) -> bool {
    name.ends_with(".tf.json") || name.ends_with(".tofu.json")
}

/// Lists the configuration files (not subdirectories) sorted by name, as
/// Go's ReadDir does; `.tf` and `.tf.json` files interleave.
pub(super) fn config_files(
    fs_dir: &Path,
    display_dir: &Path,
    engine: Engine,
) -> io::Result<ConfigFiles> {
    let mut names = Vec::new();
    for entry in fs::read_dir(fs_dir)? {
        let entry = entry?;
        // The entry's own type, not its target's: a symlink counts as a file.
        if entry.file_type()?.is_dir() {
            continue;
        }
        names.push(entry.file_name());
    }
    names.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
    let names: Vec<&str> = names.iter().filter_map(|name| name.to_str()).collect();

    let mut primary = Vec::new();
    let mut overrides = Vec::new();
    for name in names {
        if is_ignored(name) {
            continue;
        }
        let Some(stem) = stem_of_config_file(name, engine) else {
            continue;
        };
        if is_override(stem) {
            overrides.push(name);
        } else {
            primary.push(name);
        }
    }
    let in_dir = |names: Vec<&str>| -> Vec<PathBuf> {
        without_shadowed_tf_files(&names)
            .map(|name| display_dir.join(name))
            .collect()
    };
    Ok(ConfigFiles {
        primary: in_dir(primary),
        overrides: in_dir(overrides),
    })
}

/// OpenTofu's rule for modules that serve both programs: `X.tofu` takes the
/// place of `X.tf`, and `X.tofu.json` of `X.tf.json`, within the primary
/// files and within the override files. Terraform mode lists no `.tofu`
/// files, so nothing is shadowed there.
fn without_shadowed_tf_files<'a>(names: &'a [&'a str]) -> impl Iterator<Item = &'a str> {
    names.iter().copied().filter(move |name| {
        let alternative = if let Some(stem) = name.strip_suffix(".tf.json") {
            format!("{stem}.tofu.json")
        } else if let Some(stem) = name.strip_suffix(".tf") {
            format!("{stem}.tofu")
        } else {
            return true;
        };
        !names.contains(&alternative.as_str())
    })
}

/// A module directory's files put together, and what reading them
/// reported.
pub(super) type LoadedModule = Arc<Reading>;

/// A module directory's files put together ([`ModuleConfig`]), what
/// reading them reported, and the digest of what was read: the reading
/// holds for any directory whose files have the same names and bytes.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Reading {
    /// Kept beside the reading in a readings file, not in it.
    #[serde(skip)]
    pub digest: [u8; 32],
    pub config: ModuleConfig,
    pub diags: Vec<Diagnostic>,
}

/// One configuration file of a module directory as read: its name as
/// diagnostics give it, whether it overrides, and its bytes (`None` when it
/// could not be read).
struct ReadFile {
    display_path: PathBuf,
    is_override: bool,
    bytes: Option<Vec<u8>>,
}

/// The digest a reading of `files` is kept by: everything the reading
/// depends on besides the program (engine, directory name, each file's
/// name, kind and bytes), length-prefixed so that no two lists collide.
fn digest_of(display_dir: &Path, engine: Engine, files: &[ReadFile]) -> [u8; 32] {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut part = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    part(&[u8::from(engine == Engine::OpenTofu)]);
    part(display_dir.as_os_str().as_encoded_bytes());
    for file in files {
        part(file.display_path.as_os_str().as_encoded_bytes());
        part(&[u8::from(file.is_override)]);
        match &file.bytes {
            Some(bytes) => part(bytes),
            None => part(b"unreadable"),
        }
    }
    hasher.finalize().into()
}

/// A module directory as the memo knows it: the directory diagnostics name
/// (ranges carry it), where it was read (for a tree placed from a package,
/// its path in that package), and whether OpenTofu's files were read.
type ModuleKey = (PathBuf, PathBuf, bool);

/// What this process has read of module directories, once
/// [`remember_modules_read`] has turned it on.
#[derive(Default)]
struct Memo {
    modules: HashMap<ModuleKey, LoadedModule>,
    /// Trees placed from packages that do not change, by where each was
    /// placed: the package it is a copy of.
    placed: HashMap<PathBuf, PathBuf>,
    /// Readings earlier runs kept ([`recall_readings`]), by digest, as
    /// they were written: each is read back when a module's files have
    /// its digest.
    kept: HashMap<[u8; 32], Box<serde_json::value::RawValue>>,
    /// The readings each data directory's configuration was made of, for
    /// [`keep_readings`], with what its readings file held before.
    used: HashMap<PathBuf, (Vec<LoadedModule>, Option<Vec<u8>>)>,
    /// Modules [`read_early`] is reading now: another early read of one
    /// of them (the same package guessed in the next directory of an
    /// `init DIR…`) leaves it to this one.
    reading_early: HashSet<ModuleKey>,
}

impl Memo {
    /// Where the module in `fs_dir` is read from as far as the memo goes:
    /// for a directory inside a placed tree, its path in the package.
    fn location(&self, fs_dir: &Path) -> PathBuf {
        let fs_dir = fs_dir.strip_prefix(".").unwrap_or(fs_dir);
        let placed = fs_dir.ancestors().find_map(|ancestor| {
            let package = self.placed.get(ancestor)?;
            let rest = fs_dir.strip_prefix(ancestor).ok()?;
            Some(package.join(rest))
        });
        placed.unwrap_or_else(|| fs_dir.to_path_buf())
    }

    /// The key the module in `fs_dir`, named `display_dir`, is kept by.
    fn key(&self, fs_dir: &Path, display_dir: &Path, engine: Engine) -> ModuleKey {
        (
            display_dir.to_path_buf(),
            self.location(fs_dir),
            engine == Engine::OpenTofu,
        )
    }
}

/// `None` until [`remember_modules_read`].
static MEMO: Mutex<Option<Memo>> = Mutex::new(None);

fn memo() -> std::sync::MutexGuard<'static, Option<Memo>> {
    MEMO.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes this process read each module directory once: one run of `init`
/// reads a module to walk its calls, again for the early provider fetch and
/// again for the requirements, and `init DIR…` reads the same packages for
/// every directory. A configuration is taken to hold still while one run
/// reads it (as Terraform reads it once); a module of a tree placed from a
/// package that does not change ([`same_tree`]) is known by its path in
/// that package, so every directory that placed it shares one reading.
/// Left off by default: a process that outlives one run (the unit tests)
/// would otherwise keep what is long gone.
pub fn remember_modules_read() {
    memo().get_or_insert_with(Memo::default);
}

/// The file in a data directory that keeps the readings of its
/// configuration's modules from one run to the next.
const READINGS_FILE: &str = ".tfinstall-readings.json";

/// A readings file: which program wrote it, and its readings by digest.
#[derive(serde::Deserialize)]
struct KeptReadings {
    reader: String,
    readings: Vec<KeptReading>,
}

#[derive(serde::Deserialize)]
struct KeptReading {
    #[serde(with = "hex::serde")]
    digest: [u8; 32],
    reading: Box<serde_json::value::RawValue>,
}

#[derive(serde::Serialize)]
struct KeptReadingsOut<'a> {
    reader: &'a str,
    readings: Vec<KeptReadingOut<'a>>,
}

#[derive(serde::Serialize)]
struct KeptReadingOut<'a> {
    #[serde(with = "hex::serde")]
    digest: [u8; 32],
    reading: &'a Reading,
}

/// This program, as a readings file names the program that wrote it: a
/// reading holds only for the parser that made it, so another build (even
/// of the same version) reads its files afresh. `None` when the program's
/// own file cannot be looked at: then nothing is kept or recalled.
fn reader() -> Option<&'static str> {
    static READER: OnceLock<Option<String>> = OnceLock::new();
    READER
        .get_or_init(|| {
            let program = std::env::current_exe().and_then(fs::metadata).ok()?;
            let modified = program
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            Some(format!(
                "tfinstall {} {} {}",
                env!("CARGO_PKG_VERSION"),
                program.len(),
                modified.as_nanos()
            ))
        })
        .as_deref()
}

/// Makes the readings an earlier run kept in `data_dir` available to this
/// one: a module whose files have the same names and bytes is not parsed
/// again (a no-op `init` of a configuration calling large modules was
/// mostly parsing). Needs [`remember_modules_read`].
pub fn recall_readings(data_dir: &Path) {
    let Some(reader) = reader() else {
        return;
    };
    if memo().is_none() {
        return;
    }
    let before = fs::read(data_dir.join(READINGS_FILE)).ok();
    let kept = before
        .as_deref()
        .and_then(|bytes| serde_json::from_slice::<KeptReadings>(bytes).ok())
        .filter(|kept| kept.reader == reader);
    if let Some(memo) = memo().as_mut() {
        for entry in kept.into_iter().flat_map(|kept| kept.readings) {
            memo.kept.insert(entry.digest, entry.reading);
        }
        memo.used.entry(data_dir.to_path_buf()).or_default().1 = before;
    }
}

/// Records that the configuration of `data_dir` was made of `readings`.
pub(super) fn used_by(data_dir: &Path, readings: Vec<LoadedModule>) {
    if let Some(memo) = memo().as_mut() {
        memo.used.entry(data_dir.to_path_buf()).or_default().0 = readings;
    }
}

/// Keeps in `data_dir` the readings its configuration was last made of,
/// for the next run's [`recall_readings`]; written only when they changed.
/// A cache: when it cannot be written, the next run parses again.
pub fn keep_readings(data_dir: &Path) {
    let Some(reader) = reader() else {
        return;
    };
    let Some((readings, before)) = memo().as_mut().and_then(|memo| memo.used.remove(data_dir))
    else {
        return;
    };
    if readings.is_empty() {
        return;
    }
    let kept = KeptReadingsOut {
        reader,
        readings: readings
            .iter()
            .map(|reading| KeptReadingOut {
                digest: reading.digest,
                reading,
            })
            .collect(),
    };
    let Ok(text) = serde_json::to_vec(&kept) else {
        return;
    };
    if before.as_deref() != Some(text.as_slice()) {
        let _ = crate::fsutil::write_umask(
            &data_dir.join(READINGS_FILE),
            &text,
            0o644,
            crate::fsutil::Flush::No,
        );
    }
}

/// Whether [`remember_modules_read`] has turned the memo on.
pub(super) fn remembering() -> bool {
    memo().is_some()
}

/// Tells the memo that the tree at `placed` was just made, file for file,
/// from `package`, a module cache entry or a package fetched for this run,
/// neither of which changes while the run lasts: a module under `placed`
/// is read as the one under `package`.
pub fn same_tree(placed: &Path, package: &Path) {
    if let Some(memo) = memo().as_mut() {
        let placed = placed.strip_prefix(".").unwrap_or(placed);
        memo.placed
            .insert(placed.to_path_buf(), package.to_path_buf());
    }
}

/// Tells the memo that the tree at `placed` is gone: whatever is put there
/// next is read afresh.
pub fn tree_removed(placed: &Path) {
    if let Some(memo) = memo().as_mut() {
        let placed = placed.strip_prefix(".").unwrap_or(placed);
        memo.placed.remove(placed);
    }
}

/// Reads the module at the root of `package` (a module cache entry, which
/// does not change while the run lasts) as the walk will name it once it
/// is placed, `display_dir`: done while the registry's answers that
/// confirm the package are awaited, it leaves the walk's own read of the
/// tree placed from it nothing to do. A memo that has it, or another
/// thread reading it early, makes this do nothing; a guess the answers do
/// not bear out only costs the read.
pub fn read_early(package: &Path, display_dir: &Path) {
    let engine = Engine::current();
    let key = {
        let mut guard = memo();
        let Some(memo) = guard.as_mut() else {
            return;
        };
        let key = memo.key(package, display_dir, engine);
        if key.1 != package
            || memo.modules.contains_key(&key)
            || !memo.reading_early.insert(key.clone())
        {
            return;
        }
        key
    };
    let _ = load_module(package, display_dir, engine);
    if let Some(memo) = memo().as_mut() {
        memo.reading_early.remove(&key);
    }
}

/// Whether the memo already holds the module in `fs_dir` as
/// [`load_module`] would name it: a read that would cost nothing.
pub fn remembered(fs_dir: &Path, display_dir: &Path, engine: Engine) -> bool {
    memo().as_ref().is_some_and(|memo| {
        memo.modules
            .contains_key(&memo.key(fs_dir, display_dir, engine))
    })
}

/// Reads the module in `fs_dir` whose directory diagnostics name
/// `display_dir`: its files as `engine` lists them, put together. `Err`
/// when the directory cannot be listed.
pub(super) fn load_module(
    fs_dir: &Path,
    display_dir: &Path,
    engine: Engine,
) -> io::Result<LoadedModule> {
    let key = memo()
        .as_ref()
        .map(|memo| memo.key(fs_dir, display_dir, engine));
    if let Some(key) = &key
        && let Some(known) = memo()
            .as_ref()
            .and_then(|memo| memo.modules.get(key).cloned())
    {
        return Ok(known);
    }
    let listed = config_files(fs_dir, display_dir, engine)?;
    let primary = listed.primary.iter().map(|path| (path, false));
    let overrides = listed.overrides.iter().map(|path| (path, true));
    let files: Vec<ReadFile> = primary
        .chain(overrides)
        .map(|(path, is_override)| {
            let name = path.strip_prefix(display_dir).unwrap_or(path);
            ReadFile {
                display_path: path.clone(),
                is_override,
                bytes: fs::read(fs_dir.join(name)).ok(),
            }
        })
        .collect();
    let digest = digest_of(display_dir, engine, &files);
    let loaded: LoadedModule =
        Arc::new(kept_reading(&digest, &files).unwrap_or_else(|| read_afresh(digest, files)));
    if let Some(key) = key
        && let Some(memo) = memo().as_mut()
    {
        memo.modules.insert(key, loaded.clone());
    }
    Ok(loaded)
}

/// Parses and puts together `files`, read from one module directory.
fn read_afresh(digest: [u8; 32], files: Vec<ReadFile>) -> Reading {
    let mut diags = Diagnostics::new();
    let (mut primary, mut overrides) = (Vec::new(), Vec::new());
    for file in files {
        let decls = decode_bytes(file.bytes, &file.display_path, file.is_override, &mut diags);
        match (decls, file.is_override) {
            (Some(decls), false) => primary.push(decls),
            (Some(decls), true) => overrides.push(decls),
            (None, _) => {}
        }
    }
    let config = assemble(primary, overrides, &mut diags);
    Reading {
        digest,
        config,
        diags: diags.0,
    }
}

/// A reading an earlier run kept of exactly these files, with the files'
/// texts at hand for the diagnostics to quote; `None` when there is none
/// (or it cannot be read back, which only costs the parse).
fn kept_reading(digest: &[u8; 32], files: &[ReadFile]) -> Option<Reading> {
    let raw = memo().as_ref()?.kept.get(digest)?.clone();
    let texts: Vec<SourceText> = files
        .iter()
        .filter_map(|file| {
            let text = std::str::from_utf8(file.bytes.as_deref()?).ok()?;
            let text = text.strip_prefix('\u{feff}').unwrap_or(text);
            Some(SourceText::new(&file.display_path, text))
        })
        .collect();
    let reading = with_known_texts(&texts, || serde_json::from_str::<Reading>(raw.get())).ok()?;
    Some(Reading {
        digest: *digest,
        ..reading
    })
}

/// Reads and decodes one file: `fs_path` is where it is, `display_path`
/// the name diagnostics give it.
#[cfg(test)]
fn load_file(
    fs_path: &Path,
    display_path: &Path,
    is_override: bool,
    diags: &mut Diagnostics,
) -> Option<FileDecls> {
    decode_bytes(fs::read(fs_path).ok(), display_path, is_override, diags)
}

/// Decodes one file's bytes (`None`: it could not be read), named
/// `display_path` in diagnostics.
fn decode_bytes(
    bytes: Option<Vec<u8>>,
    display_path: &Path,
    is_override: bool,
    diags: &mut Diagnostics,
) -> Option<FileDecls> {
    let bytes = match bytes {
        Some(bytes) => bytes,
        None => {
            diags.push(Diagnostic::error(
                "Failed to read file",
                format!(
                    "The file {:?} could not be read.",
                    display_path.display().to_string()
                ),
            ));
            return None;
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        diags.push(
            Diagnostic::error(
                "Invalid character encoding",
                "All input files must be UTF-8 encoded. Ensure that UTF-8 encoding is selected in your editor.",
            )
            .at(display_path, 1, 1),
        );
        return None;
    };
    let src = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let index = LineIndex::new(display_path, src);
    let body = if display_path
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(is_json)
    {
        json::parse_file(src, &index, &TOP_LEVEL, diags)
    } else {
        native::parse_file(src, &index, &TOP_LEVEL, diags)
    }?;
    Some(decode_file(&body, is_override, diags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignores_editor_and_hidden_files() {
        assert!(is_ignored(".main.tf.swp"));
        assert!(is_ignored(".hidden.tf"));
        assert!(is_ignored("main.tf~"));
        assert!(is_ignored("#main.tf#"));
        assert!(!is_ignored("#main.tf"));
        assert!(!is_ignored("main.tf"));
    }

    #[test]
    fn sorts_and_splits_primary_and_override_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "b.tf",
            "a.tf.json",
            "override.tf",
            "z_override.tf.json",
            "notes.txt",
            "main.tf~",
            ".x.tf",
            "overrides.tf",
            "c.tf.json.bak",
        ] {
            fs::write(dir.path().join(name), "").expect("write");
        }
        fs::create_dir(dir.path().join("sub.tf")).expect("mkdir");
        let files = config_files(dir.path(), Path::new("mod"), Engine::Terraform).expect("listed");
        assert_eq!(
            files,
            ConfigFiles {
                primary: vec![
                    "mod/a.tf.json".into(),
                    "mod/b.tf".into(),
                    "mod/overrides.tf".into()
                ],
                overrides: vec!["mod/override.tf".into(), "mod/z_override.tf.json".into()],
            }
        );
    }

    #[test]
    fn opentofu_reads_tofu_files_in_place_of_tf_files_of_the_same_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "main.tf",
            "main.tofu",
            "vars.tf.json",
            "vars.tofu.json",
            "only.tf",
            "other.tf.json",
            "other.tofu",
            "new.tofu.json",
            "override.tf",
            "override.tofu",
            "x_override.tf.json",
        ] {
            fs::write(dir.path().join(name), "").expect("write");
        }
        let listed = |engine| config_files(dir.path(), Path::new(""), engine).expect("listed");
        assert_eq!(
            listed(Engine::OpenTofu),
            ConfigFiles {
                primary: [
                    "main.tofu",
                    "new.tofu.json",
                    "only.tf",
                    "other.tf.json",
                    "other.tofu",
                    "vars.tofu.json"
                ]
                .map(PathBuf::from)
                .to_vec(),
                overrides: ["override.tofu", "x_override.tf.json"]
                    .map(PathBuf::from)
                    .to_vec(),
            }
        );
        assert_eq!(
            listed(Engine::Terraform),
            ConfigFiles {
                primary: ["main.tf", "only.tf", "other.tf.json", "vars.tf.json"]
                    .map(PathBuf::from)
                    .to_vec(),
                overrides: ["override.tf", "x_override.tf.json"]
                    .map(PathBuf::from)
                    .to_vec(),
            }
        );
    }

    #[test]
    fn rejects_non_utf8_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("bad.tf"), b"provider \"\xff\" {}").expect("write");
        let mut diags = Diagnostics::new();
        assert!(
            load_file(
                &dir.path().join("bad.tf"),
                Path::new("bad.tf"),
                false,
                &mut diags
            )
            .is_none()
        );
        assert_eq!(diags.0[0].summary, "Invalid character encoding");
    }

    #[test]
    fn accepts_a_byte_order_mark() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("bom.tf"), "\u{feff}provider \"aws\" {}\n").expect("write");
        let mut diags = Diagnostics::new();
        let decls = load_file(
            &dir.path().join("bom.tf"),
            Path::new("bom.tf"),
            false,
            &mut diags,
        )
        .expect("parsed");
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(decls.provider_configs.len(), 1);
    }
}
