//! Provider versions and version constraints, with Terraform's exact syntax
//! and semantics (apparentlymart/go-versions as Terraform uses it).
//!
//! `Version` is our own struct rather than `semver::Version`: Terraform
//! accepts inputs that `semver` rejects (`1`, `1.2`, leading zeros such as
//! `1.02`, pre-release identifiers like `01` or `a..b`), and its ordering and
//! equality rules differ (equality includes build metadata; pre-release
//! identifiers compare with go-versions' own rule). Reproducing the rules
//! directly is simpler than bending `semver` around them.
//!
//! Constraint strings are parsed by a hand-written scanner that accepts
//! exactly what go-versions' Ragel scanner accepts, including where it stops
//! on bad input, because Terraform's error texts quote the consumed and
//! unconsumed parts of the input.

use std::cmp::Ordering;
use std::fmt;

use crate::diag::Diagnostic;
use crate::go_quote::go_quote;

/// One provider version.
///
/// Equality and hashing include build metadata (`1.0.0+local` is not
/// `1.0.0`), because Terraform treats exact selections, lock entries and
/// cache lookups that way. Ordering is semantic-version precedence, with the
/// metadata as a tie-break only so that `Ord` agrees with `Eq`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    prerelease: String,
    metadata: String,
}

impl Version {
    pub fn new(major: u64, minor: u64, patch: u64) -> Version {
        Version {
            major,
            minor,
            patch,
            prerelease: String::new(),
            metadata: String::new(),
        }
    }

    /// Parses an exact version the way registries, mirrors, directory names
    /// and lock files are read (go-versions `ParseVersion`): missing minor or
    /// patch parts become 0, operators and a `v` prefix are errors.
    pub fn parse(input: &str) -> Result<Version, VersionError> {
        if input.trim().is_empty() {
            return Err(VersionError::EmptySpecification);
        }
        let (raw, remain) = scan(input);

        match raw.op.trim() {
            ">" | ">=" | "<" | "<=" | "!" | "!=" | "~>" | "^" | "~" => {
                return Err(VersionError::OperatorInExactVersion(raw.op.to_owned()));
            }
            "" => {
                if raw.sep.contains('v') {
                    return Err(VersionError::VPrefixInExactVersion);
                }
                if !raw.sep.is_empty() {
                    return Err(VersionError::LeadingSpaces);
                }
            }
            _ => return Err(VersionError::InvalidLeadingSequence(raw.op.to_owned())),
        }

        if !remain.is_empty() {
            let rest = remain.trim();
            return Err(if rest.is_empty() {
                VersionError::TrailingSpaces
            } else if rest.starts_with(',') || rest.starts_with('|') {
                VersionError::MultipleExactVersions
            } else if rest.starts_with('-') {
                VersionError::RangeInExactVersion
            } else if input.trim().starts_with(rest) {
                VersionError::NotAVersion
            } else {
                VersionError::InvalidCharacters(rest.to_owned())
            });
        }

        if raw.num_count > 3 {
            return Err(VersionError::TooManyPortions);
        }
        for (index, num) in raw.nums.iter().enumerate() {
            if is_wildcard(num) {
                return Err(VersionError::WildcardInExactVersion(PART_NAMES[index]));
            }
        }
        raw.version()
    }

    pub fn is_prerelease(&self) -> bool {
        !self.prerelease.is_empty()
    }

    /// go-versions' zero value doubles as "no version", so its sets only admit
    /// it when completely unconstrained — which Terraform's sets never are.
    fn is_unspecified(&self) -> bool {
        *self == Version::new(0, 0, 0)
    }

    /// Semantic-version precedence; build metadata plays no part.
    fn cmp_precedence(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(
                || match (self.prerelease.is_empty(), other.prerelease.is_empty()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => compare_extra(&self.prerelease, &other.prerelease),
                },
            )
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Version) -> Ordering {
        self.cmp_precedence(other)
            .then_with(|| compare_extra(&self.metadata, &other.metadata))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Version) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        write_extras(f, &self.prerelease, &self.metadata)
    }
}

fn write_extras(f: &mut fmt::Formatter<'_>, prerelease: &str, metadata: &str) -> fmt::Result {
    if !prerelease.is_empty() {
        write!(f, "-{prerelease}")?;
    }
    if !metadata.is_empty() {
        write!(f, "+{metadata}")?;
    }
    Ok(())
}

/// Orders dot-separated pre-release (or metadata) strings the way
/// go-versions does. Note its quirk, kept on purpose: once one side is on
/// its last part while the other still has more, the shorter one sorts first
/// without comparing that part (`b` < `a.1`).
fn compare_extra(left: &str, right: &str) -> Ordering {
    let (mut left, mut right) = (left, right);
    loop {
        match (left.split_once('.'), right.split_once('.')) {
            (None, None) => return compare_extra_part(left, right),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((left_part, left_rest)), Some((right_part, right_rest))) => {
                if left_part != right_part {
                    return compare_extra_part(left_part, right_part);
                }
                left = left_rest;
                right = right_rest;
            }
        }
    }
}

/// All-digit parts (including the empty part) sort before others, and
/// compare by length first so that no number parsing (and no overflow) is
/// needed.
fn compare_extra_part(left: &str, right: &str) -> Ordering {
    let is_numeric = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    match (is_numeric(left), is_numeric(right)) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (true, true) => left.len().cmp(&right.len()).then_with(|| left.cmp(right)),
        (false, false) => left.cmp(right),
    }
}

/// A list of version selections that must all hold (their intersection).
///
/// Selections are kept as written (operator plus boundary, omitted parts as
/// 0) rather than simplified, because Terraform reports the canonical string
/// of the whole list and merges lists from many modules by concatenation.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VersionConstraints {
    selections: Vec<Selection>,
}

