//! `.netrc` credentials (`NETRC`, else `~/.netrc`), which Terraform 1.11
//! sends as HTTP Basic authentication with provider package downloads, so
//! that mirrors behind Basic auth (Artifactory, Nexus, an nginx with
//! `auth_basic`) work (issue 22).
//!
//! The parser is written here rather than taken from a crate: the `netrc`
//! crate has not been released since 2017 and reports no line numbers, and
//! a malformed file must be reported by file and line while the run goes on.
//! It reads what Terraform's parser (bgentry/go-netrc, through go-getter)
//! reads: whitespace-separated tokens, `#` comments to the end of the line,
//! `macdef` bodies up to the next blank line (skipped), at most one
//! `default` entry and none but it after it; quotes are ordinary
//! characters, as there.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use url::Url;

use super::CliEnv;
use crate::diag::Diagnostic;

/// One `machine` or `default` entry.
#[derive(Clone, PartialEq, Eq)]
struct Entry {
    /// `None` for the `default` entry.
    machine: Option<String>,
    login: Option<String>,
    password: Option<String>,
    /// Read only to refuse a second one in an entry, as go-netrc does.
    account: Option<String>,
}

/// The entries of one `.netrc` file, in file order.
#[derive(Clone, PartialEq, Eq)]
pub struct Netrc {
    path: PathBuf,
    entries: Vec<Entry>,
}

/// Passwords stay out of debug output and logs.
impl fmt::Debug for Netrc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let machines: Vec<&str> = self
            .entries
            .iter()
            .map(|e| e.machine.as_deref().unwrap_or("default"))
            .collect();
        f.debug_struct("Netrc")
            .field("path", &self.path)
            .field("machines", &machines)
            .finish()
    }
}

