//! Finding and reading a module directory's configuration files in
//! Terraform's order (parser_config_dir.go), with OpenTofu's `.tofu` files
//! when it is the engine.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::Engine;

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
    let names: Vec<String> = names
        .into_iter()
        .filter_map(|name| name.into_string().ok())
        .collect();

    let mut primary = Vec::new();
    let mut overrides = Vec::new();
    for name in &names {
        if is_ignored(name) {
            continue;
        }
        let Some(stem) = stem_of_config_file(name, engine) else {
            continue;
        };
        if is_override(stem) {
            overrides.push(name.as_str());
        } else {
            primary.push(name.as_str());
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

/// Reads and decodes one file: `fs_path` is where it is, `display_path`
/// the name diagnostics give it.
pub(super) fn load_file(
    fs_path: &Path,
    display_path: &Path,
    is_override: bool,
    diags: &mut Diagnostics,
) -> Option<FileDecls> {
    let bytes = match fs::read(fs_path) {
        Ok(bytes) => bytes,
        Err(_) => {
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
