//! A fleet of real Terraform clients through `tfinstall serve`, against the
//! same clients going straight to the registry.
//!
//! ```text
//! cargo bench --bench serve                          # 20 clients, 4 at a time, 10 × 20 MB
//! cargo bench --bench serve -- --clients 8 --size-mb 5 --client terraform
//! ```
//!
//! The registry stands for the public one as a CI network sees it: every
//! response but the archives waits `--latency-ms` (50) before its headers,
//! and each archive download is held to `--download-mbps` (20 MB/s, per
//! download). The clients are Terraform 1.0.3 from PyPI (`--client
//! terraform` takes the `terraform` on PATH instead), in fresh directories
//! with no plugin cache, `--concurrency` (4) at a time. Through the server,
//! the store is warmed by one client first (untimed), as a fleet's server
//! is; upstream archive requests are counted at the registry in both
//! phases, and the server's peak RSS is read from /proc when the fleet is
//! done. Fixtures are signed with an ECDSA key (Terraform 1.0 cannot verify
//! EdDSA). The table goes to stdout and `bench/serve-results.md`; work
//! files live in `bench/.work-serve`.
//!
//! `--throughput N` measures the server instead of a fleet: with the store
//! warmed, N requests (each provider's version list, version document and
//! archive, in turn) from `--concurrency` HTTP/2 clients at once, and the
//! requests and bytes a second they got; `--serve-bin PATH` runs another
//! build of tfinstall (an older commit's, to compare). The registry is not
//! slowed for it. It prints its figures and writes no file.
//!
//! ```text
//! cargo bench --bench serve -- --throughput 6000 --concurrency 16 --size-mb 1 --serve-bin /tmp/tfinstall-before
//! ```
//!
//! Under `cargo test --benches` (no `--bench` argument) it does nothing.

#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::terraform::Terraform;
use support::{Fault, PgpKey, ProviderSpec, Registry, TestCa, TestServer};

const HOST: &str = "registry.bench";
const NAMESPACE: &str = "bench";
const VERSION: &str = "1.0.0";
const MB: usize = 1 << 20;

