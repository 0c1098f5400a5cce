//! Provider addresses, service hostnames and platforms.
//!
//! Every path on disk, every lock-file label and every registry URL is derived
//! from these values, so they are normalized exactly the way Terraform does it
//! (svchost `ForComparison` for hostnames, registry-address `ParseProviderPart`
//! for namespace and type). Two spellings that Terraform treats as the same
//! provider must compare equal here, and the same inputs must be rejected with
//! the same words.

pub mod pattern;

use std::fmt;

use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::Engine;
use crate::go_quote::go_quote;

use idna::uts46::{AsciiDenyList, DnsLength, Hyphens, Uts46};

const BUILTIN_HOST: &str = "terraform.io";
const BUILTIN_NAMESPACE: &str = "builtin";
const LEGACY_NAMESPACE: &str = "-";
const IMPLIED_NAMESPACE: &str = "hashicorp";

/// STD3 without the underscore: Terraform ≥ 1.16 accepts `_` in namespaces
/// because Terraform Cloud organization names (used as private registry
/// namespaces) may contain it, while every other STD3 restriction still holds.
const NAMESPACE_DENY_LIST: AsciiDenyList =
    AsciiDenyList::new(true, "!\"#$%&'()*+,/:;<=>?@[\\]^`{|}~");

const PART_CHARSET_ERROR: &str =
    "must contain only letters, digits, and dashes, and may not use leading or trailing dashes";
const SOURCE_FORMAT_DETAIL: &str =
    r#"The "source" attribute must be in the format "[hostname/][namespace/]name""#;

/// An address or hostname that Terraform would refuse.
///
/// Errors that Terraform reports as a diagnostic carry its summary; the rest
/// are bare messages that the caller embeds in its own diagnostic. `Display`
/// renders what Go's `err.Error()` would (`summary: detail`), because several
/// Terraform messages quote that text verbatim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrError {
    summary: Option<&'static str>,
    detail: String,
}

impl AddrError {
    pub(crate) fn message(detail: impl Into<String>) -> Self {
        AddrError {
            summary: None,
            detail: detail.into(),
        }
    }

    pub(crate) fn diagnostic(summary: &'static str, detail: impl Into<String>) -> Self {
        AddrError {
            summary: Some(summary),
            detail: detail.into(),
        }
    }

    pub fn summary(&self) -> Option<&str> {
        self.summary
    }

    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for AddrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.summary {
            Some(summary) => write!(f, "{summary}: {}", self.detail),
            None => f.write_str(&self.detail),
        }
    }
}

impl std::error::Error for AddrError {}

/// A service hostname in its comparison form: lower-case ASCII (punycode for
/// international names), followed by `:port` unless the port is the default.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Hostname(String);

impl Hostname {
    /// Normalizes a user-given hostname the way svchost `ForComparison` does.
    pub fn parse(given: &str) -> Result<Hostname, AddrError> {
        let (host, port_portion) = split_port(given);
        let port = match normalize_port(port_portion) {
            Ok(port) => port,
            Err(err) => {
                // The colon after a URL scheme looks like a port separator;
                // saying so is more useful than complaining about the port.
                let lower = host.to_lowercase();
                if lower == "https" || lower == "http" {
                    return Err(AddrError::message(
                        "need just a hostname and optional port number, not a full URL",
                    ));
                }
                return Err(err);
            }
        };
        if host.is_empty() {
            return Err(AddrError::message("empty string is not a valid hostname"));
        }
        for label in go_labels(host) {
            if label.is_empty() {
                return Err(AddrError::message(
                    "hostname contains empty label (two consecutive periods)",
                ));
            }
            // Configuration must use the readable form, so that what users
            // write matches what they see in the UI.
            if label.starts_with("xn--") {
                return Err(AddrError::message(format!(
                    "hostname label {} specified in punycode format; service hostnames must be given in unicode",
                    go_quote(label)
                )));
            }
        }
        match lookup_to_ascii(host) {
            Some(ascii) => Ok(Hostname(ascii + &port)),
            None => Err(AddrError::message(idna_error_message(host))),
        }
    }

    /// The registry of addresses that name no host: the selected
    /// [`Engine`]'s, `registry.terraform.io` or `registry.opentofu.org`.
    pub fn default_registry() -> Hostname {
        Hostname(Engine::current().default_registry_host().to_owned())
    }

    fn builtin() -> Hostname {
        Hostname(BUILTIN_HOST.to_owned())
    }

    pub fn as_ascii(&self) -> &str {
        &self.0
    }

    /// The Unicode form, used in directory names, lock-file labels and UI text.
    pub fn for_display(&self) -> String {
        let (host, port) = split_port(&self.0);
        match lookup_to_unicode(host) {
            Some(unicode) => unicode + port,
            // Unreachable for values built by `parse`; showing the stored
            // form beats panicking.
            None => self.0.clone(),
        }
    }
}