impl VersionConstraints {
    /// Parses a constraint string with go-versions' Ruby-style multi parser,
    /// as Terraform does for lock files. The empty string means "any
    /// version".
    pub fn parse(input: &str) -> Result<VersionConstraints, VersionError> {
        let mut selections = Vec::new();
        let mut remain = input.trim();
        while !remain.is_empty() {
            let (result, rest) = parse_selection(remain);
            let consumed = &remain[..remain.len() - rest.len()];
            let selection = result.map_err(|reason| VersionError::InvalidSpecification {
                item: consumed.to_owned(),
                reason: Box::new(reason),
            })?;
            remain = rest.trim();
            if !remain.is_empty() {
                if remain.starts_with('v') {
                    return Err(VersionError::VPrefixInConstraint);
                }
                let Some(after_comma) = remain.strip_prefix(',') else {
                    return Err(VersionError::MissingComma(consumed.to_owned()));
                };
                remain = after_comma.trim();
            }
            selections.push(selection);
        }
        Ok(VersionConstraints { selections })
    }

    /// Parses a `version` argument from module configuration. Terraform runs
    /// hashicorp/go-version's parser first and go-versions' second, so only
    /// strings both accept get through, each stage with its own error text.
    pub fn parse_config(input: &str) -> Result<VersionConstraints, ConstraintSyntaxError> {
        if !input.split(',').all(go_version_accepts_constraint) {
            return Err(ConstraintSyntaxError {
                summary: "Invalid version constraint".to_owned(),
                detail: "This string does not use correct version constraint syntax.".to_owned(),
            });
        }
        VersionConstraints::parse(input).map_err(|err| ConstraintSyntaxError {
            summary: "Invalid version constraint".to_owned(),
            detail: format!("Incorrect version constraint syntax: {err}."),
        })
    }

    pub fn empty() -> VersionConstraints {
        VersionConstraints::default()
    }

    /// The set holding exactly `version`, pre-releases included, which is how
    /// Terraform pins a provider to its locked version (`versions.Only`).
    pub fn only(version: &Version) -> VersionConstraints {
        VersionConstraints {
            selections: vec![Selection {
                operator: Operator::Equal,
                boundary: version.clone(),
            }],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.selections.is_empty()
    }

    pub fn extend(&mut self, other: &VersionConstraints) {
        self.selections.extend(other.selections.iter().cloned());
    }

    /// Whether `version` is acceptable (`MeetingConstraints`): it must meet
    /// every selection, and a pre-release must also be named by an exact
    /// selection, so that `>= 1.0` never silently picks `2.0.0-beta1`.
    pub fn allows(&self, version: &Version) -> bool {
        if !self.bounds_contain(version) {
            return false;
        }
        !version.is_prerelease()
            || self
                .selections
                .iter()
                .any(|s| s.operator == Operator::Equal && s.boundary == *version)
    }

    /// Whether `version` meets every selection, a pre-release like any other
    /// version. A rule that refuses versions needs this rather than
    /// [`VersionConstraints::allows`]: a provider policy's `deny` of `>= 5.0.0`
    /// must refuse `5.1.0-beta1` too.
    pub fn bounds_contain(&self, version: &Version) -> bool {
        !version.is_unspecified() && self.selections.iter().all(|s| s.contains(version))
    }

    /// The only version these constraints can allow, when an exact selection
    /// pins one: the installer can ask for its package while the version
    /// list that confirms it is still on its way.
    pub fn pinned(&self) -> Option<&Version> {
        self.selections
            .iter()
            .find(|s| s.operator == Operator::Equal)
            .map(|s| &s.boundary)
            .filter(|version| self.allows(version))
    }

    /// The highest-precedence acceptable version. Among versions that differ
    /// only in metadata the later one in `available` wins, matching a stable
    /// ascending sort followed by taking the last match.
    pub fn newest_allowed<'a>(&self, available: &'a [Version]) -> Option<&'a Version> {
        available
            .iter()
            .filter(|v| self.allows(v))
            .fold(None, |best, candidate| match best {
                Some(best) if best.cmp_precedence(candidate) == Ordering::Greater => Some(best),
                _ => Some(candidate),
            })
    }
}

/// Terraform's canonical constraint string (`VersionConstraintsString`):
/// duplicates removed, sorted by boundary then operator, joined with `", "`.
/// Lock files store this form, so it must match byte for byte.
impl fmt::Display for VersionConstraints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut canonical: Vec<&Selection> = self.selections.iter().collect();
        canonical.sort_by(|a, b| {
            a.boundary.cmp(&b.boundary).then_with(|| {
                a.operator
                    .canonical_rank()
                    .cmp(&b.operator.canonical_rank())
            })
        });
        canonical.dedup();
        for (index, selection) in canonical.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{selection}")?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Operator {
    Equal,
    NotEqual,
    GreaterThan,
    GreaterThanOrEqual,
    LessThan,
    LessThanOrEqual,
    /// `~> M.m.p`: at least the boundary, below the next minor release.
    PessimisticPatch,
    /// `~> M.m` or `~> M`: at least the boundary, below the next major release.
    PessimisticMinor,
}

impl Operator {
    /// Terraform's arbitrary but fixed order, putting lower bounds before
    /// upper bounds as a person would write them.
    fn canonical_rank(self) -> u8 {
        match self {
            Operator::GreaterThan => 1,
            Operator::GreaterThanOrEqual => 2,
            Operator::Equal => 3,
            Operator::PessimisticPatch => 4,
            Operator::PessimisticMinor => 5,
            Operator::LessThanOrEqual => 6,
            Operator::LessThan => 7,
            Operator::NotEqual => 8,
        }
    }
}

/// One operator applied to one boundary version. Parts the user omitted are
/// stored as 0: every consumer (set membership, canonical string) treats
/// them that way, so nothing is lost.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Selection {
    operator: Operator,
    boundary: Version,
}