struct Options {
    clients: usize,
    concurrency: usize,
    providers: usize,
    size_mb: usize,
    latency: Duration,
    download_mbps: usize,
    client: PathBuf,
    /// `--throughput N`: measure the server with N requests instead.
    throughput: Option<usize>,
    serve_bin: PathBuf,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options {
            clients: 20,
            concurrency: 4,
            providers: 10,
            size_mb: 20,
            latency: Duration::from_millis(50),
            download_mbps: 20,
            client: PathBuf::new(),
            throughput: None,
            serve_bin: PathBuf::from(env!("CARGO_BIN_EXE_tfinstall")),
        };
        let mut client = "terraform-1.0.3".to_owned();
        let mut args = args.iter().filter(|a| *a != "--bench");
        while let Some(flag) = args.next() {
            let mut value = || args.next().cloned().ok_or(format!("{flag} needs a value"));
            let number = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
            match flag.as_str() {
                "--clients" => options.clients = number(value()?)?,
                "--concurrency" => options.concurrency = number(value()?)?,
                "--providers" => options.providers = number(value()?)?,
                "--size-mb" => options.size_mb = number(value()?)?,
                "--latency-ms" => options.latency = Duration::from_millis(number(value()?)? as u64),
                "--download-mbps" => options.download_mbps = number(value()?)?,
                "--client" => client = value()?,
                "--throughput" => options.throughput = Some(number(value()?)?),
                "--serve-bin" => options.serve_bin = PathBuf::from(value()?),
                other => return Err(format!("unknown option {other}")),
            }
        }
        options.client = match client.as_str() {
            "terraform-1.0.3" => Terraform::V1_0_3.path(),
            "terraform" => PathBuf::from("terraform"),
            other => PathBuf::from(other),
        };
        Ok(options)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|arg| arg == "--bench") {
        println!("benches/serve.rs: run with `cargo bench --bench serve`");
        return;
    }
    let options = Options::parse(&args).unwrap_or_else(|err| {
        eprintln!("error: {err}");
        std::process::exit(2);
    });
    let work = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/.work-serve");
    if work.exists() {
        fs::remove_dir_all(&work).expect("clear bench/.work-serve");
    }
    fs::create_dir_all(&work).expect("create bench/.work-serve");

    let ca = TestCa::new();
    let registry_server = TestServer::https(&ca);
    let types: Vec<String> = (0..options.providers).map(|i| format!("p{i:02}")).collect();
    eprint!("building signed fixtures… ");
    let registry = types
        .iter()
        .fold(Registry::new(&PgpKey::generate_ecdsa()), |r, t| {
            r.provider(
                ProviderSpec::new(NAMESPACE, t, VERSION)
                    .hostname(HOST)
                    .payload(support::Payload::Random(options.size_mb * MB)),
            )
        });
    let site = work.join("registry");
    let tree = registry.write(&site, &registry_server.url());
    registry_server.serve_dir(&site);
    eprintln!("done");
    let platform = support::current_platform();
    let host_block = format!(
        "host {HOST:?} {{\n  services = {{\n    \"providers.v1\" = {:?}\n  }}\n}}\n",
        registry_server.url_for("/v1/providers/")
    );
    if let Some(requests) = options.throughput {
        let server = start_serve(
            &options.serve_bin,
            &ca,
            &work,
            &work.join("store"),
            &host_block,
        );
        throughput(
            &server,
            &ca,
            &types,
            &platform,
            requests,
            options.concurrency,
        );
        return;
    }
    registry_server.fault("*", Fault::Latency(options.latency));
    let archives: Vec<String> = types
        .iter()
        .map(|t| {
            tree.package(t, VERSION, &platform)
                .url_path
                .clone()
                .unwrap()
        })
        .collect();
    for archive in &archives {
        registry_server.fault(archive, Fault::Throttle(options.download_mbps * MB));
    }
    let archive_bytes: u64 = types
        .iter()
        .map(|t| {
            fs::metadata(&tree.package(t, VERSION, &platform).path)
                .unwrap()
                .len()
        })
        .sum();
    let fleet = Fleet {
        options: &options,
        ca: &ca,
        work: &work,
        types: &types,
    };
    let count_archives = || {
        registry_server
            .requests()
            .iter()
            .filter(|r| r.path.ends_with(".zip"))
            .count()
    };

    eprintln!(
        "direct: {} clients, {} at a time",
        options.clients, options.concurrency
    );
    registry_server.clear_log();
    let direct = fleet.run("direct", &host_block);
    let direct_archives = count_archives();

    let store = work.join("store");
    let server = start_serve(&options.serve_bin, &ca, &work, &store, &host_block);
    let mirror_config = format!(
        "provider_installation {{\n  network_mirror {{\n    url = {:?}\n  }}\n}}\n",
        server.url
    );
    registry_server.clear_log();
    eprintln!("warming the server's store with one client");
    let warm_started = Instant::now();
    fleet.client(&work.join("warm"), &mirror_config);
    let warm = warm_started.elapsed();
    let fill_archives = count_archives();
    registry_server.clear_log();
    eprintln!(
        "through serve: {} clients, {} at a time",
        options.clients, options.concurrency
    );
    let served = fleet.run("served", &mirror_config);
    let served_archives = count_archives();
    let serve_rss_kib = peak_rss_kib(server.child.id());
    drop(server);

    let direct_bytes = direct_archives as u64 * archive_bytes / options.providers as u64;
    let served_bytes =
        (fill_archives + served_archives) as u64 * archive_bytes / options.providers as u64;
    let mut out = String::new();
    let _ = writeln!(out, "## A fleet through `tfinstall serve`\n");
    let _ = writeln!(
        out,
        "{} clients ({}), {} at a time, fresh directories, no plugin cache; {} × {} MB providers; registry: {} ms before each response's headers, {} MB/s per archive download. Machine: {} CPUs, load average {} when the run ended.\n",
        options.clients,
        client_name(&options.client),
        options.concurrency,
        options.providers,
        options.size_mb,
        options.latency.as_millis(),
        options.download_mbps,
        std::thread::available_parallelism().map_or(0, usize::from),
        fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .unwrap_or("?")
    );
    let _ = writeln!(
        out,
        "| | direct to the registry | through `serve` | ratio |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: |");
    let _ = writeln!(
        out,
        "| fleet wall time | {:.1} s | {:.1} s | {:.1}× |",
        direct.as_secs_f64(),
        served.as_secs_f64(),
        direct.as_secs_f64() / served.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| upstream archive requests | {direct_archives} | {} ({fill_archives} to fill the store, {served_archives} during the fleet) | {:.0}× |",
        fill_archives + served_archives,
        direct_archives as f64 / (fill_archives + served_archives).max(1) as f64
    );
    let _ = writeln!(
        out,
        "| upstream archive bytes | {:.0} MB | {:.0} MB | {:.0}× |",
        direct_bytes as f64 / MB as f64,
        served_bytes as f64 / MB as f64,
        direct_bytes as f64 / served_bytes.max(1) as f64
    );
    let _ = writeln!(
        out,
        "\nFilling the store took {:.1} s (one client, untimed above). Peak RSS of `serve` over the whole run: {:.1} MB.",
        warm.as_secs_f64(),
        serve_rss_kib as f64 / 1024.0
    );
    println!("\n{out}");
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/serve-results.md");
    fs::write(&results, &out).expect("write bench/serve-results.md");
    println!("written to {}", results.display());
}

struct Fleet<'a> {
    options: &'a Options,
    ca: &'a TestCa,
    work: &'a Path,
    types: &'a [String],
}