impl fmt::Display for Hostname {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// svchost's lenient `ForDisplay` for a hostname that has not been validated:
/// the best readable form, or the input itself when it cannot be normalized.
///
/// `TF_TOKEN_*` variable names go through this before `Hostname::parse`, which
/// is what lets a punycode or upper-case spelling in the variable name match.
pub fn hostname_for_display(given: &str) -> String {
    let (host, port_portion) = split_port(given);
    let port = normalize_port(port_portion).unwrap_or_else(|_| port_portion.to_owned());
    match lookup_to_ascii(host).and_then(|ascii| lookup_to_unicode(&ascii)) {
        Some(display) => display + &port,
        None => format!("{host}{port}"),
    }
}

/// A provider's fully-qualified address.
///
/// Field order gives the derived `Ord` Terraform's `LessThan`: ASCII hostname,
/// then namespace, then type, each byte-wise.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ProviderAddr {
    pub hostname: Hostname,
    pub namespace: String,
    pub type_name: String,
}

impl ProviderAddr {
    /// Builds an address from parts the caller has already normalized.
    pub fn new(
        hostname: Hostname,
        namespace: impl Into<String>,
        type_name: impl Into<String>,
    ) -> Self {
        ProviderAddr {
            hostname,
            namespace: namespace.into(),
            type_name: type_name.into(),
        }
    }

    /// Parses a `[hostname/][namespace/]type` source string as Terraform's
    /// `addrs.ParseProviderSourceString` does, with a bare type implying the
    /// `hashicorp` namespace on the default registry.
    pub fn parse(source: &str) -> Result<Self, AddrError> {
        let parts: Vec<&str> = source.split('/').collect();
        if parts.len() > 3 || parts.iter().any(|part| part.is_empty()) {
            return Err(AddrError::diagnostic(
                "Invalid provider source string",
                SOURCE_FORMAT_DETAIL,
            ));
        }
        let given_type = parts[parts.len() - 1];
        // The stray `"` before the end of these details is in Terraform's
        // format strings; users and tests see it, so it stays.
        let type_name = parse_provider_part(given_type).map_err(|err| {
            AddrError::diagnostic(
                "Invalid provider type",
                format!(
                    "Invalid provider type {} in source {}: {err}\"",
                    go_quote(given_type),
                    go_quote(source)
                ),
            )
        })?;
        if parts.len() == 1 {
            // Terraform returns before the `terraform-` prefix check here.
            return Ok(ProviderAddr::new(
                Hostname::default_registry(),
                IMPLIED_NAMESPACE,
                type_name,
            ));
        }

        let given_namespace = parts[parts.len() - 2];
        let namespace = if given_namespace == LEGACY_NAMESPACE {
            LEGACY_NAMESPACE.to_owned()
        } else {
            // Terraform quotes its (empty) failed result here rather than the
            // input, so the detail always reads `namespace ""`.
            parse_provider_namespace(given_namespace).map_err(|err| {
                AddrError::diagnostic(
                    "Invalid provider namespace",
                    format!(
                        "Invalid provider namespace \"\" in source {}: {err}\"",
                        go_quote(source)
                    ),
                )
            })?
        };

        let hostname = if parts.len() == 3 {
            Hostname::parse(parts[0]).map_err(|err| {
                AddrError::diagnostic(
                    "Invalid provider source hostname",
                    format!(
                        "Invalid provider source hostname namespace \"\" in source {}: {err}\"",
                        go_quote(source)
                    ),
                )
            })?
        } else {
            Hostname::default_registry()
        };

        let addr = ProviderAddr::new(hostname, namespace, type_name);
        if addr.namespace == LEGACY_NAMESPACE && addr.hostname != Hostname::default_registry() {
            // Only the default registry knows which real provider a legacy
            // name stands for.
            return Err(AddrError::diagnostic(
                "Invalid provider namespace",
                format!(
                    "The legacy provider namespace \"-\" can be used only with hostname {}.",
                    Hostname::default_registry()
                ),
            ));
        }
        addr.check_type_prefix()?;
        Ok(addr)
    }

    /// Rejects the `terraform-` type prefix, pointing users who pasted a
    /// repository or executable name (`terraform-provider-x`) at the fix.
    fn check_type_prefix(&self) -> Result<(), AddrError> {
        const REDUNDANT_PREFIX: &str = "terraform-";
        const USER_ERROR_PREFIX: &str = "terraform-provider-";
        if !self.type_name.starts_with(REDUNDANT_PREFIX) {
            return Ok(());
        }
        if let Some(suggested_type) = self.type_name.strip_prefix(USER_ERROR_PREFIX)
            && parse_provider_part(suggested_type).is_ok()
        {
            let suggested = ProviderAddr::new(
                self.hostname.clone(),
                self.namespace.clone(),
                suggested_type,
            );
            return Err(AddrError::diagnostic(
                "Invalid provider type",
                format!(
                    "Provider source {} has a type with the prefix {}, which isn't valid. Although that prefix is often used in the names of version control repositories for Terraform providers, provider source strings should not include it.\n\nDid you mean {}?",
                    go_quote(&self.for_display()),
                    go_quote(USER_ERROR_PREFIX),
                    go_quote(&suggested.for_display())
                ),
            ));
        }
        Err(AddrError::diagnostic(
            "Invalid provider type",
            format!(
                "Provider source {} has a type with the prefix {}, which isn't allowed because it would be redundant to name a Terraform provider with that prefix. If you are the author of this provider, rename it to not include the prefix.",
                go_quote(&self.to_string()),
                go_quote(REDUNDANT_PREFIX)
            ),
        ))
    }

