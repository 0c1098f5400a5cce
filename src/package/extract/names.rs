//! The checks on entry names: plain relative paths that mean the same on
//! every operating system, each claimed by one entry only.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use super::error::ExtractError;

/// Longest single path component most file systems accept (ext4, APFS, NTFS).
pub(super) const MAX_COMPONENT_BYTES: usize = 255;
/// Linux `PATH_MAX`; a longer relative name cannot be opened on Linux anyway.
pub(super) const MAX_PATH_BYTES: usize = 4096;

/// Why an entry name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameProblem {
    Empty,
    NotUtf8,
    Nul,
    Backslash,
    Absolute,
    Colon,
    DotDot,
    EmptyOrDotComponent,
    ComponentTooLong,
    PathTooLong,
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameProblem::Empty => f.write_str("the name is empty"),
            NameProblem::NotUtf8 => f.write_str("the name is not valid UTF-8"),
            NameProblem::Nul => f.write_str("the name contains a NUL byte"),
            NameProblem::Backslash => f.write_str(
                "the name contains a backslash, which Windows treats as a path separator",
            ),
            NameProblem::Absolute => f.write_str("the name is an absolute path"),
            NameProblem::Colon => f.write_str(
                "the name contains ':', which Windows treats as a drive or stream separator",
            ),
            NameProblem::DotDot => f.write_str(
                "the name has a \"..\" component, which would point outside the package directory",
            ),
            NameProblem::EmptyOrDotComponent => {
                f.write_str("the name has an empty or \".\" path component")
            }
            NameProblem::ComponentTooLong => write!(
                f,
                "a path component is longer than {MAX_COMPONENT_BYTES} bytes"
            ),
            NameProblem::PathTooLong => {
                write!(f, "the name is longer than {MAX_PATH_BYTES} bytes")
            }
        }
    }
}

/// Returns the relative path an entry name denotes, without a directory's
/// trailing `/`, and whether the name marked a directory.
pub(super) fn validate_name(raw: &[u8]) -> Result<(&str, bool), NameProblem> {
    if raw.is_empty() {
        return Err(NameProblem::Empty);
    }
    if raw.contains(&0) {
        return Err(NameProblem::Nul);
    }
    let name = std::str::from_utf8(raw).map_err(|_| NameProblem::NotUtf8)?;
    if name.contains('\\') {
        return Err(NameProblem::Backslash);
    }
    let has_drive_letter = matches!(raw, [letter, b':', ..] if letter.is_ascii_alphabetic());
    if name.starts_with('/') || has_drive_letter {
        return Err(NameProblem::Absolute);
    }
    if name.contains(':') {
        return Err(NameProblem::Colon);
    }
    if name.len() > MAX_PATH_BYTES {
        return Err(NameProblem::PathTooLong);
    }
    let (path, is_dir) = match name.strip_suffix('/') {
        Some(path) => (path, true),
        None => (name, false),
    };
    if path.split('/').any(|component| component == "..") {
        return Err(NameProblem::DotDot);
    }
    for component in path.split('/') {
        if component.is_empty() || component == "." {
            return Err(NameProblem::EmptyOrDotComponent);
        }
        if component.len() > MAX_COMPONENT_BYTES {
            return Err(NameProblem::ComponentTooLong);
        }
    }
    Ok((path, is_dir))
}

/// Which entry owns each path, keyed by the case-folded path.
#[derive(Default)]
pub(super) struct PathClaims(HashMap<String, Claim>);

pub(super) struct Claim {
    spelled: String,
    entry: String,
    kind: ClaimKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ClaimKind {
    File,
    ExplicitDir,
    ImplicitDir,
}

impl PathClaims {
    pub(super) fn claim_entry(
        &mut self,
        path: &str,
        entry: &str,
        is_dir: bool,
    ) -> Result<(), ExtractError> {
        for (end, _) in path.match_indices('/') {
            self.claim(&path[..end], entry, ClaimKind::ImplicitDir)?;
        }
        let kind = if is_dir {
            ClaimKind::ExplicitDir
        } else {
            ClaimKind::File
        };
        self.claim(path, entry, kind)
    }

    pub(super) fn claim(
        &mut self,
        path: &str,
        entry: &str,
        wanted: ClaimKind,
    ) -> Result<(), ExtractError> {
        let existing = match self.0.entry(path.to_lowercase()) {
            Entry::Vacant(vacant) => {
                vacant.insert(Claim {
                    spelled: path.to_owned(),
                    entry: entry.to_owned(),
                    kind: wanted,
                });
                return Ok(());
            }
            Entry::Occupied(occupied) => occupied.into_mut(),
        };
        if existing.spelled != path {
            return Err(ExtractError::CaseConflict {
                first: existing.entry.clone(),
                second: entry.to_owned(),
            });
        }
        match (existing.kind, wanted) {
            (ClaimKind::ImplicitDir | ClaimKind::ExplicitDir, ClaimKind::ImplicitDir) => Ok(()),
            (ClaimKind::ImplicitDir, ClaimKind::ExplicitDir) => {
                existing.kind = ClaimKind::ExplicitDir;
                Ok(())
            }
            (ClaimKind::ImplicitDir, ClaimKind::File) => Err(ExtractError::ParentIsFile {
                file: entry.to_owned(),
                child: existing.entry.clone(),
            }),
            (ClaimKind::File, ClaimKind::ImplicitDir) => Err(ExtractError::ParentIsFile {
                file: existing.entry.clone(),
                child: entry.to_owned(),
            }),
            (ClaimKind::File | ClaimKind::ExplicitDir, _) => Err(ExtractError::NameConflict {
                first: existing.entry.clone(),
                second: entry.to_owned(),
            }),
        }
    }
}