impl Fleet<'_> {
    /// All the clients, `concurrency` at a time; the wall time of the whole.
    fn run(&self, name: &str, config: &str) -> Duration {
        let started = Instant::now();
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..self.options.concurrency {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        if i >= self.options.clients {
                            break;
                        }
                        self.client(&self.work.join(name).join(format!("c{i:02}")), config);
                    }
                });
            }
        });
        started.elapsed()
    }

    /// One `terraform init` in a fresh directory `dir`.
    fn client(&self, dir: &Path, config: &str) {
        fs::create_dir_all(dir).expect("create client dir");
        let mut main_tf = String::from("terraform {\n  required_providers {\n");
        for name in self.types {
            let _ = writeln!(
                main_tf,
                "    {name} = {{\n      source  = \"{HOST}/{NAMESPACE}/{name}\"\n      version = \"{VERSION}\"\n    }}"
            );
        }
        main_tf.push_str("  }\n}\n");
        fs::write(dir.join("main.tf"), main_tf).expect("write main.tf");
        let config_path = dir.with_extension("tfrc");
        fs::write(&config_path, config).expect("write CLI config");
        let home = dir.with_extension("home");
        fs::create_dir_all(&home).expect("create home");
        let output = Command::new(&self.options.client)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin:/usr/local/bin")
            .env("HOME", &home)
            .env("TF_CLI_CONFIG_FILE", &config_path)
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .env("SSL_CERT_FILE", self.ca.ca_pem_path())
            .args(["init", "-no-color", "-input=false"])
            .output()
            .expect("run the client");
        if !output.status.success() {
            panic!(
                "client init failed in {}:\n{}\n{}",
                dir.display(),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        // Each client's tree is large; keep the disk from filling.
        let _ = fs::remove_dir_all(dir.join(".terraform"));
    }
}

struct Serve {
    child: std::process::Child,
    url: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

fn start_serve(bin: &Path, ca: &TestCa, work: &Path, store: &Path, host_block: &str) -> Serve {
    let dir = work.join("serve");
    fs::create_dir_all(&dir).expect("create serve dir");
    let (cert, key) = ca.write_leaf_pem(&dir);
    let config = dir.join("upstream.tfrc");
    fs::write(&config, host_block).expect("write serve config");
    let home = dir.join("home");
    fs::create_dir_all(&home).expect("create serve home");
    let mut child = Command::new(bin)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("TF_CLI_CONFIG_FILE", &config)
        .env("SSL_CERT_FILE", ca.ca_pem_path())
        .args(["serve", "-listen=127.0.0.1:0"])
        .arg(format!("-tls-cert={}", cert.display()))
        .arg(format!("-tls-key={}", key.display()))
        .arg(format!("-store={}", store.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start tfinstall serve");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut first = String::new();
    stdout
        .read_line(&mut first)
        .expect("read serve's first line");
    let url = first
        .trim()
        .strip_prefix("Serving providers on ")
        .unwrap_or_else(|| panic!("serve did not start: {first}"))
        .to_owned();
    // Keep reading, so a full pipe never blocks the server.
    std::thread::spawn(move || for _ in stdout.lines() {});
    Serve { child, url }
}

/// `--throughput`: every archive filled first, then `requests` requests
/// from `concurrency` tasks sharing one HTTP/2 client; prints requests and
/// megabytes a second, and the server's CPU time over the timed part.
fn throughput(
    server: &Serve,
    ca: &TestCa,
    types: &[String],
    platform: &str,
    requests: usize,
    concurrency: usize,
) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.ca_pem().as_bytes()).unwrap()])
        .build()
        .expect("client");
    let urls: Vec<String> = types
        .iter()
        .flat_map(|t| {
            let base = format!("{}{HOST}/{NAMESPACE}/{t}", server.url);
            [
                format!("{base}/index.json"),
                format!("{base}/{VERSION}.json"),
                format!("{base}/terraform-provider-{t}_{VERSION}_{platform}.zip"),
            ]
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    eprintln!("warming the store");
    runtime.block_on(async {
        for url in &urls {
            fetch(client.clone(), url.clone()).await;
        }
    });
    let cpu_before = cpu_seconds(server.child.id());
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let bytes: u64 = runtime.block_on(async {
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (next, urls, client) = (next.clone(), urls.clone(), client.clone());
                tokio::spawn(async move {
                    let mut bytes = 0;
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        if i >= requests {
                            return bytes;
                        }
                        bytes += fetch(client.clone(), urls[i % urls.len()].clone()).await;
                    }
                })
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await.expect("task");
        }
        total
    });
    let took = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(server.child.id()) - cpu_before;
    println!(
        "{requests} requests, {concurrency} at a time, {} providers: {took:.2} s, {:.0} requests/s, {:.1} MB/s, serve CPU {cpu:.2} s ({:.0} µs a request); load average {}",
        types.len(),
        requests as f64 / took,
        bytes as f64 / took / MB as f64,
        cpu * 1e6 / requests as f64,
        fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .unwrap_or("?")
    );
}

/// GETs `url`, which must answer 2xx; the body's length.
async fn fetch(client: reqwest::Client, url: String) -> u64 {
    let response = client.get(&url).send().await.expect("request");
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    response.bytes().await.expect("body").len() as u64
}

/// The process's user and system CPU time so far, from /proc (Linux).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    // SAFETY: sysconf only reads a configuration value.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// The process's peak resident set (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn client_name(client: &Path) -> String {
    let output = Command::new(client).arg("version").output();
    output
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_else(|| client.display().to_string())
}