    /// The provider a configuration means by a bare local name (no
    /// `required_providers` source): `terraform` is the built-in provider,
    /// anything else an official `hashicorp/` one.
    pub fn implied(local_name: &str) -> Result<Self, AddrError> {
        let type_name = parse_provider_part(local_name)?;
        if type_name == "terraform" {
            return Ok(ProviderAddr::new(
                Hostname::builtin(),
                BUILTIN_NAMESPACE,
                type_name,
            ));
        }
        Ok(ProviderAddr::new(
            Hostname::default_registry(),
            IMPLIED_NAMESPACE,
            type_name,
        ))
    }

    /// Built-in providers ship inside Terraform and are never installed.
    pub fn is_builtin(&self) -> bool {
        self.hostname.as_ascii() == BUILTIN_HOST && self.namespace == BUILTIN_NAMESPACE
    }

    /// Legacy (0.12-era, namespace `-`) addresses must be upgraded before use.
    pub fn is_legacy(&self) -> bool {
        self.hostname == Hostname::default_registry() && self.namespace == LEGACY_NAMESPACE
    }

    /// The short form used in most UI lines: the default registry is implied.
    pub fn for_display(&self) -> String {
        if self.hostname == Hostname::default_registry() {
            format!("{}/{}", self.namespace, self.type_name)
        } else {
            self.to_string()
        }
    }
}

impl fmt::Display for ProviderAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.hostname.for_display(),
            self.namespace,
            self.type_name
        )
    }
}

/// Normalizes a provider type (or, before TF 1.16, namespace) like a single
/// DNS label: case-folded, NFC, letters/digits/dashes only. Names end up in
/// directory names on case-insensitive filesystems, so `AWS` must be `aws`.
pub fn parse_provider_part(given: &str) -> Result<String, AddrError> {
    normalize_part(given, AsciiDenyList::STD3)
}

/// `parse_provider_part` with `_` also allowed, as Terraform ≥ 1.16 does for
/// namespaces (e.g. `example.com/my_org/foo`). Types still reject `_`, because
/// resource type names use it to separate the provider prefix.
pub fn parse_provider_namespace(given: &str) -> Result<String, AddrError> {
    normalize_part(given, NAMESPACE_DENY_LIST)
}

fn normalize_part(given: &str, deny_list: AsciiDenyList) -> Result<String, AddrError> {
    if given.is_empty() {
        return Err(AddrError::message("must have at least one character"));
    }
    if given.contains('.') {
        return Err(AddrError::message("dots are not allowed"));
    }
    // Also keeps out the punycode marker `xn--`, which would make the IDNA
    // step decode the name instead of validating it.
    if given.contains("--") {
        return Err(AddrError::message("cannot use multiple consecutive dashes"));
    }
    let (normalized, result) = Uts46::new().to_unicode(given.as_bytes(), deny_list, Hyphens::Check);
    if result.is_err() {
        return Err(AddrError::message(PART_CHARSET_ERROR));
    }
    // IDNA maps full-width and ideographic full stops to `.`; Go would keep
    // the resulting two-label name, which cannot work as a path segment.
    if normalized.contains('.') {
        return Err(AddrError::message("dots are not allowed"));
    }
    Ok(normalized.into_owned())
}

/// The OS and architecture a provider package is built for, in Go's
/// `GOOS`/`GOARCH` words because registries, mirrors and package file names
/// all use them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Platform {
    pub os: String,
    pub arch: String,
}

impl Platform {
    /// Parses `os_arch`. Case is kept: Terraform compares platforms exactly.
    pub fn parse(given: &str) -> Result<Platform, AddrError> {
        let mut words = given.split('_');
        let (Some(os), Some(arch), None) = (words.next(), words.next(), words.next()) else {
            return Err(AddrError::message(
                "must be two words separated by an underscore",
            ));
        };
        if os.is_empty() || arch.is_empty() {
            return Err(AddrError::message(
                "must be two words separated by an underscore",
            ));
        }
        let has_whitespace = |word: &str| word.contains([' ', '\t', '\n', '\r']);
        if has_whitespace(os) {
            return Err(AddrError::message("OS portion must not contain whitespace"));
        }
        if has_whitespace(arch) {
            return Err(AddrError::message(
                "architecture portion must not contain whitespace",
            ));
        }
        Ok(Platform {
            os: os.to_owned(),
            arch: arch.to_owned(),
        })
    }

    /// The platform this binary runs on, named as a Terraform built for the
    /// same machine would name it. The tests' build (feature `failpoints`)
    /// can be told to play another with `TFINSTALL_TEST_PLATFORM`, so that
    /// what a machine of that platform does is tested here; a release
    /// build cannot.
    pub fn current() -> Platform {
        #[cfg(feature = "failpoints")]
        if let Some(played) = std::env::var("TFINSTALL_TEST_PLATFORM")
            .ok()
            .and_then(|name| Platform::parse(&name).ok())
        {
            return played;
        }
        Platform {
            os: go_os(std::env::consts::OS).to_owned(),
            arch: go_arch(std::env::consts::ARCH).to_owned(),
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.os, self.arch)
    }
}

fn go_os(rust_os: &str) -> &str {
    match rust_os {
        "macos" => "darwin",
        other => other,
    }
}

