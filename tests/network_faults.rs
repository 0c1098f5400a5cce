//! Network faults on the archive download, injected by the test server,
//! through the binary: retries with backoff, `Range` resumption, the stall
//! timeout, error pages instead of archives, and credentials kept from other
//! hosts on redirects. Retry delays and the stall timeout are lowered with
//! init's flags so every test is quick; every run is bounded in time.

mod support;

use std::time::Duration;

use rand::{RngCore as _, SeedableRng as _};
use support::hardening::{
    Channel, NAMESPACE, Origin, Project, TYPE, assert_unchanged, output_text,
};
use support::{Compression, Fault, Response, TestServer, ZipEntry, build_zip};

const EXE: &str = "terraform-provider-null_v1.0.0";
const VERSION: &str = "1.0.0";
/// Network channels; a filesystem mirror has no network to fail.
const NETWORK: [Channel; 2] = [Channel::NetworkMirror, Channel::Registry];
/// Retry quickly: the delays are not what these tests are about.
const QUICK: &str = "-download-retry-delay=10ms";

/// A stored (so incompressible and large on the wire) package: 256 KiB of
/// pseudo-random executable, so faults can strike mid-body.
fn large_executable() -> Vec<u8> {
    let mut data = vec![0u8; 256 * 1024];
    rand::rngs::StdRng::seed_from_u64(9).fill_bytes(&mut data);
    data
}

fn large_package() -> Vec<u8> {
    build_zip(
        &[ZipEntry::executable(EXE, large_executable())],
        Compression::Stored,
    )
}

struct Case {
    origin: Origin,
    project: Project,
}

impl Case {
    fn new(origin: Origin) -> Self {
        origin.publish(&[(VERSION, large_package())]);
        let project = Project::new();
        project.require(&origin.source(), VERSION);
        Case { origin, project }
    }

    fn archive(&self) -> String {
        self.origin.archive_path(VERSION)
    }

    fn server(&self) -> &TestServer {
        self.origin.server()
    }

    fn run(&self, args: &[&str]) -> (std::process::ExitStatus, String, String) {
        let mut command = self.project.init(args);
        self.origin.configure(&self.project, &mut command);
        let output = command.output().unwrap();
        let (stdout, stderr) = output_text(&output);
        (output.status, stdout, stderr)
    }

    /// Runs init expecting success, and checks the package arrived whole.
    fn installs(&self, args: &[&str]) {
        let (status, stdout, stderr) = self.run(args);
        assert!(
            status.success(),
            "{:?}: {status:?}\n{stdout}\n{stderr}",
            self.origin.channel
        );
        let installed = self
            .project
            .package_dir(&self.origin.host(), VERSION)
            .join(EXE);
        assert!(
            std::fs::read(&installed).unwrap() == large_executable(),
            "{:?}: the installed executable differs from the published one",
            self.origin.channel
        );
        assert!(!self.project.staging_dir().exists());
    }

    /// Runs init expecting failure, leaving the working directory as it
    /// was; returns standard error, which must name the provider.
    fn fails(&self, args: &[&str]) -> String {
        self.fails_with_status(args).1
    }

    /// [`Case::fails`], with the exit status.
    fn fails_with_status(&self, args: &[&str]) -> (std::process::ExitStatus, String) {
        let before = self.project.snapshot();
        let (status, stdout, stderr) = self.run(args);
        assert!(
            !status.success(),
            "{:?} must fail:\n{stdout}\n{stderr}",
            self.origin.channel
        );
        assert!(
            stderr.contains(&format!("{NAMESPACE}/{TYPE} v{VERSION}")),
            "{:?}: the error must name the provider:\n{stderr}",
            self.origin.channel
        );
        assert_unchanged(
            &before,
            &self.project.snapshot(),
            &format!("{:?}", self.origin.channel),
        );
        (status, stderr)
    }
}

#[test]
fn server_errors_on_the_archive_are_retried_until_it_arrives() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server()
            .status_sequence(&case.archive(), &[503, 500, 429, 200]);
        case.installs(&[QUICK]);
        assert_eq!(case.server().count(&case.archive()), 4, "{channel:?}");
    }
}

