//! The access log: one line per request, in Apache's combined format (what
//! log tools read without being told anything) or as JSON, on standard
//! output or in a file that logrotate can move away (SIGHUP reopens it).
//!
//! A line names the token a request carried by its name in the token file,
//! never the token; the path is logged without its query, which for an
//! archive is a grant that opens it.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::future::Either;
use url::Url;

use super::metrics::CacheOutcome;
use super::route::Route;
use crate::cli::AccessLogFormat;
use crate::diag::Diagnostic;

/// One answered request.
pub struct AccessRecord<'a> {
    pub time: SystemTime,
    pub client: SocketAddr,
    pub method: &'a str,
    pub path: &'a str,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub protocol: &'a str,
    pub status: u16,
    pub bytes: u64,
    /// Until the response's headers (an archive then streams).
    pub duration: Duration,
    pub route: Option<&'a Route>,
    pub outcome: Option<CacheOutcome>,
    /// The name of the token that admitted the request.
    pub token: Option<&'a str>,
    /// The last upstream request this one caused, without its query.
    pub upstream: Option<&'a str>,
    pub referer: Option<&'a str>,
    pub user_agent: Option<&'a str>,
    /// Why a request was refused or failed.
    pub error: Option<&'a str>,
}

enum Sink {
    Stdout,
    File { path: PathBuf, file: std::fs::File },
}

pub struct AccessLog {
    format: AccessLogFormat,
    sink: Mutex<Sink>,
}

impl AccessLog {
    /// To `file` when given (appended to, created if missing), else to
    /// standard output.
    pub fn open(format: AccessLogFormat, file: Option<&Path>) -> Result<Self, Diagnostic> {
        let sink = match file {
            Some(path) => Sink::File {
                path: path.to_path_buf(),
                file: append(path)?,
            },
            None => Sink::Stdout,
        };
        Ok(AccessLog {
            format,
            sink: Mutex::new(sink),
        })
    }

    /// Opens the file anew (after logrotate moved it away); the old one is
    /// kept when the new one cannot be opened. Says what it did, for the
    /// server's log; `None` when the log goes to standard output.
    pub fn reopen(&self) -> Option<String> {
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        let Sink::File { path, file } = &mut *sink else {
            return None;
        };
        Some(match append(path) {
            Ok(fresh) => {
                *file = fresh;
                format!("access log reopened: {}", path.display())
            }
            Err(err) => format!("{}; still writing to the file it had", err.detail),
        })
    }

    pub fn write(&self, record: &AccessRecord<'_>) {
        let mut line = match self.format {
            AccessLogFormat::Combined => combined(record),
            AccessLogFormat::Json => json(record),
        };
        line.push('\n');
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        // One write a line: a file opened to append gets whole lines even
        // beside another writer, and a log that cannot be written does not
        // stop the server.
        let _ = match &mut *sink {
            Sink::Stdout => {
                let mut stdout = std::io::stdout().lock();
                stdout
                    .write_all(line.as_bytes())
                    .and_then(|()| stdout.flush())
            }
            Sink::File { file, .. } => file.write_all(line.as_bytes()),
        };
    }
}

fn append(path: &Path) -> Result<std::fs::File, Diagnostic> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|err| {
            Diagnostic::error(
                "Cannot open the access log",
                format!(
                    "Could not open the -access-log {} to append to: {err}. Name a file in a directory that exists and that you can write.",
                    path.display()
                ),
            )
        })
}

/// `HOST - TOKEN [TIME] "METHOD PATH PROTOCOL" STATUS BYTES "REFERER" "AGENT"`.
fn combined(record: &AccessRecord<'_>) -> String {
    let bytes = match record.bytes {
        0 => "-".to_owned(),
        bytes => bytes.to_string(),
    };
    format!(
        "{} - {} [{}] \"{} {} {}\" {} {bytes} \"{}\" \"{}\"",
        record.client.ip(),
        record.token.map_or_else(|| "-".to_owned(), escape),
        apache_time(record.time),
        record.method,
        escape(record.path),
        record.protocol,
        record.status,
        record.referer.map_or_else(|| "-".to_owned(), escape),
        record.user_agent.map_or_else(|| "-".to_owned(), escape),
    )
}

/// As Apache escapes a logged string: `"` and `\` with a backslash, other
/// bytes outside printable ASCII as `\xHH`, so a line stays one line.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(char::from(byte));
            }
            0x20..=0x7e => out.push(char::from(byte)),
            _ => out.push_str(&format!("\\x{byte:02x}")),
        }
    }
    out
}