fn go_arch(rust_arch: &str) -> &str {
    let little_endian = cfg!(target_endian = "little");
    match rust_arch {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        "loongarch64" => "loong64",
        "powerpc" => "ppc",
        "powerpc64" if little_endian => "ppc64le",
        "powerpc64" => "ppc64",
        "mips" if little_endian => "mipsle",
        "mips64" if little_endian => "mips64le",
        "wasm32" => "wasm",
        other => other,
    }
}

/// Splits at the first colon, as svchost does (so `https://x` splits into
/// `https` and `://x`).
fn split_port(given: &str) -> (&str, &str) {
    match given.find(':') {
        Some(colon) => given.split_at(colon),
        None => (given, ""),
    }
}

/// Canonical `:port` suffix: empty for no port or the default 443, otherwise
/// the decimal number without leading zeros.
fn normalize_port(portion: &str) -> Result<String, AddrError> {
    let Some(digits) = portion.strip_prefix(':') else {
        return Ok(String::new());
    };
    // svchost reports every failure of Go's Atoi (including overflow of a
    // 64-bit integer) as non-digit characters.
    let all_digits = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let Some(number) = all_digits.then(|| digits.parse::<i64>().ok()).flatten() else {
        return Err(AddrError::message(
            "port portion contains non-digit characters",
        ));
    };
    if number == 443 {
        return Ok(String::new());
    }
    if number > 65535 {
        return Err(AddrError::message("port number is greater than 65535"));
    }
    Ok(format!(":{number}"))
}

/// Labels as svchost's label iterator yields them: a trailing dot (the DNS
/// root) adds no empty label.
fn go_labels(host: &str) -> Vec<&str> {
    let bytes = host.as_bytes();
    let mut labels = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let end = host[start..]
            .find('.')
            .map_or(bytes.len(), |dot| start + dot);
        labels.push(&host[start..end]);
        start = end + 1;
        if start + 1 == bytes.len() && bytes[start] == b'.' {
            start = bytes.len();
        }
    }
    labels
}

/// IDNA "lookup" profile ToASCII (UTS #46 non-transitional, STD3 rules,
/// hyphen checks), as Go's `idna.Lookup` and Terraform ≥ 1.4.
fn lookup_to_ascii(host: &str) -> Option<String> {
    Uts46::new()
        .to_ascii(
            host.as_bytes(),
            AsciiDenyList::STD3,
            Hyphens::Check,
            DnsLength::Ignore,
        )
        .ok()
        .map(|ascii| ascii.into_owned())
}

fn lookup_to_unicode(host: &str) -> Option<String> {
    let (unicode, result) =
        Uts46::new().to_unicode(host.as_bytes(), AsciiDenyList::STD3, Hyphens::Check);
    result.ok().map(|()| unicode.into_owned())
}

/// Words close to Go's idna errors: the first disallowed character, else the
/// first label that fails validation (in its mapped form), else the whole name.
fn idna_error_message(host: &str) -> String {
    if let Some(rune) = host.chars().find(|&c| c != '.' && is_disallowed(c)) {
        return format!("idna: disallowed rune U+{:04X}", u32::from(rune));
    }
    let invalid_label = host
        .split('.')
        .find(|label| lookup_to_ascii(label).is_none())
        .unwrap_or(host);
    // The mapped form, unless the mapping marked errors in it; then the
    // case-folded input is the closest readable stand-in.
    let (mapped, _) = Uts46::new().to_unicode(
        invalid_label.as_bytes(),
        AsciiDenyList::EMPTY,
        Hyphens::Allow,
    );
    let shown = if mapped.contains('\u{FFFD}') {
        invalid_label.to_lowercase()
    } else {
        mapped.into_owned()
    };
    format!("idna: invalid label {}", go_quote(&shown))
}

/// Whether IDNA rejects the character itself rather than its context. A lone
/// mark, digit or right-to-left letter can fail for positional reasons, so a
/// character counts as disallowed only if it fails after a left-to-right
/// letter, after a right-to-left letter and on its own.
fn is_disallowed(c: char) -> bool {
    if c.is_ascii() {
        return !(c.is_ascii_alphanumeric() || c == '-');
    }
    // Joiners are valid code points that only fail in the wrong context.
    if c == '\u{200C}' || c == '\u{200D}' {
        return false;
    }
    ["", "a", "\u{05D0}"].iter().all(|prefix| {
        let candidate = format!("{prefix}{c}");
        Uts46::new()
            .to_ascii(
                candidate.as_bytes(),
                AsciiDenyList::STD3,
                Hyphens::Allow,
                DnsLength::Ignore,
            )
            .is_err()
    })
}