/// A server that says when to come back is believed (up to a minute), as
/// Terraform's HTTP client believes it, instead of the usual backoff.
#[test]
fn retry_after_is_honoured() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        let busy = Response::text("busy\n")
            .status(503)
            .header("retry-after", "1");
        case.server()
            .fault_sequence(&case.archive(), [Fault::Respond(busy), Fault::Pass]);
        let started = std::time::Instant::now();
        case.installs(&[QUICK]);
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "retried before the second the server asked for"
        );
        assert_eq!(case.server().count(&case.archive()), 2, "{channel:?}");
    }
}

#[test]
fn persistent_server_errors_fail_after_the_configured_retries() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server().fault(&case.archive(), Fault::Status(502));
        let stderr = case.fails(&[QUICK, "-download-retries=2"]);
        assert!(
            stderr.contains("127.0.0.1: bad response code: 502 (gave up after 3 attempts)"),
            "{stderr}"
        );
        assert_eq!(case.server().count(&case.archive()), 3, "{channel:?}");
    }
}

#[test]
fn client_errors_on_the_archive_are_not_retried() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server().fault(&case.archive(), Fault::Status(404));
        let stderr = case.fails(&[QUICK]);
        assert!(
            stderr.contains("127.0.0.1: bad response code: 404\n"),
            "{stderr}"
        );
        assert_eq!(case.server().count(&case.archive()), 1, "{channel:?}");
    }
}

/// A body cut short resumes where it stopped when the server takes ranges.
/// Over HTTP/1.1 the bytes before the close all arrive, so the offset is
/// exact; over HTTP/2 a reset may discard frames still queued, so the
/// download resumes from whatever did arrive (from the start if nothing).
#[test]
fn a_truncated_download_resumes_with_range() {
    for channel in NETWORK {
        let case = Case::new(Origin::http1(channel));
        case.server().enable_ranges();
        case.server()
            .fault_sequence(&case.archive(), [Fault::TruncateAfter(100_000)]);
        case.installs(&[QUICK]);
        let requests = case.server().requests_to(&case.archive());
        assert_eq!(requests.len(), 2, "{channel:?}");
        assert_eq!(requests[0].header("range"), None);
        assert_eq!(requests[1].header("range"), Some("bytes=100000-"));

        let case = Case::new(Origin::new(channel));
        case.server().enable_ranges();
        case.server()
            .fault_sequence(&case.archive(), [Fault::TruncateAfter(100_000)]);
        case.installs(&[QUICK]);
        let requests = case.server().requests_to(&case.archive());
        assert_eq!(requests.len(), 2, "{channel:?}");
        if let Some(range) = requests[1].header("range") {
            let offset: u64 = range
                .strip_prefix("bytes=")
                .and_then(|rest| rest.strip_suffix('-'))
                .and_then(|offset| offset.parse().ok())
                .unwrap_or_else(|| panic!("unexpected Range {range:?}"));
            assert!(
                offset > 0 && offset <= 100_000,
                "{channel:?}: resumed at {offset}"
            );
        }
    }
}

#[test]
fn a_truncated_download_without_range_support_starts_over() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server()
            .fault_sequence(&case.archive(), [Fault::TruncateAfter(100_000)]);
        case.installs(&[QUICK]);
        let requests = case.server().requests_to(&case.archive());
        assert_eq!(requests.len(), 2, "{channel:?}");
        assert!(requests.iter().all(|r| r.header("range").is_none()));
    }
}

#[test]
fn a_connection_dropped_before_the_body_is_retried() {
    for channel in NETWORK {
        let case = Case::new(Origin::http1(channel));
        case.server().fault_sequence(
            &case.archive(),
            [Fault::TruncateAfter(0), Fault::TruncateAfter(0)],
        );
        case.installs(&[QUICK]);
        assert_eq!(case.server().count(&case.archive()), 3, "{channel:?}");
    }
}

#[test]
fn truncations_that_persist_fail_with_a_clear_error() {
    for channel in NETWORK {
        let case = Case::new(Origin::http1(channel));
        case.server()
            .fault(&case.archive(), Fault::TruncateAfter(10_000));
        let stderr = case.fails(&[QUICK, "-download-retries=1"]);
        assert!(
            stderr.contains("error decoding response body: ")
                && stderr.contains("(gave up after 2 attempts)"),
            "{stderr}"
        );
        assert_eq!(case.server().count(&case.archive()), 2, "{channel:?}");
    }
}