/// `28/Nov/2026:20:49:03 +0000`, from the RFC 3339 time of the JSON output.
fn apache_time(time: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let stamp = crate::output::json::timestamp(time);
    let month = stamp[5..7].parse::<usize>().unwrap_or(1);
    format!(
        "{}/{}/{}:{} +0000",
        &stamp[8..10],
        MONTHS[month.clamp(1, 12) - 1],
        &stamp[0..4],
        &stamp[11..19]
    )
}

/// The `-json` request line (docs/json-output.md).
fn json(record: &AccessRecord<'_>) -> String {
    let (provider, version, platform) = match record.route {
        Some(Route::Index(p)) => (Some(p.to_string()), None, None),
        Some(Route::Version(p, v)) => (Some(p.to_string()), Some(v.to_string()), None),
        Some(Route::Archive(p, v, plat)) => (
            Some(p.to_string()),
            Some(v.to_string()),
            Some(plat.to_string()),
        ),
        _ => (None, None, None),
    };
    let mut event = serde_json::json!({
        "@level": if record.status >= 500 { "error" } else { "info" },
        "@message": format!("{} {} {}", record.method, record.path, record.status),
        "@timestamp": crate::output::json::timestamp(record.time),
        "type": "request",
        "client": record.client.to_string(),
        "method": record.method,
        "path": record.path,
        "protocol": record.protocol,
        "status": record.status,
        "bytes": record.bytes,
        "ms": record.duration.as_millis(),
    });
    for (key, value) in [
        ("provider", provider),
        ("version", version),
        ("platform", platform),
        ("cache", record.outcome.map(|o| o.as_str().to_owned())),
        ("token", record.token.map(str::to_owned)),
        ("upstream", record.upstream.map(str::to_owned)),
        ("user_agent", record.user_agent.map(str::to_owned)),
        ("error", record.error.map(str::to_owned)),
    ] {
        if let Some(value) = value {
            event[key] = value.into();
        }
    }
    event.to_string()
}

tokio::task_local! {
    /// The upstream URL the request being answered on this task caused
    /// last.
    static UPSTREAM: Arc<Mutex<Option<String>>>;
}

/// Runs `answer`, and gives the last upstream URL it caused.
pub async fn recording_upstream<F: Future>(answer: F) -> (F::Output, Option<String>) {
    let cell = Arc::new(Mutex::new(None));
    let output = UPSTREAM.scope(Arc::clone(&cell), answer).await;
    let upstream = cell.lock().unwrap_or_else(|e| e.into_inner()).take();
    (output, upstream)
}

/// `work` recording its upstream URLs for the request on this task, if
/// any: a fill runs on a task of its own, for the request that started it.
pub fn for_this_request<F: Future>(work: F) -> impl Future<Output = F::Output> {
    match UPSTREAM.try_with(Arc::clone) {
        Ok(cell) => Either::Left(UPSTREAM.scope(cell, work)),
        Err(_) => Either::Right(work),
    }
}

/// Notes an upstream request for the request being answered, if any.
pub(super) fn upstream_asked(url: &Url) {
    let _ = UPSTREAM.try_with(|cell| {
        let mut shown = url.clone();
        shown.set_query(None);
        shown.set_fragment(None);
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(shown.to_string());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(time: SystemTime) -> AccessRecord<'static> {
        AccessRecord {
            time,
            client: "192.0.2.7:50123".parse().unwrap(),
            method: "GET",
            path: "/registry.terraform.io/hashicorp/null/index.json",
            protocol: "HTTP/2.0",
            status: 200,
            bytes: 0,
            duration: Duration::from_millis(3),
            route: None,
            outcome: Some(CacheOutcome::Answered(super::super::mirror::Outcome::Hit)),
            token: Some("ci"),
            upstream: None,
            referer: None,
            user_agent: Some("Terraform/1.0.3 \"x\""),
            error: None,
        }
    }

    #[test]
    fn a_combined_line_is_apaches() {
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_899_543);
        assert_eq!(
            combined(&record(time)),
            "192.0.2.7 - ci [28/Nov/2026:20:59:03 +0000] \"GET /registry.terraform.io/hashicorp/null/index.json HTTP/2.0\" 200 - \"-\" \"Terraform/1.0.3 \\\"x\\\"\""
        );
        assert_eq!(escape("a\nb\u{e9}"), "a\\x0ab\\xc3\\xa9");
    }

    #[tokio::test]
    async fn upstream_urls_are_recorded_without_query_or_credentials() {
        let url = Url::parse("https://user:pw@cdn.test/pkg.zip?X-Signature=secret").unwrap();
        let ((), seen) = recording_upstream(async {
            tokio::spawn(for_this_request(async move { upstream_asked(&url) }))
                .await
                .unwrap();
        })
        .await;
        assert_eq!(seen.as_deref(), Some("https://cdn.test/pkg.zip"));
    }
}