impl Selection {
    /// Plain membership, before the pre-release rule of
    /// [`VersionConstraints::allows`].
    fn contains(&self, version: &Version) -> bool {
        let boundary = &self.boundary;
        let precedence = version.cmp_precedence(boundary);
        match self.operator {
            Operator::Equal => version == boundary,
            Operator::NotEqual => version != boundary,
            Operator::GreaterThan => precedence == Ordering::Greater,
            Operator::GreaterThanOrEqual => precedence != Ordering::Less,
            Operator::LessThan => precedence == Ordering::Less,
            Operator::LessThanOrEqual => precedence != Ordering::Greater,
            // Go's uint64 arithmetic wraps, which makes `~> <max>` empty;
            // wrapping here keeps that and avoids an overflow panic.
            Operator::PessimisticPatch => {
                let upper = Version::new(boundary.major, boundary.minor.wrapping_add(1), 0);
                precedence != Ordering::Less && version.cmp_precedence(&upper) == Ordering::Less
            }
            Operator::PessimisticMinor => {
                let upper = Version::new(boundary.major.wrapping_add(1), 0, 0);
                precedence != Ordering::Less && version.cmp_precedence(&upper) == Ordering::Less
            }
        }
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let symbol = match self.operator {
            Operator::Equal => "",
            Operator::NotEqual => "!= ",
            Operator::GreaterThan => "> ",
            Operator::GreaterThanOrEqual => ">= ",
            Operator::LessThan => "< ",
            Operator::LessThanOrEqual => "<= ",
            Operator::PessimisticPatch | Operator::PessimisticMinor => "~> ",
        };
        let b = &self.boundary;
        if self.operator == Operator::PessimisticMinor {
            write!(f, "{symbol}{}.{}", b.major, b.minor)?;
        } else {
            write!(f, "{symbol}{}.{}.{}", b.major, b.minor, b.patch)?;
        }
        write_extras(f, &b.prerelease, &b.metadata)
    }
}

/// Parses one Ruby-style selection from the start of `input` (go-versions
/// `parseRubyStyle`), returning the unconsumed rest even on error because
/// the multi parser quotes the consumed part in its messages.
fn parse_selection(input: &str) -> (Result<Selection, VersionError>, &str) {
    let (raw, remain) = scan(input);
    (raw.selection(), remain)
}

const PART_NAMES: [&str; 3] = ["major", "minor", "patch"];

fn is_wildcard(num: &str) -> bool {
    matches!(num, "*" | "x" | "X")
}

/// The pieces of one selection as the scanner found them, before any
/// validation.
#[derive(Default)]
struct RawSelection<'a> {
    op: &'a str,
    sep: &'a str,
    nums: [&'a str; 3],
    num_count: usize,
    prerelease: &'a str,
    metadata: &'a str,
}

impl RawSelection<'_> {
    fn selection(&self) -> Result<Selection, VersionError> {
        let operator = match self.op {
            "" | "=" => Operator::Equal,
            "!=" => Operator::NotEqual,
            ">" => Operator::GreaterThan,
            ">=" => Operator::GreaterThanOrEqual,
            "<" => Operator::LessThan,
            "<=" => Operator::LessThanOrEqual,
            "~>" if self.num_count == 3 => Operator::PessimisticPatch,
            "~>" => Operator::PessimisticMinor,
            "=<" => return Err(VersionError::MistypedOperator("=<", "<=")),
            "=>" => return Err(VersionError::MistypedOperator("=>", ">=")),
            other => return Err(VersionError::InvalidOperator(other.to_owned())),
        };

        match self.sep {
            "" => {}
            " " if !self.op.is_empty() => {}
            sep if sep.contains('v') => return Err(VersionError::VPrefixInConstraint),
            _ if self.op.is_empty() => return Err(VersionError::LeadingSpaces),
            _ => return Err(VersionError::SpacesAfterOperator(self.op.to_owned())),
        }

        if self.num_count > 3 {
            return Err(VersionError::TooManyPortions);
        }
        for (index, num) in self.nums.iter().enumerate() {
            if is_wildcard(num) {
                return Err(VersionError::WildcardInConstraint(PART_NAMES[index]));
            }
        }
        let boundary = self.version()?;
        Ok(Selection { operator, boundary })
    }

    /// Builds the version once wildcards are ruled out; omitted parts are 0.
    fn version(&self) -> Result<Version, VersionError> {
        let number = |num: &str| -> Result<u64, VersionError> {
            if num.is_empty() {
                return Ok(0);
            }
            num.parse()
                .map_err(|_| VersionError::NumberTooLarge(num.to_owned()))
        };
        Ok(Version {
            major: number(self.nums[0])?,
            minor: number(self.nums[1])?,
            patch: number(self.nums[2])?,
            prerelease: self.prerelease.to_owned(),
            metadata: self.metadata.to_owned(),
        })
    }
}

/// Whitespace as Ragel's `space` class defines it (ASCII only, with `\v`).
fn is_scan_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

fn is_op_byte(b: u8) -> bool {
    !(b.is_ascii_alphanumeric() || is_scan_space(b) || b == b'.' || b == b'*')
}

fn is_sep_byte(b: u8) -> bool {
    is_scan_space(b) || b == b'v'
}

fn is_num_start(b: u8) -> bool {
    b.is_ascii_digit() || matches!(b, b'*' | b'x' | b'X')
}

fn is_extra_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'-'
}

fn run_end(bytes: &[u8], start: usize, accept: impl Fn(u8) -> bool) -> usize {
    start + bytes[start..].iter().take_while(|&&b| accept(b)).count()
}