/// A connection reset mid-body (an RST after 64 KiB: `SO_LINGER` 0, then
/// close) is retried like any broken download, over HTTP/2 and HTTP/1.1 on
/// TLS and over plain HTTP (a registry may hand out `http://` archive
/// URLs); and when the resets persist, the run fails with exit status 1
/// and a message naming the reset. The run never dies of the SIGPIPE a
/// write to the reset socket raises when SIGPIPE is not ignored (issue 31).
#[test]
fn a_connection_reset_mid_download_is_retried_and_never_kills_the_run() {
    const RESET: Fault = Fault::ResetAfter(64 * 1024);
    let persistent = |case: &Case, server: &TestServer, what: &str| {
        server.fault(&case.archive(), RESET);
        let (status, stderr) = case.fails_with_status(&[QUICK, "-download-retries=1"]);
        assert_eq!(status.code(), Some(1), "{what}: {status:?}\n{stderr}");
        assert!(
            stderr.to_lowercase().contains("connection reset")
                && stderr.contains("(gave up after 2 attempts)"),
            "{what}: {stderr}"
        );
    };
    for channel in NETWORK {
        for start in [Origin::new, Origin::http1] {
            let case = Case::new(start(channel));
            case.server().fault_sequence(&case.archive(), [RESET]);
            case.installs(&[QUICK]);
            assert_eq!(case.server().count(&case.archive()), 2, "{channel:?}");
            let case = Case::new(start(channel));
            persistent(&case, case.server(), &format!("{channel:?}"));
        }
    }
    let over_plain_http = || {
        let case = Case::new(Origin::new(Channel::Registry));
        let plain = TestServer::http();
        plain.serve_dir(case.origin.site());
        case.server().fault(
            &case.archive(),
            Fault::Redirect {
                status: 307,
                location: plain.url_for(&case.archive()),
            },
        );
        (case, plain)
    };
    let (case, plain) = over_plain_http();
    plain.fault_sequence(&case.archive(), [RESET]);
    case.installs(&[QUICK]);
    assert_eq!(plain.count(&case.archive()), 2);
    let (case, plain) = over_plain_http();
    persistent(&case, &plain, "plain HTTP");
}

/// A server that stops sending, or sends a piece well within every stall
/// timeout but only 500 bytes a second, is given up on (and retried).
#[test]
fn a_stalled_or_trickling_download_is_abandoned_after_the_stall_timeout() {
    let trickle = Fault::Trickle {
        bytes: 10,
        every: Duration::from_millis(20),
    };
    for (fault, says) in [
        (
            Fault::StallAfter(50_000),
            "no data received for 400ms; the server stalled (if it is just slow, raise the limit with -download-stall-timeout",
        ),
        (
            trickle,
            "less than 1024 bytes a second; the server is trickling data and the download would not finish (if the link is really this slow, fetch the package another way and install it from a mirror with -plugin-dir)",
        ),
    ] {
        for channel in NETWORK {
            let case = Case::new(Origin::new(channel));
            case.server().fault(&case.archive(), fault.clone());
            let stderr = case.fails(&[
                QUICK,
                "-download-retries=1",
                "-download-stall-timeout=400ms",
            ]);
            assert!(
                stderr.contains(says) && stderr.contains("(gave up after 2 attempts)"),
                "{stderr}"
            );
            assert_eq!(case.server().count(&case.archive()), 2, "{channel:?}");
        }
    }
}

/// The environment variables set the same limits as the flags.
#[test]
fn a_server_that_never_answers_is_abandoned() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server()
            .fault(&case.archive(), Fault::Latency(Duration::from_secs(600)));
        let mut command = case.project.init(&[]);
        case.origin.configure(&case.project, &mut command);
        let before = case.project.snapshot();
        let output = command
            .env("TFINSTALL_DOWNLOAD_STALL_TIMEOUT", "300ms")
            .env("TFINSTALL_DOWNLOAD_RETRIES", "0")
            .output()
            .unwrap();
        let (_, stderr) = output_text(&output);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("no data received for 300ms"), "{stderr}");
        assert_eq!(case.server().count(&case.archive()), 1, "{channel:?}");
        assert_unchanged(&before, &case.project.snapshot(), "never answers");
    }
}

#[test]
fn a_stalled_download_resumes_after_the_stall_timeout() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server().enable_ranges();
        case.server()
            .fault_sequence(&case.archive(), [Fault::StallAfter(64 * 1024)]);
        case.installs(&[QUICK, "-download-stall-timeout=400ms"]);
        let requests = case.server().requests_to(&case.archive());
        assert_eq!(requests.len(), 2, "{channel:?}");
        assert_eq!(requests[1].header("range"), Some("bytes=65536-"));
    }
}