/// The `-platform` values, parsed and de-duplicated in the order given; the
/// current platform when there are none.
pub fn target_platforms(given: &[String]) -> Result<Vec<Platform>, Diagnostics> {
    if given.is_empty() {
        return Ok(vec![Platform::current()]);
    }
    let mut diags = Diagnostics::new();
    let mut platforms: Vec<Platform> = Vec::new();
    for raw in given {
        match Platform::parse(raw) {
            Ok(platform) if platforms.contains(&platform) => {}
            Ok(platform) => platforms.push(platform),
            Err(err) => diags.push(Diagnostic::error(
                "Invalid target platform",
                format!(
                    "The string {} given in the -platform option is not a valid target platform: {err}.",
                    go_quote(raw)
                ),
            )),
        }
    }
    if diags.has_errors() {
        Err(diags)
    } else {
        Ok(platforms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(given: &str) -> Result<String, String> {
        Hostname::parse(given)
            .map(|h| h.as_ascii().to_owned())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn hostname_for_comparison_vectors() {
        // svchost_test.go TestForComparison
        let ok = [
            ("example.com", "example.com"),
            ("example.com:443", "example.com"),
            ("example.com:81", "example.com:81"),
            ("example.com:081", "example.com:81"),
            ("invalid", "invalid"),
            ("localhost", "localhost"),
            ("localhost:1211", "localhost:1211"),
            ("HashiCorp.com", "hashicorp.com"),
            ("1example.com", "1example.com"),
            ("Испытание.com", "xn--80akhbyknj4f.com"),
            ("m\u{fc}nchen.de", "xn--mnchen-3ya.de"),
            ("mu\u{308}nchen.de", "xn--mnchen-3ya.de"),
            ("http:80", "http:80"),
            ("https:80", "https:80"),
            ("REGISTRY.terraform.io", "registry.terraform.io"),
            ("env.ドメイン名例.com", "env.xn--eckwd4c7cu47r2wf.com"),
            ("env.café.fr", "env.xn--caf-dma.fr"),
            ("example.com.", "example.com."),
            // svchost's label iterator stops at a final `..`, so Go accepts it.
            ("a..", "a.."),
            ("\u{FF21}\u{FF22}.com", "ab.com"),
        ];
        for (given, want) in ok {
            assert_eq!(host(given), Ok(want.to_owned()), "input {given:?}");
        }
        let errors = [
            ("", "empty string is not a valid hostname"),
            (":443", "empty string is not a valid hostname"),
            (
                "blah..blah",
                "hostname contains empty label (two consecutive periods)",
            ),
            (
                ".example.com",
                "hostname contains empty label (two consecutive periods)",
            ),
            (
                "example.com:boo",
                "port portion contains non-digit characters",
            ),
            (
                "example.com:80:boo",
                "port portion contains non-digit characters",
            ),
            ("example.com:", "port portion contains non-digit characters"),
            (
                "example.com:-1",
                "port portion contains non-digit characters",
            ),
            ("example.com:9999999", "port number is greater than 65535"),
            (
                "example.com:99999999999999999999",
                "port portion contains non-digit characters",
            ),
            (
                "https://example.com",
                "need just a hostname and optional port number, not a full URL",
            ),
            (
                "HTTPS://example.com:80",
                "need just a hostname and optional port number, not a full URL",
            ),
            (
                "env.xn--eckwd4c7cu47r2wf.com",
                "hostname label \"xn--eckwd4c7cu47r2wf\" specified in punycode format; service hostnames must be given in unicode",
            ),
            ("badhost!", "idna: disallowed rune U+0021"),
            ("my_host.example.com", "idna: disallowed rune U+005F"),
            ("-foo.com", "idna: invalid label \"-foo\""),
            ("Foo-.com", "idna: invalid label \"foo-\""),
            ("ab--cd.com", "idna: invalid label \"ab--cd\""),
            ("foo\u{FF01}.com", "idna: disallowed rune U+FF01"),
            ("\u{301}Abc.com", "idna: invalid label \"\u{301}abc\""),
            ("a\u{200D}b.com", "idna: invalid label \"a\\u200db\""),
            (
                "a..b",
                "hostname contains empty label (two consecutive periods)",
            ),
        ];
        for (given, want) in errors {
            assert_eq!(host(given), Err(want.to_owned()), "input {given:?}");
        }
    }

    #[test]
    fn hostname_display_vectors() {
        // svchost_test.go TestHostnameForDisplay, via parse of the Unicode form
        let cases = [
            ("example.com", "example.com"),
            ("example.com:81", "example.com:81"),
            ("испытание.com", "испытание.com"),
            ("испытание.com:8080", "испытание.com:8080"),
            ("münchen.de", "münchen.de"),
            ("env.ドメイン名例.com", "env.ドメイン名例.com"),
            ("ENV.Café.FR", "env.café.fr"),
        ];
        for (given, want) in cases {
            assert_eq!(Hostname::parse(given).unwrap().for_display(), want);
        }
    }

    #[test]
    fn lenient_display_vectors() {
        // svchost_test.go TestForDisplay
        let cases = [
            ("", ""),
            ("example.com", "example.com"),
            ("invalid", "invalid"),
            ("localhost", "localhost"),
            ("localhost:1211", "localhost:1211"),
            ("HashiCorp.com", "hashicorp.com"),
            ("Испытание.com", "испытание.com"),
            ("m\u{fc}nchen.de", "m\u{fc}nchen.de"),
            ("mu\u{308}nchen.de", "m\u{fc}nchen.de"),
            ("example.com:443", "example.com"),
            ("example.com:81", "example.com:81"),
            ("example.com:boo", "example.com:boo"),
            ("example.com:boo:boo", "example.com:boo:boo"),
            ("example.com:081", "example.com:81"),
        ];
        for (given, want) in cases {
            assert_eq!(hostname_for_display(given), want, "input {given:?}");
        }
    }

    #[test]
    fn token_env_hostnames_round_trip() {
        // credentials_test.go: TF_TOKEN_* names after `__`→`-`, `_`→`.`
        let cases = [
            (
                "env.xn--eckwd4c7cu47r2wf.com",
                "env.xn--eckwd4c7cu47r2wf.com",
            ),
            ("env.xn--caf-dma.fr", "env.xn--caf-dma.fr"),
            (
                "CONFIGUREDUPPERCASE.EXAMPLE.COM",
                "configureduppercase.example.com",
            ),
            ("configured.example.com", "configured.example.com"),
        ];
        for (from_env, want) in cases {
            let display = hostname_for_display(from_env);
            assert_eq!(host(&display), Ok(want.to_owned()), "env name {from_env:?}");
        }
        assert_eq!(
            hostname_for_display("env.xn--eckwd4c7cu47r2wf.com"),
            "env.ドメイン名例.com"
        );
        assert_eq!(hostname_for_display("env.xn--caf-dma.fr"), "env.café.fr");
    }

    #[test]
    fn hostnames_order_by_ascii_form() {
        let mut hosts = [
            Hostname::parse("zzz.example").unwrap(),
            Hostname::parse("café.fr").unwrap(),
            Hostname::parse("example.com:8443").unwrap(),
            Hostname::parse("example.com").unwrap(),
        ];
        hosts.sort();
        let ascii: Vec<&str> = hosts.iter().map(Hostname::as_ascii).collect();
        assert_eq!(
            ascii,
            [
                "example.com",
                "example.com:8443",
                "xn--caf-dma.fr",
                "zzz.example"
            ]
        );
    }

    #[test]
    fn provider_part_vectors() {
        // registry-address provider_test.go TestParseProviderPart
        let ok = [
            ("foo", "foo"),
            ("FOO", "foo"),
            ("Foo", "foo"),
            ("abc-123", "abc-123"),
            ("Испытание", "испытание"),
            ("m\u{fc}nchen", "m\u{fc}nchen"),
            ("mu\u{308}nchen", "m\u{fc}nchen"),
        ];
        for (given, want) in ok {
            assert_eq!(
                parse_provider_part(given),
                Ok(want.to_owned()),
                "input {given:?}"
            );
        }
        let errors = [
            ("abc--123", "cannot use multiple consecutive dashes"),
            ("xn--80akhbyknj4f", "cannot use multiple consecutive dashes"),
            ("abc.123", "dots are not allowed"),
            ("abc\u{3002}123", "dots are not allowed"),
            ("-abc123", PART_CHARSET_ERROR),
            ("abc123-", PART_CHARSET_ERROR),
            ("abc_123", PART_CHARSET_ERROR),
            ("bad!", PART_CHARSET_ERROR),
            ("", "must have at least one character"),
        ];
        for (given, want) in errors {
            assert_eq!(
                parse_provider_part(given).map_err(|e| e.to_string()),
                Err(want.to_owned()),
                "input {given:?}"
            );
        }
    }

    #[test]
    fn namespaces_accept_underscores() {
        assert_eq!(parse_provider_namespace("My_Org"), Ok("my_org".to_owned()));
        assert_eq!(
            parse_provider_namespace("bad!").map_err(|e| e.to_string()),
            Err(PART_CHARSET_ERROR.to_owned())
        );
        assert!(parse_provider_namespace("-org").is_err());
        assert!(parse_provider_namespace("my org").is_err());
    }

    fn addr(host: &str, ns: &str, ty: &str) -> ProviderAddr {
        ProviderAddr::new(Hostname::parse(host).unwrap(), ns, ty)
    }

    #[test]
    fn source_string_vectors() {
        // registry-address TestParseProviderSource, with Terraform's
        // `hashicorp` replacement for the unknown namespace.
        let ok = [
            (
                "registry.terraform.io/hashicorp/aws",
                addr("registry.terraform.io", "hashicorp", "aws"),
            ),
            (
                "registry.Terraform.io/HashiCorp/AWS",
                addr("registry.terraform.io", "hashicorp", "aws"),
            ),
            (
                "terraform.io/builtin/terraform",
                addr("terraform.io", "builtin", "terraform"),
            ),
            (
                "terraform",
                addr("registry.terraform.io", "hashicorp", "terraform"),
            ),
            (
                "hashicorp/aws",
                addr("registry.terraform.io", "hashicorp", "aws"),
            ),
            (
                "HashiCorp/AWS",
                addr("registry.terraform.io", "hashicorp", "aws"),
            ),
            ("aws", addr("registry.terraform.io", "hashicorp", "aws")),
            ("AWS", addr("registry.terraform.io", "hashicorp", "aws")),
            (
                "example.com/foo-bar/baz-boop",
                addr("example.com", "foo-bar", "baz-boop"),
            ),
            (
                "foo-bar/baz-boop",
                addr("registry.terraform.io", "foo-bar", "baz-boop"),
            ),
            (
                "localhost:8080/foo/bar",
                addr("localhost:8080", "foo", "bar"),
            ),
            ("example.com:443/foo/bar", addr("example.com", "foo", "bar")),
            (
                "example.com/my_org/foo",
                addr("example.com", "my_org", "foo"),
            ),
            ("-/legacy", addr("registry.terraform.io", "-", "legacy")),
            (
                "registry.terraform.io/-/legacy",
                addr("registry.terraform.io", "-", "legacy"),
            ),
            ("café.fr/ns/type", addr("café.fr", "ns", "type")),
            // A one-part source skips the prefix check, as in Terraform.
            (
                "terraform-provider-aws",
                addr(
                    "registry.terraform.io",
                    "hashicorp",
                    "terraform-provider-aws",
                ),
            ),
        ];
        for (given, want) in ok {
            assert_eq!(ProviderAddr::parse(given), Ok(want), "input {given:?}");
        }
        let errors = [
            "example.com/too/many/parts/here",
            "/too///many//slashes",
            "///",
            "/ / /",
            "badhost!/hashicorp/aws",
            "example.com/badnamespace!/aws",
            "example.com/bad--namespace/aws",
            "example.com/-badnamespace/aws",
            "example.com/badnamespace-/aws",
            "example.com/bad.namespace/aws",
            "example.com/hashicorp/badtype!",
            "example.com/hashicorp/bad--type",
            "example.com/hashicorp/-badtype",
            "example.com/hashicorp/badtype-",
            "example.com/hashicorp/bad.type",
            "example.com/hashicorp/bad_type",
            "example.com/hashicorp/terraform-provider-bad",
            "example.com/hashicorp/terraform-bad",
            "example.com/-/legacy",
            "",
        ];
        for given in errors {
            assert!(ProviderAddr::parse(given).is_err(), "input {given:?}");
        }
    }

    #[test]
    fn source_string_error_texts() {
        let err = |s: &str| ProviderAddr::parse(s).unwrap_err();
        let e = err("a/b/c/d");
        assert_eq!(e.summary(), Some("Invalid provider source string"));
        assert_eq!(
            e.detail(),
            r#"The "source" attribute must be in the format "[hostname/][namespace/]name""#
        );
        assert_eq!(err("hashicorp//aws"), e);

        let e = err("example.com/hashicorp/bad!");
        assert_eq!(e.summary(), Some("Invalid provider type"));
        assert_eq!(
            e.detail(),
            "Invalid provider type \"bad!\" in source \"example.com/hashicorp/bad!\": must contain only letters, digits, and dashes, and may not use leading or trailing dashes\""
        );

        let e = err("bad!ns/aws");
        assert_eq!(e.summary(), Some("Invalid provider namespace"));
        assert_eq!(
            e.detail(),
            "Invalid provider namespace \"\" in source \"bad!ns/aws\": must contain only letters, digits, and dashes, and may not use leading or trailing dashes\""
        );

        let e = err("xn--eckwd4c7cu47r2wf.com/ns/aws");
        assert_eq!(e.summary(), Some("Invalid provider source hostname"));
        assert_eq!(
            e.detail(),
            "Invalid provider source hostname namespace \"\" in source \"xn--eckwd4c7cu47r2wf.com/ns/aws\": hostname label \"xn--eckwd4c7cu47r2wf\" specified in punycode format; service hostnames must be given in unicode\""
        );

        let e = err("example.com/-/legacy");
        assert_eq!(e.summary(), Some("Invalid provider namespace"));
        assert_eq!(
            e.detail(),
            "The legacy provider namespace \"-\" can be used only with hostname registry.terraform.io."
        );

        let e = err("hashicorp/terraform-provider-aws");
        assert_eq!(e.summary(), Some("Invalid provider type"));
        assert_eq!(
            e.detail(),
            "Provider source \"hashicorp/terraform-provider-aws\" has a type with the prefix \"terraform-provider-\", which isn't valid. Although that prefix is often used in the names of version control repositories for Terraform providers, provider source strings should not include it.\n\nDid you mean \"hashicorp/aws\"?"
        );

        let e = err("example.com/acme/terraform-provider-aws");
        assert!(
            e.detail()
                .ends_with("Did you mean \"example.com/acme/aws\"?")
        );

        let e = err("example.com/acme/terraform-aws");
        assert_eq!(
            e.detail(),
            "Provider source \"example.com/acme/terraform-aws\" has a type with the prefix \"terraform-\", which isn't allowed because it would be redundant to name a Terraform provider with that prefix. If you are the author of this provider, rename it to not include the prefix."
        );
        assert_eq!(
            e.to_string(),
            format!("Invalid provider type: {}", e.detail())
        );
    }

    #[test]
    fn string_forms() {
        let official = ProviderAddr::parse("hashicorp/aws").unwrap();
        assert_eq!(official.to_string(), "registry.terraform.io/hashicorp/aws");
        assert_eq!(official.for_display(), "hashicorp/aws");

        let idn = ProviderAddr::parse("Café.fr:8443/Acme/Thing").unwrap();
        assert_eq!(idn.hostname.as_ascii(), "xn--caf-dma.fr:8443");
        assert_eq!(idn.to_string(), "café.fr:8443/acme/thing");
        assert_eq!(idn.for_display(), "café.fr:8443/acme/thing");

        let builtin = ProviderAddr::parse("terraform.io/builtin/terraform").unwrap();
        assert_eq!(builtin.for_display(), "terraform.io/builtin/terraform");
        assert!(builtin.is_builtin());
        assert!(!official.is_builtin());
        assert!(!addr("registry.terraform.io", "builtin", "x").is_builtin());
        assert!(!addr("terraform.io", "boop", "x").is_builtin());

        assert!(ProviderAddr::parse("-/aws").unwrap().is_legacy());
        assert!(!addr("example.com", "-", "aws").is_legacy());
        assert!(!official.is_legacy());
    }

    #[test]
    fn provider_order_is_ascii_host_then_namespace_then_type() {
        let mut addrs = [
            ProviderAddr::parse("zzz.example/a/a").unwrap(),
            ProviderAddr::parse("café.fr/a/a").unwrap(),
            ProviderAddr::parse("hashicorp/random").unwrap(),
            ProviderAddr::parse("acme/aws").unwrap(),
            ProviderAddr::parse("hashicorp/aws").unwrap(),
            ProviderAddr::parse("terraform.io/builtin/terraform").unwrap(),
        ];
        addrs.sort();
        let shown: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "registry.terraform.io/acme/aws",
                "registry.terraform.io/hashicorp/aws",
                "registry.terraform.io/hashicorp/random",
                "terraform.io/builtin/terraform",
                "café.fr/a/a",
                "zzz.example/a/a",
            ]
        );
    }

    #[test]
    fn implied_providers() {
        assert_eq!(
            ProviderAddr::implied("terraform"),
            Ok(addr("terraform.io", "builtin", "terraform"))
        );
        assert_eq!(
            ProviderAddr::implied("aws"),
            Ok(addr("registry.terraform.io", "hashicorp", "aws"))
        );
        assert_eq!(
            ProviderAddr::implied("Google-Beta"),
            Ok(addr("registry.terraform.io", "hashicorp", "google-beta"))
        );
        let err = ProviderAddr::implied("bad_name").unwrap_err();
        assert_eq!(err.summary(), None);
        assert_eq!(err.to_string(), PART_CHARSET_ERROR);
    }

    #[test]
    fn platform_vectors() {
        let ok = [
            ("linux_amd64", "linux", "amd64"),
            ("darwin_arm64", "darwin", "arm64"),
            ("Linux_AMD64", "Linux", "AMD64"),
            ("amigaos_m68k", "amigaos", "m68k"),
        ];
        for (given, os, arch) in ok {
            let platform = Platform::parse(given).unwrap();
            assert_eq!((platform.os.as_str(), platform.arch.as_str()), (os, arch));
            assert_eq!(platform.to_string(), given);
        }
        let errors = [
            ("linux", "must be two words separated by an underscore"),
            ("", "must be two words separated by an underscore"),
            ("_", "must be two words separated by an underscore"),
            ("linux_", "must be two words separated by an underscore"),
            ("_amd64", "must be two words separated by an underscore"),
            (
                "arbitrary_nonsense_that_isnt_valid",
                "must be two words separated by an underscore",
            ),
            ("linux x_amd64", "OS portion must not contain whitespace"),
            (
                "linux_amd\t64",
                "architecture portion must not contain whitespace",
            ),
            (
                "linux_amd64\n",
                "architecture portion must not contain whitespace",
            ),
        ];
        for (given, want) in errors {
            assert_eq!(
                Platform::parse(given).map_err(|e| e.to_string()),
                Err(want.to_owned()),
                "input {given:?}"
            );
        }
    }

    #[test]
    fn platforms_order_by_os_then_arch() {
        let mut platforms: Vec<Platform> = ["linux_arm64", "darwin_arm64", "linux_amd64"]
            .iter()
            .map(|p| Platform::parse(p).unwrap())
            .collect();
        platforms.sort();
        let shown: Vec<String> = platforms.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["darwin_arm64", "linux_amd64", "linux_arm64"]);
    }

    #[test]
    fn current_platform_uses_go_names() {
        assert_eq!(go_os("macos"), "darwin");
        assert_eq!(go_os("linux"), "linux");
        assert_eq!(go_os("windows"), "windows");
        assert_eq!(go_os("freebsd"), "freebsd");
        assert_eq!(go_arch("x86_64"), "amd64");
        assert_eq!(go_arch("x86"), "386");
        assert_eq!(go_arch("aarch64"), "arm64");
        assert_eq!(go_arch("arm"), "arm");
        assert_eq!(go_arch("s390x"), "s390x");
        assert_eq!(go_arch("riscv64"), "riscv64");
        let current = Platform::current();
        assert_eq!(Platform::parse(&current.to_string()), Ok(current));
    }

    #[test]
    fn platforms_default_to_the_current_one_and_are_deduplicated() {
        assert_eq!(target_platforms(&[]).unwrap(), [Platform::current()]);
        let given = ["linux_amd64", "darwin_arm64", "linux_amd64"].map(String::from);
        let platforms: Vec<String> = target_platforms(&given)
            .unwrap()
            .iter()
            .map(Platform::to_string)
            .collect();
        assert_eq!(platforms, ["linux_amd64", "darwin_arm64"]);
    }

    #[test]
    fn bad_platforms_are_all_reported_in_terraform_words() {
        let given = ["linux", "linux_amd64", "a_b_c"].map(String::from);
        let diags = target_platforms(&given).unwrap_err();
        let details: Vec<&str> = diags.iter().map(|d| d.detail.as_str()).collect();
        assert_eq!(
            details,
            [
                "The string \"linux\" given in the -platform option is not a valid target platform: must be two words separated by an underscore.",
                "The string \"a_b_c\" given in the -platform option is not a valid target platform: must be two words separated by an underscore.",
            ]
        );
        assert!(diags.iter().all(|d| d.summary == "Invalid target platform"));
    }
}