/// Where a file stopped making sense: its 1-based line and what was wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl Netrc {
    /// The file `NETRC` names, else `.netrc` in the home directory (`_netrc`
    /// on Windows), as go-getter finds it. A missing file (or a directory)
    /// is no file; one that cannot be read or parsed gives a warning and no
    /// credentials, and the run goes on without them.
    pub fn load(env: &CliEnv) -> (Option<Netrc>, Option<Diagnostic>) {
        let path = match env.var("NETRC").filter(|p| !p.is_empty()) {
            Some(path) => PathBuf::from(path),
            None if cfg!(windows) => match env.var("USERPROFILE") {
                Some(home) => Path::new(home).join("_netrc"),
                None => return (None, None),
            },
            None => match &env.profile_dir {
                Some(home) => home.join(".netrc"),
                None => return (None, None),
            },
        };
        if path.is_dir() {
            return (None, None);
        }
        let text = match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return (None, None),
            Err(err) => {
                let warning = Diagnostic::warning(
                    "Cannot read the .netrc file",
                    format!(
                        "Could not read {}: {err}. No credentials from it are sent with provider downloads; make it readable, or set NETRC to another file.",
                        path.display()
                    ),
                );
                return (None, Some(warning));
            }
        };
        match Netrc::parse(&path, &text) {
            Ok(netrc) => (Some(netrc), None),
            Err(err) => {
                let warning = Diagnostic::warning(
                    "Invalid .netrc file",
                    format!(
                        "{}, line {}: {}. No credentials from this file are sent with provider downloads until the line is fixed.",
                        path.display(),
                        err.line,
                        err.message
                    ),
                );
                (None, Some(warning))
            }
        }
    }

    pub fn parse(path: &Path, text: &str) -> Result<Netrc, ParseError> {
        let mut tokens = Tokens::new(text);
        let mut entries: Vec<Entry> = Vec::new();
        let mut default_seen = false;
        while let Some((line, word)) = tokens.next_word() {
            let fail = |message: String| Err(ParseError { line, message });
            let value = |tokens: &mut Tokens<'_>, what: &str| match tokens.next_word() {
                Some((_, value)) => Ok(value.to_owned()),
                None => Err(ParseError {
                    line,
                    message: format!("\"{word}\" needs {what} after it"),
                }),
            };
            match word {
                "machine" => {
                    if default_seen {
                        return fail(
                            "a machine entry follows the default entry, which must come last"
                                .to_owned(),
                        );
                    }
                    let name = value(&mut tokens, "a host name")?;
                    entries.push(Entry {
                        machine: Some(name),
                        login: None,
                        password: None,
                        account: None,
                    });
                }
                "default" => {
                    if default_seen {
                        return fail("a second default entry".to_owned());
                    }
                    default_seen = true;
                    entries.push(Entry {
                        machine: None,
                        login: None,
                        password: None,
                        account: None,
                    });
                }
                "login" | "password" | "account" => {
                    let given = value(&mut tokens, "a value")?;
                    let Some(entry) = entries.last_mut() else {
                        return fail(format!(
                            "\"{word}\" comes before any machine or default entry"
                        ));
                    };
                    let field = match word {
                        "login" => &mut entry.login,
                        "password" => &mut entry.password,
                        _ => &mut entry.account,
                    };
                    if field.is_some() {
                        return fail(format!("a second \"{word}\" in one entry"));
                    }
                    *field = Some(given);
                }
                "macdef" => {
                    value(&mut tokens, "a macro name")?;
                    tokens.skip_macro_body();
                }
                // The word itself is left out: a stray word in a
                // credentials file is often a password.
                _ => {
                    return fail(
                        "expected machine, default, login, password, account or macdef (the word found is not shown, since it may be a secret)"
                            .to_owned(),
                    );
                }
            }
        }
        Ok(Netrc {
            path: path.to_path_buf(),
            entries,
        })
    }

    /// The `Authorization` value for a request to `url`, if this file has
    /// credentials for its host. Terraform looks the machine up by the
    /// URL's host with its port when the URL names one; curl also accepts
    /// the bare host name, and so does tfinstall, after the exact name.
    /// The `default` entry serves every other host, as in both. A URL with
    /// userinfo of its own gets nothing: that wins.
    pub fn authorization_for(&self, url: &Url) -> Option<String> {
        if !url.username().is_empty() || url.password().is_some() {
            return None;
        }
        let host = url.host_str()?;
        let with_port = url.port().map(|port| format!("{host}:{port}"));
        let named = |name: &str| {
            self.entries.iter().find(|e| {
                e.machine
                    .as_deref()
                    .is_some_and(|m| m.eq_ignore_ascii_case(name))
            })
        };
        let entry = with_port
            .as_deref()
            .and_then(named)
            .or_else(|| named(host))
            .or_else(|| self.entries.iter().find(|e| e.machine.is_none()))?;
        if entry.login.is_none() && entry.password.is_none() {
            return None;
        }
        let pair = format!(
            "{}:{}",
            entry.login.as_deref().unwrap_or_default(),
            entry.password.as_deref().unwrap_or_default()
        );
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        ))
    }
}