const ERROR_PAGE: &str = "<!DOCTYPE html>\n<html><head><title>Service Unavailable</title></head><body>Try later</body></html>\n";

#[test]
fn an_html_page_sent_as_html_is_a_clear_error_and_not_retried() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server().fault(
            &case.archive(),
            Fault::Respond(Response::bytes("text/html; charset=utf-8", ERROR_PAGE)),
        );
        let stderr = case.fails(&[QUICK]);
        assert!(
            stderr.contains(
                "the server sent \"text/html; charset=utf-8\" instead of a provider package"
            ),
            "{stderr}"
        );
        assert_eq!(case.server().count(&case.archive()), 1, "{channel:?}");
    }
}

/// Proxies and misconfigured servers send error pages with status 200 and
/// whatever content type the path suggests.
#[test]
fn an_html_page_sent_as_a_zip_is_a_clear_error() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server().fault(
            &case.archive(),
            Fault::Respond(Response::bytes("application/zip", ERROR_PAGE)),
        );
        let stderr = case.fails(&[QUICK]);
        assert!(
            stderr.contains("the server sent an HTML page instead of a provider package"),
            "{stderr}"
        );
        assert_eq!(case.server().count(&case.archive()), 1, "{channel:?}");
    }
}

#[test]
fn json_sent_instead_of_the_archive_is_a_clear_error() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        case.server().fault(
            &case.archive(),
            Fault::Respond(Response::json(r#"{"errors":["not found"]}"#)),
        );
        let stderr = case.fails(&[QUICK]);
        assert!(
            stderr.contains("the server sent \"application/json\" instead of a provider package"),
            "{stderr}"
        );
    }
}

/// An archive larger than the package size limit is refused before it is
/// downloaded (its length is announced), and never retried.
#[test]
fn an_archive_over_the_size_limit_is_refused() {
    for channel in NETWORK {
        let case = Case::new(Origin::new(channel));
        let stderr = case.fails(&[QUICK, "-max-package-size=100KiB"]);
        assert!(
            stderr.contains("127.0.0.1: the archive is larger than 102400 bytes")
                && stderr.contains("-max-package-size"),
            "{stderr}"
        );
        assert_eq!(case.server().count(&case.archive()), 1, "{channel:?}");
    }
}

/// The registry's token goes to the registry host only: every document and
/// the archive are redirected to another host, which must never see it.
#[test]
fn credentials_never_follow_a_redirect_to_another_host() {
    let origin = Origin::new(Channel::Registry);
    origin.publish(&[(VERSION, large_package())]);
    let other = TestServer::https(&origin.ca);
    other.serve_dir(origin.site());
    let platform = support::current_platform();
    let (os, arch) = platform.split_once('_').unwrap();
    let redirected = [
        format!("/v1/providers/{NAMESPACE}/{TYPE}/versions"),
        format!("/v1/providers/{NAMESPACE}/{TYPE}/{VERSION}/download/{os}/{arch}"),
        origin.archive_path(VERSION),
    ];
    for path in &redirected {
        origin.server().fault(
            path,
            Fault::Redirect {
                status: 307,
                location: other.url_for(path),
            },
        );
    }

    let project = Project::new();
    project.require(&origin.source(), VERSION);
    let config = project.root().join("credentials.tfrc");
    std::fs::write(
        &config,
        format!(
            "credentials \"{}\" {{\n  token = \"s3cret-token\"\n}}\n",
            origin.host()
        ),
    )
    .unwrap();
    let mut command = project.init(&[]);
    origin.configure(&project, &mut command);
    let output = command.env("TF_CLI_CONFIG_FILE", &config).output().unwrap();
    let (stdout, stderr) = output_text(&output);
    assert!(output.status.success(), "{stdout}\n{stderr}");

    let versions = origin.server().requests_to(&redirected[0]);
    assert_eq!(
        versions[0].header("authorization"),
        Some("Bearer s3cret-token"),
        "the registry host itself gets the token"
    );
    for path in &redirected {
        assert_eq!(other.count(path), 1, "{path} was not redirected");
    }
    for request in other.requests() {
        assert_eq!(
            request.header("authorization"),
            None,
            "{} on the other host carried credentials",
            request.path
        );
    }
    for request in origin.server().requests_to(&redirected[2]) {
        assert_eq!(request.header("authorization"), None, "archive request");
    }
}