/// Tokenizes `op sep nums[-pre][+meta]` from the start of `input` and
/// returns the unconsumed rest, reproducing go-versions' scanner: it stops
/// at the first byte that cannot continue the pattern, keeps whatever parts
/// were complete by then, and (its quirk) reports the operator as the
/// separator too when it stops inside the operator.
///
/// Every index used for slicing sits just before an ASCII byte or at the
/// end: only the operator run can cover non-ASCII bytes, and it covers all
/// of them (they are all operator bytes), so slices never split a character.
fn scan(input: &str) -> (RawSelection<'_>, &str) {
    let bytes = input.as_bytes();
    let mut raw = RawSelection::default();

    let op_end = run_end(bytes, 0, is_op_byte);
    let sep_end = run_end(bytes, op_end, is_sep_byte);
    raw.op = &input[..op_end];
    raw.sep = &input[op_end..sep_end];
    if !bytes.get(sep_end).is_some_and(|&b| is_num_start(b)) {
        if sep_end == op_end {
            raw.sep = raw.op;
        }
        return (raw, &input[sep_end..]);
    }

    let mut pos = sep_end;
    loop {
        let num_end = if bytes[pos].is_ascii_digit() {
            run_end(bytes, pos, |b| b.is_ascii_digit())
        } else {
            pos + 1
        };
        if let Some(slot) = raw.nums.get_mut(raw.num_count) {
            *slot = &input[pos..num_end];
        }
        raw.num_count += 1;
        pos = num_end;
        if bytes.get(pos) != Some(&b'.') {
            break;
        }
        pos += 1;
        if !bytes.get(pos).is_some_and(|&b| is_num_start(b)) {
            return (raw, &input[pos..]);
        }
    }

    // `-pre` then `+meta`, each optional; a marker with nothing after it
    // stops the scan just past the marker.
    for marker in [b'-', b'+'] {
        if bytes.get(pos) != Some(&marker) {
            continue;
        }
        let end = run_end(bytes, pos + 1, is_extra_byte);
        if end == pos + 1 {
            return (raw, &input[pos + 1..]);
        }
        let text = &input[pos + 1..end];
        if marker == b'-' {
            raw.prerelease = text;
        } else {
            raw.metadata = text;
        }
        pos = end;
    }
    (raw, &input[pos..])
}

/// Whitespace as Go's regexp `\s` defines it (no `\v`).
fn is_go_regexp_space(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\x0c' | '\r' | ' ')
}

/// One comma-separated piece as hashicorp/go-version's `parseSingle`
/// accepts it: `\s* op \s* version \s*`. The operator choice is forced,
/// since a version can only start with `v` or a digit.
fn go_version_accepts_constraint(piece: &str) -> bool {
    let piece = piece.trim_matches(is_go_regexp_space);
    let after_op = ["!=", ">=", "<=", "~>", ">", "<", "="]
        .iter()
        .find_map(|op| piece.strip_prefix(op))
        .unwrap_or(piece);
    go_version_accepts_version(after_op.trim_start_matches(is_go_regexp_space).as_bytes())
}

/// hashicorp/go-version's `NewVersion`: `v?` then dot-separated numbers
/// (each must fit an int64), an optional pre-release (with or without a
/// leading `-`) and optional `+metadata`.
fn go_version_accepts_version(bytes: &[u8]) -> bool {
    let is_part_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'~';
    // Parses `(\.[0-9A-Za-z~-]+)*` from `pos`, or fails.
    let dotted_parts = |mut pos: usize| -> Option<usize> {
        while bytes.get(pos) == Some(&b'.') {
            let end = run_end(bytes, pos + 1, is_part_byte);
            if end == pos + 1 {
                return None;
            }
            pos = end;
        }
        Some(pos)
    };

    let mut pos = usize::from(bytes.first() == Some(&b'v'));
    loop {
        let end = run_end(bytes, pos, |b| b.is_ascii_digit());
        let fits_int64 = std::str::from_utf8(&bytes[pos..end])
            .ok()
            .and_then(|digits| digits.parse::<i64>().ok())
            .is_some();
        if !fits_int64 {
            return false;
        }
        pos = end;
        let next_is_number = bytes.get(pos + 1).is_some_and(|b| b.is_ascii_digit());
        if bytes.get(pos) != Some(&b'.') || !next_is_number {
            break;
        }
        pos += 1;
    }

    if bytes
        .get(pos)
        .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'-' || b == b'~')
    {
        let Some(end) = dotted_parts(run_end(bytes, pos + 1, is_part_byte)) else {
            return false;
        };
        pos = end;
    }
    if bytes.get(pos) == Some(&b'+') {
        let end = run_end(bytes, pos + 1, is_part_byte);
        if end == pos + 1 {
            return false;
        }
        let Some(end) = dotted_parts(end) else {
            return false;
        };
        pos = end;
    }
    pos == bytes.len()
}