/// Words of a `.netrc` file with the line each starts on.
struct Tokens<'a> {
    rest: &'a str,
    line: usize,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Tokens {
            rest: text,
            line: 1,
        }
    }

    fn next_word(&mut self) -> Option<(usize, &'a str)> {
        loop {
            let start = self
                .rest
                .find(|c: char| !c.is_whitespace())
                .unwrap_or(self.rest.len());
            self.advance(start);
            if self.rest.is_empty() {
                return None;
            }
            if self.rest.starts_with('#') {
                let end = self.rest.find('\n').unwrap_or(self.rest.len());
                self.advance(end);
                continue;
            }
            let end = self
                .rest
                .find(char::is_whitespace)
                .unwrap_or(self.rest.len());
            let word = &self.rest[..end];
            let line = self.line;
            self.advance(end);
            return Some((line, word));
        }
    }

    /// A macro's body runs from the next line to the first empty line.
    fn skip_macro_body(&mut self) {
        let end = self
            .rest
            .find("\n\n")
            .map_or(self.rest.len(), |blank| blank + 1);
        self.advance(end);
    }

    fn advance(&mut self, by: usize) {
        self.line += self.rest[..by].matches('\n').count();
        self.rest = &self.rest[by..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Netrc, ParseError> {
        Netrc::parse(Path::new("/home/u/.netrc"), text)
    }

    fn basic(login: &str, password: &str) -> Option<String> {
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{login}:{password}"))
        ))
    }

    fn auth(netrc: &Netrc, url: &str) -> Option<String> {
        netrc.authorization_for(&Url::parse(url).unwrap())
    }

    #[test]
    fn the_host_with_its_port_wins_then_the_bare_host_then_default() {
        let netrc = parse(
            "machine mirror.example login bare password b\n\
             machine mirror.example:8443 login ported password p\n\
             default login anyone password d\n",
        )
        .unwrap();
        assert_eq!(
            auth(&netrc, "https://mirror.example:8443/x.zip"),
            basic("ported", "p")
        );
        assert_eq!(
            auth(&netrc, "https://mirror.example:9443/x.zip"),
            basic("bare", "b")
        );
        assert_eq!(
            auth(&netrc, "https://MIRROR.example/x.zip"),
            basic("bare", "b")
        );
        assert_eq!(
            auth(&netrc, "https://other.example/x.zip"),
            basic("anyone", "d")
        );
    }

    #[test]
    fn userinfo_in_the_url_wins() {
        let netrc = parse("default login anyone password d").unwrap();
        assert_eq!(auth(&netrc, "https://me:pw@mirror.example/x.zip"), None);
        assert_eq!(auth(&netrc, "https://me@mirror.example/x.zip"), None);
    }

    #[test]
    fn no_entry_and_no_default_means_no_credentials() {
        let netrc = parse("machine a.example login x password y").unwrap();
        assert_eq!(auth(&netrc, "https://b.example/"), None);
        let netrc = parse("machine a.example account only").unwrap();
        assert_eq!(auth(&netrc, "https://a.example/"), None);
    }

    #[test]
    fn comments_macros_and_layout_are_read_as_go_netrc_reads_them() {
        let netrc = parse(
            "# a comment, with machine words in it\n\
             machine a.example\n  login x # trailing comment\n  password \"q\"\n\
             macdef init\nmachine inside.macro login no password no\n\n\
             machine b.example login y password z account acct\n",
        )
        .unwrap();
        assert_eq!(auth(&netrc, "https://a.example/"), basic("x", "\"q\""));
        assert_eq!(auth(&netrc, "https://inside.macro/"), None);
        assert_eq!(auth(&netrc, "https://b.example/"), basic("y", "z"));
    }

    #[test]
    fn malformed_files_name_the_line() {
        let err = |text: &str| parse(text).unwrap_err();
        assert!(!err("machine a login x s3cret").message.contains("s3cret"));
        assert_eq!(
            err("machine a login x\n\nlogn y\n"),
            ParseError {
                line: 3,
                message: "expected machine, default, login, password, account or macdef (the word found is not shown, since it may be a secret)".into()
            }
        );
        assert_eq!(err("\nlogin x").line, 2);
        assert_eq!(
            err("machine a login x login y").message,
            "a second \"login\" in one entry"
        );
        assert_eq!(
            err("default login x\nmachine a").message,
            "a machine entry follows the default entry, which must come last"
        );
        assert_eq!(err("default\ndefault").message, "a second default entry");
        assert_eq!(
            err("machine a\n  password").message,
            "\"password\" needs a value after it"
        );
    }

    #[test]
    fn load_warns_with_file_and_line_and_gives_no_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds");
        std::fs::write(&path, "machine a login x\npasswd y\n").unwrap();
        let env = CliEnv {
            vars: [("NETRC".to_owned(), path.display().to_string())].into(),
            ..CliEnv::default()
        };
        let (netrc, warning) = Netrc::load(&env);
        assert!(netrc.is_none());
        let warning = warning.unwrap();
        assert!(!warning.is_error());
        assert!(
            warning
                .detail
                .starts_with(&format!("{}, line 2: expected", path.display())),
            "{}",
            warning.detail
        );

        let home = CliEnv {
            profile_dir: Some(dir.path().to_path_buf()),
            ..CliEnv::default()
        };
        assert_eq!(Netrc::load(&home), (None, None));
        std::fs::write(dir.path().join(".netrc"), "machine a login x password y").unwrap();
        let (netrc, warning) = Netrc::load(&home);
        assert!(warning.is_none());
        assert_eq!(auth(&netrc.unwrap(), "https://a/"), basic("x", "y"));
    }

    #[test]
    fn debug_output_names_machines_but_no_secrets() {
        let netrc = parse("machine a login x password hunter2").unwrap();
        let shown = format!("{netrc:?}");
        assert!(shown.contains("\"a\""), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