/// A download cannot go faster than the HTTP/2 window per round trip, so
/// with hyper's default of 2 MiB an aws-sized archive from a server 50 ms
/// away crawled at about 30 MB/s. The windows are read from the first
/// frames each command sends on a connection: its SETTINGS (the window of
/// each response) and the WINDOW_UPDATE on stream 0 (the connection's).
/// Every command that reaches a registry builds its client in one place
/// (`http::build_client`, which `serve` uses too); each is checked here.
#[test]
fn http2_windows_let_a_large_download_run_at_full_speed_far_from_the_server() {
    let ca = support::TestCa::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = std::sync::Arc::new(ca.server_config(&[b"h2"]));
    let (found, windows) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let connection = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, stream);
            if let Ok(opened) = http2_windows(&mut tls) {
                let _ = found.send(opened);
            }
        }
    });
    let mut project = support::Project::requiring(&[("aws", "registry.test/acme/aws", "1.0.0")]);
    project.trust(&ca);
    project.cli_config(&support::host_block(
        "registry.test",
        &format!("https://127.0.0.1:{port}/v1/providers/"),
    ));
    let cache = project.dir("cache");
    project.env("TF_PLUGIN_CACHE_DIR", &cache);
    let mirror = project.dir("mirror");
    let mirror = mirror.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["init"],
        &["providers", "lock"],
        &["providers", "mirror", mirror],
        &["cache", "warm"],
    ];
    for args in commands {
        while windows.try_recv().is_ok() {}
        let _ = project
            .command(args)
            .timeout(Duration::from_secs(60))
            .output();
        let (stream, connection) = windows
            .try_recv()
            .unwrap_or_else(|_| panic!("{args:?} opened no HTTP/2 connection"));
        // 8 MiB a response: the unpacker's pace (about 185 MB/s of archive)
        // up to 45 ms away. Terraform's Go client allows 4 MiB.
        assert!(stream >= 8 << 20, "{args:?}: stream window {stream}");
        assert!(
            connection >= 2 * stream,
            "{args:?}: connection window {connection}"
        );
    }
}

/// Reads a client's connection preface and frames up to its first request:
/// the initial window of each stream and the connection's window.
fn http2_windows(tls: &mut impl std::io::Read) -> std::io::Result<(u32, u32)> {
    // RFC 9113: both windows start at 65,535 bytes.
    let (mut stream, mut connection) = (65_535u32, 65_535u32);
    let mut preface = [0u8; 24];
    tls.read_exact(&mut preface)?;
    loop {
        let mut header = [0u8; 9];
        tls.read_exact(&mut header)?;
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let (kind, flags) = (header[3], header[4]);
        let stream_id =
            u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & !(1 << 31);
        let mut payload = vec![0u8; len];
        tls.read_exact(&mut payload)?;
        match kind {
            // SETTINGS, not an acknowledgement: SETTINGS_INITIAL_WINDOW_SIZE.
            0x4 if flags & 0x1 == 0 => {
                for setting in payload.chunks_exact(6) {
                    if u16::from_be_bytes([setting[0], setting[1]]) == 0x4 {
                        stream =
                            u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
                    }
                }
            }
            // WINDOW_UPDATE on the connection.
            0x8 if stream_id == 0 && payload.len() == 4 => {
                connection += u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            }
            // HEADERS: the first request; every window is announced before it.
            0x1 => return Ok((stream, connection)),
            _ => {}
        }
    }
}

/// `TFINSTALL_LOG=debug` logs every request as it goes out, each attempt of
/// a retry too: what a user asks for to see where a run's time or its
/// failures went.
#[test]
fn debug_logging_names_every_request_and_each_retry() {
    let case = Case::new(Origin::new(Channel::Registry));
    case.server().status_sequence(&case.archive(), &[503, 200]);
    let mut command = case.project.init(&[QUICK]);
    case.origin.configure(&case.project, &mut command);
    command.env("TFINSTALL_LOG", "tfinstall=debug");
    let output = command.output().unwrap();
    let (_, stderr) = output_text(&output);
    assert!(output.status.success(), "{stderr}");
    let logged = |path: &str| {
        stderr
            .lines()
            .filter(|line| line.contains("request") && line.ends_with(path))
            .count()
    };
    assert_eq!(logged(&case.archive()), 2, "{stderr}");
    assert_eq!(
        logged(&format!("/v1/providers/{NAMESPACE}/{TYPE}/versions")),
        1,
        "{stderr}"
    );
}