/// Why a version or constraint string was rejected; the texts are
/// go-versions' own, which Terraform shows verbatim.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("empty specification")]
    EmptySpecification,
    #[error("can't use constraint operator {}; an exact version is required", go_quote(.0))]
    OperatorInExactVersion(String),
    #[error("a \"v\" prefix should not be used")]
    VPrefixInExactVersion,
    #[error("extraneous spaces at start of specification")]
    LeadingSpaces,
    #[error("invalid sequence {} at start of specification", go_quote(.0))]
    InvalidLeadingSequence(String),
    #[error("extraneous spaces at end of specification")]
    TrailingSpaces,
    #[error("can't specify multiple versions; a single exact version is required")]
    MultipleExactVersions,
    #[error("can't specify version range; a single exact version is required")]
    RangeInExactVersion,
    #[error(
        "invalid specification; required format is three positive integers separated by periods"
    )]
    NotAVersion,
    #[error("invalid characters {}", go_quote(.0))]
    InvalidCharacters(String),
    #[error("too many numbered portions; only three are allowed (major, minor, patch)")]
    TooManyPortions,
    #[error("can't use wildcard for {0} number; an exact version is required")]
    WildcardInExactVersion(&'static str),
    /// go-versions panics on numbers beyond 64 bits; this text is ours.
    #[error("version number {} is too large", go_quote(.0))]
    NumberTooLarge(String),
    #[error("invalid constraint operator {}; did you mean {}?", go_quote(.0), go_quote(.1))]
    MistypedOperator(&'static str, &'static str),
    #[error("invalid constraint operator {}", go_quote(.0))]
    InvalidOperator(String),
    #[error("only one space is expected after the operator {}", go_quote(.0))]
    SpacesAfterOperator(String),
    #[error("a \"v\" prefix should not be used when specifying versions")]
    VPrefixInConstraint,
    #[error("can't use wildcard for {0} number; omit segments that should be unconstrained")]
    WildcardInConstraint(&'static str),
    #[error("missing comma after {}", go_quote(.0))]
    MissingComma(String),
    #[error("invalid specification {}: {reason}", go_quote(item))]
    InvalidSpecification {
        item: String,
        reason: Box<VersionError>,
    },
}

/// A configuration constraint string Terraform would reject, as the
/// diagnostic summary and detail it would show.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{summary}: {detail}")]
pub struct ConstraintSyntaxError {
    pub summary: String,
    pub detail: String,
}

impl From<ConstraintSyntaxError> for Diagnostic {
    fn from(err: ConstraintSyntaxError) -> Diagnostic {
        Diagnostic::error(err.summary, err.detail)
    }
}

#[cfg(test)]
mod tests {
    //! Vectors come from Terraform's
    //! `internal/getproviders/providerreqs/version_test.go` and
    //! `internal/depsfile/locks_file_test.go` and from go-versions'
    //! `versions/parse_test.go`, `versions/set_test.go` and
    //! `versions/constraints/ruby_style_test.go`.

    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    fn constraints(text: &str) -> VersionConstraints {
        VersionConstraints::parse(text).unwrap()
    }

    fn parse_error(text: &str) -> String {
        VersionConstraints::parse(text).unwrap_err().to_string()
    }

    fn version_error(text: &str) -> String {
        Version::parse(text).unwrap_err().to_string()
    }

    /// go-versions' single-selection `ParseRubyStyle`, which Terraform does
    /// not call but whose upstream test table exercises the selection parser
    /// most thoroughly: it adds its own handling of leftover input.
    fn parse_ruby_style(input: &str) -> Result<Selection, String> {
        if input.trim().is_empty() {
            return Err("empty specification".to_owned());
        }
        let (result, remain) = parse_selection(input);
        let selection = result.map_err(|err| err.to_string())?;
        if remain.is_empty() {
            return Ok(selection);
        }
        let rest = remain.trim();
        Err(if rest.is_empty() {
            "extraneous spaces at end of specification".to_owned()
        } else if rest.starts_with('v') {
            "a \"v\" prefix should not be used".to_owned()
        } else if rest.starts_with("||") || rest.starts_with(',') {
            "only one constraint may be specified".to_owned()
        } else if rest.starts_with('-') {
            "range constraints are not supported".to_owned()
        } else {
            format!("invalid characters {}", go_quote(rest))
        })
    }

    #[test]
    fn canonical_strings() {
        let cases = [
            ("1.2.3", "1.2.3"),
            ("1.2.3-beta", "1.2.3-beta"),
            ("1.2.3+foo.bar", "1.2.3+foo.bar"),
            ("1.2.3-beta+foo.bar", "1.2.3-beta+foo.bar"),
            (">= 3", ">= 3.0.0"),
            ("~> 3", "~> 3.0"),
            ("~> 3.0", "~> 3.0"),
            ("~> 3.0.0", "~> 3.0.0"),
            (
                "> 1.0.0, < 1.0.0, >= 1.0.0, <= 1.0.0, != 1.0.0",
                "> 1.0.0, >= 1.0.0, <= 1.0.0, < 1.0.0, != 1.0.0",
            ),
            (">= 3.0, < 4.0", ">= 3.0.0, < 4.0.0"),
            (">= 1.2.3, 1.2.3, ~> 1.2, 1.2.3", "~> 1.2, >= 1.2.3, 1.2.3"),
            (">= 2.68, >= 2.68.0", ">= 2.68.0"),
            (
                "< 1.2.3, <= 1.2.3, != 1.2.3, 1.2.3+local.2, 1.2.3+local.1, = 1.2.4, = 1.2.3, \
                 > 2, > 1.2.3, >= 1.2.3, ~> 1.2.3, ~> 1.2",
                "~> 1.2, > 1.2.3, >= 1.2.3, 1.2.3, ~> 1.2.3, <= 1.2.3, < 1.2.3, != 1.2.3, \
                 1.2.3+local.1, 1.2.3+local.2, 1.2.4, > 2.0.0",
            ),
            ("~> 1.2, >= 1.2, 1.2.4", ">= 1.2.0, ~> 1.2, 1.2.4"),
            (">= 2, >= 1.2, < 1.3", ">= 1.2.0, < 1.3.0, >= 2.0.0"),
        ];
        for (input, want) in cases {
            assert_eq!(constraints(input).to_string(), want, "input {input:?}");
        }
    }

    #[test]
    fn lock_file_save_vector() {
        assert_eq!(constraints("~> 1").to_string(), "~> 1.0");
        assert_eq!(constraints("1.2").to_string(), "1.2.0");
        assert_eq!(constraints(">= 1.0.0").to_string(), ">= 1.0.0");
    }

    #[test]
    fn canonical_string_of_nothing_is_empty() {
        assert_eq!(VersionConstraints::empty().to_string(), "");
        assert_eq!(constraints("").to_string(), "");
        assert_eq!(constraints("  ").to_string(), "");
    }

    #[test]
    fn canonical_string_keeps_prerelease_on_minor_pessimistic() {
        assert_eq!(constraints("~> 1.2-beta").to_string(), "~> 1.2-beta");
        assert_eq!(constraints(">= 1-rc.1+b").to_string(), ">= 1.0.0-rc.1+b");
    }

    #[test]
    fn extend_concatenates_requirements_from_several_modules() {
        let mut merged = constraints("~> 1.0");
        merged.extend(&constraints(">= 1.2"));
        merged.extend(&VersionConstraints::empty());
        merged.extend(&constraints("~> 1.0"));
        assert_eq!(merged.to_string(), "~> 1.0, >= 1.2.0");
        assert!(merged.allows(&v("1.5.0")));
        assert!(!merged.allows(&v("1.1.0")));
        assert!(!merged.allows(&v("2.0.0")));
        assert!(!merged.is_empty());
    }

    /// go-versions `TestMeetingConstraintsRuby` plus degenerate cases
    /// (contradictory constraints give an empty set), checked by membership
    /// of probe versions.
    #[test]
    fn meeting_constraints_ruby() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "1.0.0",
                &["1.0.0"],
                &["1.0.1", "0.9.9", "1.0.0+local", "1.0.0-beta"],
            ),
            ("= 1.0.0", &["1.0.0"], &["1.0.1", "0.9.9"]),
            (
                "!= 1.0.0",
                &["0.9.0", "1.0.1", "1.0.0+local"],
                &["1.0.0", "1.0.1-beta"],
            ),
            (
                "> 1.0.0",
                &["1.0.1", "2.0.0"],
                &["1.0.0", "1.0.0+x", "0.1.0"],
            ),
            ("> 1.0", &["1.0.1"], &["1.0.0"]),
            ("< 1.0.0", &["0.9.9", "0.0.1"], &["1.0.0", "1.0.0-beta"]),
            (
                ">= 1.0.0",
                &["1.0.0", "1.0.1"],
                &["0.9.9", "1.0.0-beta1", "2.0.0-beta1"],
            ),
            ("<= 1.0.0", &["1.0.0", "0.1.0"], &["1.0.1"]),
            ("~> 1.2.3", &["1.2.3", "1.2.5"], &["1.2.2", "1.3.0"]),
            (
                "~> 1.2",
                &["1.2.0", "1.2.3", "1.3.0", "1.99.0"],
                &["1.1.9", "2.0.0"],
            ),
            ("~> 1", &["1.0.0", "1.2.3", "1.3.0"], &["0.9.0", "2.0.0"]),
            (">= 1, < 2", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
            ("1.0.0, 2.0.0", &[], &["1.0.0", "2.0.0"]),
            ("1.0.0, 1.0.0", &["1.0.0"], &["1.0.1"]),
            ("1.0.0, != 1.0.0", &[], &["1.0.0", "1.0.1"]),
            ("1.0.0-beta1, != 1.0.0-beta1", &[], &["1.0.0-beta1"]),
            ("!= 2.0.0-beta1, 2.0.0-beta1", &[], &["2.0.0-beta1"]),
        ];
        for (input, inside, outside) in cases {
            let set = constraints(input);
            for version in *inside {
                assert!(set.allows(&v(version)), "{input:?} should allow {version}");
            }
            for version in *outside {
                assert!(
                    !set.allows(&v(version)),
                    "{input:?} should not allow {version}"
                );
            }
        }
    }

    #[test]
    fn prereleases_only_when_requested_exactly() {
        let beta1 = v("2.0.0-beta1");
        assert!(!constraints(">= 1.0").allows(&beta1));
        assert!(!constraints(">= 2.0.0-beta1").allows(&v("2.0.0-beta2")));
        assert!(!constraints(">= 2.0.0-beta1").allows(&beta1));
        assert!(constraints(">= 2.0.0-beta1").allows(&v("2.0.0")));
        assert!(constraints("2.0.0-beta1").allows(&beta1));
        assert!(constraints("= 2.0.0-beta1").allows(&beta1));
        assert!(constraints("2.0-beta1").allows(&beta1));
        assert!(constraints("2.0.0-beta1, >= 1.0").allows(&beta1));
        assert!(!constraints("2.0.0-beta1, < 2.0.0-alpha").allows(&beta1));
        assert!(!constraints("2.0.0-beta1").allows(&v("2.0.0-beta1+meta")));
        assert!(!constraints("!= 1.0.0").allows(&beta1));
        assert!(!constraints("~> 2.0.0-beta1").allows(&beta1));
        assert!(!VersionConstraints::empty().allows(&v("1.0.0-beta1")));
        assert!(VersionConstraints::empty().allows(&v("1.0.0")));
    }

    /// go-versions' zero version means "unspecified": only the unconstrained
    /// set `All` holds it, and Terraform never asks `All` (its acceptable
    /// set is always intersected with the released versions).
    #[test]
    fn zero_version_is_never_acceptable() {
        let zero = Version::new(0, 0, 0);
        assert!(!VersionConstraints::empty().allows(&zero));
        assert!(!constraints(">= 0.0.0").allows(&zero));
        assert!(!constraints("!= 1.0.0").allows(&zero));
        assert!(!constraints("0.0.0").allows(&zero));
        assert!(!VersionConstraints::only(&zero).allows(&zero));
        assert!(constraints(">= 0.0.0").allows(&v("0.0.1")));
        assert!(constraints("0.0.0+local").allows(&v("0.0.0+local")));
        assert!(constraints("0.0.0-beta").allows(&v("0.0.0-beta")));
    }

    #[test]
    fn only_admits_exactly_the_locked_version() {
        let locked = v("1.2.3-beta.1+local");
        let set = VersionConstraints::only(&locked);
        assert!(set.allows(&locked));
        assert!(!set.allows(&v("1.2.3-beta.1")));
        assert!(!set.allows(&v("1.2.3")));
        assert_eq!(set.to_string(), "1.2.3-beta.1+local");
        assert!(VersionConstraints::only(&v("1.0.0")).allows(&v("1.0.0")));
    }

    #[test]
    fn newest_allowed_picks_highest_acceptable() {
        let available: Vec<Version> = ["1.0.0", "2.1.0", "1.5.0", "3.0.0-beta1", "2.0.0"]
            .iter()
            .map(|s| v(s))
            .collect();
        let newest = |c: &str| {
            constraints(c)
                .newest_allowed(&available)
                .map(Version::to_string)
        };
        assert_eq!(newest("").as_deref(), Some("2.1.0"));
        assert_eq!(newest("~> 1.0").as_deref(), Some("1.5.0"));
        assert_eq!(newest("< 2.0.0, != 1.5.0").as_deref(), Some("1.0.0"));
        assert_eq!(newest("3.0.0-beta1").as_deref(), Some("3.0.0-beta1"));
        assert_eq!(newest("> 3.0.0"), None);
        assert_eq!(VersionConstraints::empty().newest_allowed(&[]), None);
    }

    #[test]
    fn newest_allowed_prefers_later_entry_among_metadata_twins() {
        let available = [v("1.0.0+b"), v("1.0.0+a"), v("0.9.0")];
        let newest = VersionConstraints::empty().newest_allowed(&available);
        assert_eq!(newest, Some(&available[1]));
    }

    #[test]
    fn single_selection_parse_table() {
        let ok = [
            ("1", "1.0.0"),
            ("1.1", "1.1.0"),
            ("1.1.1", "1.1.1"),
            ("1.0.0-beta2", "1.0.0-beta2"),
            ("1.0-beta2", "1.0.0-beta2"),
            ("1.0.0-beta.2", "1.0.0-beta.2"),
            ("1.0.0+foo", "1.0.0+foo"),
            ("1.0.0+foo.bar", "1.0.0+foo.bar"),
            ("1.0.0-beta1+foo.bar", "1.0.0-beta1+foo.bar"),
            ("= 1.1.1", "1.1.1"),
            ("> 1.1.1", "> 1.1.1"),
            (">1.1.1", "> 1.1.1"),
            (">= 1.1.1", ">= 1.1.1"),
            (">=1.1.1", ">= 1.1.1"),
            ("< 1.1.1", "< 1.1.1"),
            ("<= 1.1.1", "<= 1.1.1"),
            ("~> 1.1.1", "~> 1.1.1"),
            ("~> 1.1", "~> 1.1"),
            ("~> 1", "~> 1.0"),
            ("!= 1.1.1", "!= 1.1.1"),
        ];
        for (input, want) in ok {
            let selection = parse_ruby_style(input).unwrap();
            assert_eq!(selection.to_string(), want, "input {input:?}");
        }
        let operator = |input| parse_ruby_style(input).unwrap().operator;
        assert_eq!(operator("~> 1.1.1"), Operator::PessimisticPatch);
        assert_eq!(operator("~> 1.1"), Operator::PessimisticMinor);
        assert_eq!(operator("~> 1"), Operator::PessimisticMinor);
        assert_eq!(operator("1"), Operator::Equal);

        let errors = [
            ("", "empty specification"),
            (
                "1.0.0.0",
                "too many numbered portions; only three are allowed (major, minor, patch)",
            ),
            (
                "v1.0.0",
                "a \"v\" prefix should not be used when specifying versions",
            ),
            (
                ">= v1.0.0",
                "a \"v\" prefix should not be used when specifying versions",
            ),
            (
                "=> 1.1.1",
                "invalid constraint operator \"=>\"; did you mean \">=\"?",
            ),
            (
                "=>1.1.1",
                "invalid constraint operator \"=>\"; did you mean \">=\"?",
            ),
            (
                "=< 1.1.1",
                "invalid constraint operator \"=<\"; did you mean \"<=\"?",
            ),
            (
                "=  1.1.1",
                "only one space is expected after the operator \"=\"",
            ),
            ("garbage", "invalid characters \"garbage\""),
            ("& 1.1.0", "invalid constraint operator \"&\""),
            (
                "1.*.*",
                "can't use wildcard for minor number; omit segments that should be unconstrained",
            ),
            (
                "1.0.x",
                "can't use wildcard for patch number; omit segments that should be unconstrained",
            ),
            ("1.0 || 2.0", "only one constraint may be specified"),
            ("1.0.0, 2.0.0", "only one constraint may be specified"),
            ("1.0.0 - 2.0.0", "range constraints are not supported"),
        ];
        for (input, want) in errors {
            assert_eq!(
                parse_ruby_style(input).unwrap_err(),
                want,
                "input {input:?}"
            );
        }
    }

    #[test]
    fn multi_parse_table() {
        assert!(constraints("").is_empty());
        assert_eq!(constraints("1.1.1").to_string(), "1.1.1");
        assert_eq!(constraints(">= 1.0, < 2").to_string(), ">= 1.0.0, < 2.0.0");
        assert_eq!(
            parse_error("~> v1.1.1"),
            "invalid specification \"~> v1.1.1\": a \"v\" prefix should not be used when \
             specifying versions"
        );
        assert_eq!(
            parse_error(">= 1.0, < v2.0"),
            "invalid specification \"< v2.0\": a \"v\" prefix should not be used when \
             specifying versions"
        );
        assert_eq!(parse_error(">= 1.0 < 2"), "missing comma after \">= 1.0\"");
    }

    #[test]
    fn multi_parse_edges_follow_go_versions() {
        assert_eq!(
            parse_error("=> 1.0"),
            "invalid specification \"=> 1.0\": invalid constraint operator \"=>\"; did you mean \">=\"?"
        );
        assert_eq!(
            parse_error(">=  1.0"),
            "invalid specification \">=  1.0\": only one space is expected after the operator \">=\""
        );
        assert_eq!(parse_error("garbage"), "missing comma after \"\"");
        assert_eq!(
            parse_error("1.0 v2"),
            "a \"v\" prefix should not be used when specifying versions"
        );
        assert_eq!(
            parse_error("1.0,,2.0"),
            "invalid specification \",2.0\": invalid constraint operator \",\""
        );
        assert_eq!(
            parse_error(">="),
            "invalid specification \">=\": only one space is expected after the operator \">=\""
        );
        assert_eq!(
            parse_error("1.0.0.0"),
            "invalid specification \"1.0.0.0\": too many numbered portions; only three are allowed (major, minor, patch)"
        );
        assert_eq!(parse_error("1.0beta"), "missing comma after \"1.0\"");
        assert_eq!(
            constraints(" >= 1.0 ,< 2.0, ").to_string(),
            ">= 1.0.0, < 2.0.0"
        );
        assert_eq!(constraints(">=1.0,<2.0").to_string(), ">= 1.0.0, < 2.0.0");
        assert_eq!(constraints("1.0.0-").to_string(), "1.0.0");
        assert_eq!(constraints("01.002.0003").to_string(), "1.2.3");
    }

    #[test]
    fn config_parse_runs_both_parsers() {
        let generic = "This string does not use correct version constraint syntax.";
        for input in [
            "=> 1.0",
            "1.0.x",
            "1.0 || 2.0",
            "",
            "1.0,",
            "~> 1.0 , garbage",
        ] {
            let err = VersionConstraints::parse_config(input).unwrap_err();
            assert_eq!(err.summary, "Invalid version constraint", "input {input:?}");
            assert_eq!(err.detail, generic, "input {input:?}");
        }
        let cases = [
            (
                ">=  1.0",
                "Incorrect version constraint syntax: invalid specification \">=  1.0\": only \
                 one space is expected after the operator \">=\".",
            ),
            (
                "v1.0",
                "Incorrect version constraint syntax: invalid specification \"v1.0\": a \"v\" \
                 prefix should not be used when specifying versions.",
            ),
            (
                "1.0.0.0",
                "Incorrect version constraint syntax: invalid specification \"1.0.0.0\": too \
                 many numbered portions; only three are allowed (major, minor, patch).",
            ),
        ];
        for (input, detail) in cases {
            let err = VersionConstraints::parse_config(input).unwrap_err();
            assert_eq!(err.summary, "Invalid version constraint");
            assert_eq!(err.detail, detail);
        }
        let accepted = VersionConstraints::parse_config(" >= 1.0, < 2.0 ").unwrap();
        assert_eq!(accepted.to_string(), ">= 1.0.0, < 2.0.0");
        assert_eq!(
            VersionConstraints::parse_config("~>1.2")
                .unwrap()
                .to_string(),
            "~> 1.2"
        );
        assert_eq!(
            VersionConstraints::parse_config("2").unwrap().to_string(),
            "2.0.0"
        );
    }

    #[test]
    fn config_parse_error_becomes_diagnostic() {
        let err = VersionConstraints::parse_config("=> 1").unwrap_err();
        let diagnostic = Diagnostic::from(err);
        assert!(diagnostic.is_error());
        assert_eq!(diagnostic.summary, "Invalid version constraint");
    }

    #[test]
    fn version_parse_accepts_terraform_forms() {
        let cases = [
            ("1", "1.0.0"),
            ("1.2", "1.2.0"),
            ("1.2.3", "1.2.3"),
            ("1.02", "1.2.0"),
            ("1.0.0-beta.1+abc.def", "1.0.0-beta.1+abc.def"),
            ("1-rc1", "1.0.0-rc1"),
            ("1.0.0-01", "1.0.0-01"),
            ("18446744073709551615.0.0", "18446744073709551615.0.0"),
        ];
        for (input, want) in cases {
            assert_eq!(v(input).to_string(), want, "input {input:?}");
        }
        assert_eq!(v("1.2"), Version::new(1, 2, 0));
        assert!(v("1.0.0-beta").is_prerelease());
        assert!(!v("1.0.0+beta").is_prerelease());
    }

    #[test]
    fn version_parse_errors() {
        let cases = [
            ("", "empty specification"),
            ("  ", "empty specification"),
            ("v1.0.0", "a \"v\" prefix should not be used"),
            (
                ">= 1.0",
                "can't use constraint operator \">=\"; an exact version is required",
            ),
            (
                "~>1.0",
                "can't use constraint operator \"~>\"; an exact version is required",
            ),
            ("=1.0.0", "invalid sequence \"=\" at start of specification"),
            (" 1.0.0", "extraneous spaces at start of specification"),
            ("1.0.0 ", "extraneous spaces at end of specification"),
            (
                "1.0.0, 2.0.0",
                "can't specify multiple versions; a single exact version is required",
            ),
            (
                "1.0.0 - 2.0.0",
                "can't specify version range; a single exact version is required",
            ),
            (
                "garbage",
                "invalid specification; required format is three positive integers separated \
                 by periods",
            ),
            ("1.0.0_x", "invalid characters \"_x\""),
            (
                "1.0.0.0",
                "too many numbered portions; only three are allowed (major, minor, patch)",
            ),
            (
                "1.*",
                "can't use wildcard for minor number; an exact version is required",
            ),
            (
                "x",
                "can't use wildcard for major number; an exact version is required",
            ),
            (
                "99999999999999999999",
                "version number \"99999999999999999999\" is too large",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(version_error(input), want, "input {input:?}");
        }
    }

    #[test]
    fn precedence_order() {
        let ascending = [
            "0.0.1",
            "1.0.0-1",
            "1.0.0-01",
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta.2",
            "1.0.0-beta.10",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.0+a",
            "1.0.0+b",
            "1.2.0",
            "1.10.0",
            "2.0.0",
        ];
        for pair in ascending.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
    }

    #[test]
    fn shorter_prerelease_sorts_first_once_one_side_ends() {
        assert_eq!(compare_extra("b", "a.1"), Ordering::Less);
        assert_eq!(compare_extra("a.1", "b"), Ordering::Greater);
        assert_eq!(compare_extra("local.2", "local.10"), Ordering::Less);
        assert_eq!(compare_extra("", "x"), Ordering::Less);
        assert_eq!(compare_extra("x.y", "x.y"), Ordering::Equal);
    }

    #[test]
    fn equality_includes_metadata_but_precedence_does_not() {
        assert_ne!(v("1.0.0+local"), v("1.0.0"));
        assert_eq!(
            v("1.0.0+local").cmp_precedence(&v("1.0.0")),
            Ordering::Equal
        );
        assert_eq!(v("1.02.0"), v("1.2.0"));
    }

    #[test]
    fn only_an_exact_selection_that_holds_pins_a_version() {
        let pinned = |text: &str| {
            VersionConstraints::parse(text)
                .unwrap()
                .pinned()
                .map(ToString::to_string)
        };
        assert_eq!(pinned("1.2.0"), Some("1.2.0".to_owned()));
        assert_eq!(pinned(">= 1.0, = 1.2.0"), Some("1.2.0".to_owned()));
        assert_eq!(pinned("1.2.0-beta1"), Some("1.2.0-beta1".to_owned()));
        assert_eq!(
            pinned("1.2.0, < 1.1"),
            None,
            "contradictory: nothing to pin"
        );
        assert_eq!(pinned("~> 1.2.0"), None);
        assert_eq!(pinned(""), None);
    }

    #[test]
    fn bounds_contain_pre_releases_that_allows_refuses() {
        let range = constraints(">= 5.0.0, < 6.0.0");
        assert!(range.bounds_contain(&v("5.1.0-beta1")));
        assert!(!range.allows(&v("5.1.0-beta1")));
        assert!(range.bounds_contain(&v("5.1.0")) && range.allows(&v("5.1.0")));
        assert!(!range.bounds_contain(&v("6.0.0")));
        assert!(!range.bounds_contain(&v("4.9.9-rc1")));
        assert!(VersionConstraints::empty().bounds_contain(&v("0.1.0-alpha")));
    }
}
