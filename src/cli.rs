//! Command-line parsing. Terraform spells long flags with one dash
//! (`-plugin-dir=DIR`); clap wants two, so arguments are respelled before
//! parsing and both spellings work, letting tfinstall replace `terraform init`
//! in existing scripts.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::{Args, CommandFactory as _, Parser, Subcommand};

use crate::engine::Engine;
use crate::install::layout::LayoutKind;
use crate::install::link::{LinkMode, ModuleLinkMode};

pub use crate::install::context::DEFAULT_PARALLELISM;

#[derive(Debug, Parser)]
#[command(
    name = "tfinstall",
    version,
    about = "A fast, safe, standalone Terraform provider installer",
    long_about = "A fast, safe, standalone Terraform provider installer.\n\nIt does the provider half of `terraform init`: reads the configuration's \
required providers and the CLI configuration, selects versions, honours \
.terraform.lock.hcl, and downloads, verifies and installs the packages.\n\n\
Flags take Terraform's one-dash spelling (-upgrade) or the two-dash one (--upgrade)."
)]
pub struct Cli {
    /// Switch to DIR before doing anything else, as Terraform's -chdir does.
    #[arg(long, value_name = "DIR", global = true)]
    pub chdir: Option<PathBuf>,

    /// Install as `opentofu` or `terraform` would; by default as OpenTofu
    /// when the root module has any *.tofu or *.tofu.json file, or a lock
    /// file whose every entry is on registry.opentofu.org.
    #[arg(
        long,
        value_enum,
        value_name = "ENGINE",
        global = true,
        env = "TFINSTALL_ENGINE"
    )]
    pub engine: Option<Engine>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Install the modules and providers the configuration in the working directory needs.
    #[command(
        long_about = "Install the modules and providers the configuration in the working directory needs.\n\n\
Installs the modules the configuration calls into .terraform/modules, as \
terraform init does (-get=false skips them; see docs/modules.md); then reads \
every *.tf and *.tf.json file in the working directory and its modules; picks \
one version per provider (the one recorded in .terraform.lock.hcl unless \
-upgrade is given); installs it below .terraform (or $TF_DATA_DIR); and \
records the selections in .terraform.lock.hcl, which is rewritten only when \
its content changes.\n\n\
Providers come from the -plugin-dir directories when any are given; else from \
the provider_installation block of the CLI configuration ($TF_CLI_CONFIG_FILE \
or ~/.terraformrc); else from terraform.d/plugins, ~/.terraform.d/plugins and \
the XDG data directories, then from each provider's registry.\n\n\
A directory with no configuration files is reported as empty, as Terraform \
reports it, and nothing is written there.\n\n\
Package downloads (and a network mirror's index documents) carry HTTP Basic \
credentials from .netrc ($NETRC or ~/.netrc) for their host, as Terraform 1.11 \
sends them; registry API calls never do.",
        after_long_help = "Examples:\n  \
tfinstall init\n  \
tfinstall init -plugin-dir=/srv/terraform-mirror -lockfile=readonly\n  \
tfinstall -chdir=infra init -upgrade -layout=providers\n  \
tfinstall init -json | jq -c 'select(.event == \"installed\")'\n  \
tfinstall init live/prod live/staging modules/*/examples/*\n\n\
Exit status is 0 when every provider is installed and 1 otherwise; a failed \
run leaves .terraform and the lock file as they were. With several \
directories, each succeeds or fails on its own, and the exit status is 1 if \
any failed."
    )]
    Init(InitArgs),
    /// Install the modules the configuration in the working directory calls.
    #[command(
        long_about = "Install the modules the configuration in the working directory calls, as `terraform get` does: every module call of the root module and, recursively, of each installed module, into .terraform/modules (or $TF_DATA_DIR/modules), recorded in modules.json. Modules already installed whose source and version still hold are kept; -update looks again at every remote module. Providers are left alone (tfinstall init installs both).",
        after_long_help = "Examples:\n  \
tfinstall get\n  \
tfinstall -chdir=infra get -update\n\n\
Exit status is 0 when every module is installed and 1 otherwise; a failed run leaves .terraform/modules as it was."
    )]
    Get(GetArgs),
    /// Show the providers the configuration requires, module by module.
    ///
    /// Prints the module tree as `terraform providers` does: each module's
    /// providers with the version constraints written there, and under each
    /// provider the declarations and resources that made it required, with
    /// file and line. Then the versions selected in .terraform.lock.hcl.
    #[command(after_help = "Examples:\n  \
tfinstall providers\n  \
tfinstall -chdir=infra providers -json | jq -r 'select(.type == \"provider_requirements\") | .modules[].providers[].provider'")]
    Providers(ProvidersArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Fill the plugin cache ahead of time, check it for damage, report on
    /// it and prune it.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Serve providers to a fleet as a pull-through provider network mirror.
    #[command(
        long_about = "Serve providers to a fleet as a pull-through provider network mirror.\n\n\
Answers Terraform's provider network mirror protocol over HTTPS, so unmodified \
terraform and tofu clients install through it with \
provider_installation { network_mirror { url = \"https://HOST:PORT/\" } }. \
Packages come from the upstream sources of this machine's CLI configuration \
(registries, with the signature check init makes; network and OCI mirrors), \
each fetched once however many clients ask at the same moment, verified, and \
kept in the store, which has the plugin cache's layout. Version documents list \
every platform's zh: hashes from the signed SHA256SUMS and, once a package has \
been through the server, its h1:.\n\n\
Only providers of allowed hosts are served: by default the public registries \
and the hosts the CLI configuration names (host and credentials blocks, \
include patterns); -allow replaces that list. Requests for other hosts get 403 \
with no upstream request. With -policy, version lists leave out what the \
provider policy denies, and a denied version or refused package gets 403 \
with the rule, as JSON (docs/policy.md).",
        after_long_help = "Examples:\n  \
tfinstall serve -listen=0.0.0.0:8443 -tls-cert=mirror.pem -tls-key=mirror-key.pem\n  \
tfinstall serve -listen=127.0.0.1:0 -tls-cert=c.pem -tls-key=k.pem -platform=linux_amd64 -allow='registry.terraform.io/hashicorp/*' -auth-token-file=tokens -json\n\n\
GET /healthz answers 200 while the server runs; GET /readyz 200 while it \
should get clients (503 from SIGTERM on); GET /metrics in Prometheus' format. \
SIGTERM or SIGINT, after -drain-delay, stops it taking connections and lets the \
requests in flight finish. SIGHUP reopens the -access-log file."
    )]
    Serve(ServeArgs),
    /// Run the command that follows tfinstall (`terraform init`) with the
    /// installed providers handed to it, so that it asks no registry.
    #[command(
        long_about = "Run the command that follows tfinstall (`terraform init`, `tofu init`) with the installed providers handed to it, so that it asks no registry or mirror about them.\n\n\
The command runs with TF_CLI_CONFIG_FILE naming a CLI configuration made for \
this one run: yours (credentials, host blocks, credentials helper, plugin cache, \
installation methods), with a filesystem_mirror first that offers each provider \
of the lock file from where tfinstall installed it for this platform (the plugin \
cache when one is configured, else the working directory's .terraform). Your \
methods still serve every other provider. The file is readable by you only and \
removed when the command ends. The working directory is the current one, or the \
command's own -chdir=DIR.\n\n\
Nothing is handed over with -upgrade (which asks for newer versions) or \
-plugin-dir, or without a lock file; the command then runs as it would without \
tfinstall. A package that no longer matches the lock file makes the command fail, \
as Terraform fails on it; another version is never chosen.",
        after_long_help = "Examples:\n  \
tfinstall init && tfinstall exec -- terraform init -input=false\n  \
tfinstall -chdir=infra exec -- terraform init\n  \
tfinstall exec -- terraform -chdir=infra init\n  \
TFINSTALL_ENGINE=opentofu tfinstall exec -- tofu init\n\n\
Exit status is the command's (128+N when signal N ended it), or 1 when it \
could not be started."
    )]
    Exec(ExecArgs),
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The command to run and its arguments, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Download into the plugin cache every provider package the
    /// configurations in DIR… (default: the working directory) need, for
    /// each -platform, without creating any .terraform directory.
    #[command(after_help = "Examples:\n  \
TF_PLUGIN_CACHE_DIR=/opt/tf-cache tfinstall cache warm -platform=linux_amd64 -platform=linux_arm64 infra/ app/\n\n\
A later `tfinstall init` whose lock file pins the cached versions needs no network at all.")]
    Warm(CacheWarmArgs),
    /// Re-hash every cache entry tfinstall made and report any that changed.
    Verify(CacheVerifyArgs),
    /// Show what the plugin cache (or a serve store) holds and what it takes.
    #[command(
        long_about = "Show what the plugin cache (or a serve store) holds and what it takes.\n\nLists each provider with its cached versions, the entries (one per version and platform), the bytes the cache takes on disk (allocated blocks, each file once, as du -s reports them), the bytes its hard links into working directories save (what those links would take as copies), and the oldest and newest last use. An entry's last use is the last tfinstall run that installed from it, filled it, warmed it or served it; Terraform's own runs are not seen.",
        after_long_help = "Examples:\n  \
tfinstall cache stats\n  \
tfinstall cache stats -cache-dir=/srv/tfinstall-store -json | jq .bytes_on_disk"
    )]
    Stats(CacheStatsArgs),
    /// Remove cache entries no run needs any more.
    #[command(
        long_about = "Remove cache entries no run needs any more.\n\nAn entry (one provider version for one platform) is removed when it matches every criterion given: -unused-for (no tfinstall run used it for that long), -keep-latest (not among the N newest versions of its provider for its platform), -keep-lock-file (not selected by any of those lock files). At least one is required.\n\nSafe beside running installs: an entry a run is using is skipped and reported, and each removal is atomic (renamed out of place, then deleted), so a crash leaves no half entry and the next prune finishes the job. Working directories that hard-link an entry keep their files (the bytes stay on disk until the last link goes); installs made with -link-mode=symlink, and Terraform's own installs from the cache, point into it and break when their entry goes.",
        after_long_help = "Examples:\n  \
tfinstall cache prune -unused-for=30d\n  \
tfinstall cache prune -keep-latest=2 -dry-run\n  \
tfinstall cache prune -unused-for=14d -keep-lock-file='/srv/repos/*/.terraform.lock.hcl'\n  \
tfinstall cache prune -cache-dir=/srv/tfinstall-store -unused-for=90d -json\n\nExit status is 0 when every entry selected was removed or skipped as in use, and 1 on bad flags, unreadable lock files or a removal that failed."
    )]
    Prune(CachePruneArgs),
}

#[derive(Debug, Args)]
pub struct CacheStatsArgs {
    /// The cache directory (or serve store) to look at; default: the
    /// configured plugin cache, or the module cache alone when only
    /// TFINSTALL_MODULE_CACHE_DIR is set.
    #[arg(long = "cache-dir", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// One JSON object instead of text (see docs/json-output.md).
    #[arg(long)]
    pub json: bool,

    /// Disable coloured output.
    #[arg(long = "no-color")]
    pub no_color: bool,
}

#[derive(Debug, Args)]
pub struct CachePruneArgs {
    /// Remove only entries no run has used for this long: a number with
    /// s, m, h, d or w, or several (30d, 1w, 36h, 1d12h).
    #[arg(long = "unused-for", value_name = "DURATION", value_parser = crate::units::parse_age)]
    pub unused_for: Option<std::time::Duration>,

    /// Keep the N newest versions of each provider for each platform.
    #[arg(long = "keep-latest", value_name = "N", value_parser = crate::units::parse_positive)]
    pub keep_latest: Option<u64>,

    /// Keep the versions this lock file selects (repeatable; a glob such as
    /// 'repos/*/.terraform.lock.hcl' names every file it matches).
    #[arg(long = "keep-lock-file", value_name = "PATH|GLOB")]
    pub keep_lock_files: Vec<String>,

    /// Only report what would be removed.
    #[arg(long = "dry-run")]
    pub dry_run: bool,

    /// The cache directory (or serve store) to prune; default: the
    /// configured plugin cache, or the module cache alone when only
    /// TFINSTALL_MODULE_CACHE_DIR is set.
    #[arg(long = "cache-dir", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// One JSON object instead of text (see docs/json-output.md).
    #[arg(long)]
    pub json: bool,

    /// Disable coloured output.
    #[arg(long = "no-color")]
    pub no_color: bool,
}

#[derive(Debug, Args)]
pub struct CacheWarmArgs {
    /// Platform to cache packages for (repeatable); default: this one.
    #[arg(long = "platform", value_name = "OS_ARCH")]
    pub platforms: Vec<String>,

    /// Take packages only from these directories, as `init -plugin-dir` does.
    #[arg(long = "plugin-dir", value_name = "DIR")]
    pub plugin_dirs: Vec<PathBuf>,

    /// How many packages to fetch at once.
    #[arg(long, default_value_t = DEFAULT_PARALLELISM, value_name = "N")]
    pub parallelism: usize,

    /// Disable coloured output.
    #[arg(long = "no-color")]
    pub no_color: bool,

    /// Provider policy file: which providers and versions may be installed,
    /// and how trusted their packages must be (docs/policy.md).
    #[arg(long, value_name = "FILE", env = "TFINSTALL_POLICY")]
    pub policy: Option<PathBuf>,

    /// Configuration directories whose providers to cache.
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on; port 0 picks a free one.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,

    /// PEM certificate chain the server presents (HTTPS only: Terraform
    /// requires it for mirrors).
    #[arg(long = "tls-cert", value_name = "FILE")]
    pub tls_cert: PathBuf,

    /// PEM private key of the certificate.
    #[arg(long = "tls-key", value_name = "FILE")]
    pub tls_key: PathBuf,

    /// Directory to keep packages in; default: the plugin cache directory
    /// if one is configured, else tfinstall's directory in the user's
    /// cache directory. `oci://HOST[:PORT]/TEMPLATE` shares packages with
    /// other servers through an OCI registry (the layout of `providers
    /// mirror oci://`), beside the default directory.
    #[arg(long, value_name = "DIR")]
    pub store: Option<PathBuf>,

    /// Platform to serve (repeatable); default: every platform upstream
    /// offers.
    #[arg(long = "platform", value_name = "OS_ARCH")]
    pub platforms: Vec<String>,

    /// Provider pattern to serve (repeatable; include syntax, such as
    /// `registry.terraform.io/hashicorp/*`); replaces the default list.
    #[arg(long = "allow", value_name = "PATTERN")]
    pub allow: Vec<String>,

    /// Provider policy file: which providers and versions may be installed,
    /// and how trusted their packages must be (docs/policy.md).
    #[arg(long, value_name = "FILE", env = "TFINSTALL_POLICY")]
    pub policy: Option<PathBuf>,

    /// File of bearer tokens, one a line; every request must carry one.
    #[arg(long = "auth-token-file", value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// How many packages to fetch from upstream at once.
    #[arg(long = "max-fills", default_value_t = 8, value_name = "N")]
    pub max_fills: usize,

    /// Largest archive fetched from upstream, and largest size a package
    /// may unpack to (bytes, or with a unit: 512MiB, 4GiB).
    #[arg(long, value_name = "BYTES", env = "TFINSTALL_MAX_PACKAGE_SIZE",
          default_value = "2GiB", value_parser = crate::units::parse_size)]
    pub max_package_size: u64,

    /// How long a provider's version list (and upstream's other answers
    /// about what it publishes) is answered before upstream is asked again
    /// (ms, s or m).
    #[arg(long = "metadata-max-age", value_name = "DURATION", default_value = "5m",
          value_parser = crate::units::parse_duration)]
    pub metadata_max_age: std::time::Duration,

    /// How long a failed upstream answer (an error status, a 404, a timeout,
    /// a document that does not parse) is answered before upstream is asked
    /// again.
    #[arg(long = "failure-max-age", value_name = "DURATION", default_value = "5s",
          value_parser = crate::units::parse_duration)]
    pub failure_max_age: std::time::Duration,

    /// Longest a client may take over its TLS handshake.
    #[arg(long = "tls-handshake-timeout", value_name = "DURATION", default_value = "10s",
          value_parser = crate::units::parse_duration)]
    pub tls_handshake_timeout: std::time::Duration,

    /// Longest a client may take to send a request's headers (HTTP/1.1),
    /// from when the connection is ready for it: an idle keep-alive
    /// connection is closed after it too.
    #[arg(long = "header-timeout", value_name = "DURATION", default_value = "10s",
          value_parser = crate::units::parse_duration)]
    pub header_timeout: std::time::Duration,

    /// Longest a connection may stay open with no request in flight.
    #[arg(long = "idle-timeout", value_name = "DURATION", default_value = "60s",
          value_parser = crate::units::parse_duration)]
    pub idle_timeout: std::time::Duration,

    /// One JSON object per line for each request and event.
    #[arg(long)]
    pub json: bool,

    /// File to append the access log to (one line per request), reopened
    /// on SIGHUP; default: standard output.
    #[arg(long = "access-log", value_name = "FILE")]
    pub access_log: Option<PathBuf>,

    /// The access log's format: Apache's `combined`, or `json`; default:
    /// `json` with -json, else `combined`.
    #[arg(long = "access-log-format", value_name = "FORMAT")]
    pub access_log_format: Option<AccessLogFormat>,

    /// Also answer GET /metrics, /healthz and /readyz on this address, in
    /// plain HTTP, and /metrics only there.
    #[arg(long = "metrics-listen", value_name = "ADDR:PORT")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// File of bearer tokens, one a line, one of which GET /metrics must
    /// carry; default: /metrics is open.
    #[arg(long = "metrics-token-file", value_name = "FILE")]
    pub metrics_token_file: Option<PathBuf>,

    /// On SIGTERM, how long to go on taking connections, with /readyz
    /// answering 503, before no new ones are taken (so load balancers
    /// stop sending clients first): 10s, 1m.
    #[arg(long = "drain-delay", value_name = "DURATION", default_value = "0s",
          value_parser = crate::units::parse_age)]
    pub drain_delay: std::time::Duration,
}

/// `serve -access-log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AccessLogFormat {
    /// Apache's combined format.
    Combined,
    /// One JSON object a line.
    Json,
}

#[derive(Debug, Args)]
pub struct CacheVerifyArgs {
    /// Disable coloured output.
    #[arg(long = "no-color")]
    pub no_color: bool,
}

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// Record in .terraform.lock.hcl the checksums of the configuration's
    /// providers for each given platform, as `terraform providers lock` does.
    Lock(ProvidersLockArgs),
    /// Copy the configuration's providers into DIR as a filesystem mirror
    /// that any static web server can also serve as a network mirror, or
    /// publish them to an OCI registry (oci://…) for oci_mirror.
    ///
    /// Each platform's entry in the network mirror's VERSION.json lists the
    /// h1: and zh: hashes verified for its archive, so an OpenTofu client
    /// with trust_all_hashes can lock every platform from one install.
    Mirror(ProvidersMirrorArgs),
    /// Check the lock files, and the packages installed, of DIR… (default:
    /// the working directory) against the provider policy, without the
    /// network.
    #[command(
        long_about = "Check the lock files, and the packages installed, of DIR… (default: the working directory) against the provider policy, without the network.\n\n\
Every entry of each .terraform.lock.hcl is checked against the policy's allow and deny rules, and every package installed in .terraform (or $TF_DATA_DIR) is also checked against its trust rules, with how tfinstall recorded it was authenticated when it installed it (a package installed by something else has no such record, and counts as unauthenticated). One line is printed per violation, and the exit status is 1 if there is any.",
        after_long_help = "Examples:\n  \
tfinstall providers check -policy=policy.hcl\n  \
TFINSTALL_POLICY=/etc/tfinstall/policy.hcl tfinstall providers check live/*\n  \
tfinstall providers check -policy=policy.hcl -json | jq -c 'select(.type == \"policy\" and .allowed == false)'"
    )]
    Check(ProvidersCheckArgs),
}

#[derive(Debug, Args)]
pub struct ProvidersCheckArgs {
    /// Provider policy file to check against (docs/policy.md).
    #[arg(long, value_name = "FILE", env = "TFINSTALL_POLICY")]
    pub policy: Option<PathBuf>,

    /// One JSON object per line: each decision, then the result (see
    /// docs/json-output.md).
    #[arg(long)]
    pub json: bool,

    /// Working directories to check; default: the current one.
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProvidersLockArgs {
    /// Target platform to obtain checksums for (repeatable); default: this one.
    #[arg(long = "platform", value_name = "OS_ARCH")]
    pub platforms: Vec<String>,

    /// Consult this filesystem mirror directory instead of the origin registries.
    #[arg(long = "fs-mirror", value_name = "DIR")]
    pub fs_mirror: Option<String>,

    /// Consult this network mirror (an https: base URL) instead of the origin registries.
    #[arg(long = "net-mirror", value_name = "URL")]
    pub net_mirror: Option<String>,

    /// How many providers to fetch at once for each platform.
    #[arg(long, default_value_t = DEFAULT_PARALLELISM, value_name = "N")]
    pub parallelism: usize,

    /// Disable coloured output.
    #[arg(long = "no-color")]
    pub no_color: bool,

    /// Provider policy file: which providers and versions may be installed,
    /// and how trusted their packages must be (docs/policy.md).
    #[arg(long, value_name = "FILE", env = "TFINSTALL_POLICY")]
    pub policy: Option<PathBuf>,

    /// Lock only these providers (source addresses such as hashicorp/aws).
    #[arg(value_name = "PROVIDER")]
    pub providers: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ProvidersMirrorArgs {
    /// Target platform to mirror packages for (repeatable); default: this one.
    #[arg(long = "platform", value_name = "OS_ARCH")]
    pub platforms: Vec<String>,

    /// Set to false to mirror the newest acceptable versions even when
    /// .terraform.lock.hcl selects others.
    #[arg(
        long = "lock-file",
        value_name = "BOOL",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub lock_file: bool,

    /// How many packages to fetch at once.
    #[arg(long, default_value_t = DEFAULT_PARALLELISM, value_name = "N")]
    pub parallelism: usize,

    /// Make no network request: copy from the plugin cache, filesystem
    /// mirrors and implied local directories; packages held only unpacked
    /// are written in the unpacked layout (HOST/NS/TYPE/VERSION/OS_ARCH).
    #[arg(long, env = "TFINSTALL_OFFLINE", value_parser = clap::builder::BoolishValueParser::new())]
    pub offline: bool,

    /// Disable coloured output.
    #[arg(long = "no-color")]
    pub no_color: bool,

    /// Provider policy file: which providers and versions may be installed,
    /// and how trusted their packages must be (docs/policy.md).
    #[arg(long, value_name = "FILE", env = "TFINSTALL_POLICY")]
    pub policy: Option<PathBuf>,

    /// The mirror directory, or an OCI registry to publish to as
    /// 'oci://HOST[:PORT]/REPOSITORY' with ${namespace}, ${type} and
    /// ${hostname} in REPOSITORY (exactly one).
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Search only this directory for providers (repeatable); no registry is contacted.
    /// A single empty `-plugin-dir=` forgets the list a previous run saved.
    #[arg(
        long = "plugin-dir",
        value_name = "DIR",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub plugin_dirs: Vec<PathBuf>,

    /// Ignore versions recorded in the lock file and pick the newest acceptable
    /// ones, and look again at every remote module.
    #[arg(long)]
    pub upgrade: bool,

    /// -get=false skips installing modules: the ones in .terraform/modules
    /// (listed in modules.json) are read as they are.
    #[arg(
        long,
        value_name = "BOOL",
        default_value = "true",
        hide_default_value = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub get: bool,

    /// Set to "readonly" to check the lock file without ever changing it.
    #[arg(long, value_name = "MODE")]
    pub lockfile: Option<String>,

    /// A platform whose checksums every lock entry this run records must
    /// hold too, besides this machine's (repeatable). Default: the list in
    /// TFINSTALL_LOCK_PLATFORMS, else in the nearest .tfinstall-platforms
    /// (see docs/lock-platforms.md).
    #[arg(long = "platform", value_name = "OS_ARCH")]
    pub platforms: Vec<String>,

    /// Where to install: `plugins` (.terraform/plugins, read by Terraform 0.13;
    /// the default with Terraform) or `providers` (.terraform/providers, read
    /// by Terraform 0.14 and later and by OpenTofu; the default with OpenTofu).
    #[arg(long, value_enum)]
    pub layout: Option<LayoutKind>,

    /// How many providers to fetch at once.
    #[arg(long, default_value_t = DEFAULT_PARALLELISM, value_name = "N")]
    pub parallelism: usize,

    /// How packages from the plugin cache are placed in .terraform: `auto`
    /// (hard links to tfinstall's read-only cache files, copies where links
    /// are refused or the files are writable), `hardlink`, `symlink` (as
    /// Terraform does) or `copy`.
    #[arg(
        long = "link-mode",
        value_enum,
        default_value = "auto",
        value_name = "MODE"
    )]
    pub link_mode: LinkMode,

    /// How module packages from the module cache are placed in
    /// .terraform/modules: `auto` (hard links to the cache's read-only
    /// files, copies where links are refused) or `copy` (writable copies,
    /// for a module that edits its own files).
    #[arg(
        long = "module-link-mode",
        value_enum,
        default_value = "auto",
        value_name = "MODE",
        env = "TFINSTALL_MODULE_LINK_MODE"
    )]
    pub module_link_mode: ModuleLinkMode,

    /// Make no network request: choose among the versions in the plugin
    /// cache, -plugin-dir directories, filesystem mirrors and implied local
    /// directories (the newest allowed, or the locked one).
    #[arg(long, env = "TFINSTALL_OFFLINE", value_parser = clap::builder::BoolishValueParser::new())]
    pub offline: bool,

    /// Largest size one provider package may unpack to (bytes, or with a
    /// unit: 512MiB, 4GiB); stops decompression bombs.
    #[arg(long, value_name = "BYTES", env = "TFINSTALL_MAX_PACKAGE_SIZE",
          default_value = "2GiB", value_parser = crate::units::parse_size)]
    pub max_package_size: u64,

    /// Most entries (files and directories) one provider package may hold.
    #[arg(long, value_name = "N", env = "TFINSTALL_MAX_PACKAGE_FILES",
          default_value = "10000", value_parser = crate::units::parse_positive)]
    pub max_package_files: u64,

    /// Most an archive entry may inflate relative to its compressed size
    /// (checked once it passes 1 MiB).
    #[arg(long, value_name = "N", env = "TFINSTALL_MAX_COMPRESSION_RATIO",
          default_value = "200", value_parser = crate::units::parse_positive)]
    pub max_compression_ratio: u64,

    /// How often a failed archive download is retried (5xx, resets, short bodies, stalls).
    #[arg(long, value_name = "N", env = "TFINSTALL_DOWNLOAD_RETRIES",
          default_value = "3", value_parser = crate::units::parse_count)]
    pub download_retries: u32,

    /// Wait before the first download retry, doubled for each further one (up to 30s).
    #[arg(long, value_name = "DURATION", env = "TFINSTALL_DOWNLOAD_RETRY_DELAY",
          default_value = "1s", value_parser = crate::units::parse_duration)]
    pub download_retry_delay: std::time::Duration,

    /// Abandon a download attempt when no data arrives for this long (e.g. 30s, 500ms).
    #[arg(long, value_name = "DURATION", env = "TFINSTALL_DOWNLOAD_STALL_TIMEOUT",
          default_value = "30s", value_parser = crate::units::parse_duration)]
    pub download_stall_timeout: std::time::Duration,

    /// Disable coloured output (also: the NO_COLOR environment variable).
    #[arg(long = "no-color")]
    pub no_color: bool,

    /// Print one JSON object per line instead of text, for CI and other
    /// programs: the lines of `terraform init -json` (Terraform 1.9 and
    /// later) with tfinstall's fields added, plus tfinstall's own messages;
    /// the format is described in docs/json-output.md.
    #[arg(long)]
    pub json: bool,

    /// Accepted for compatibility with `terraform init`; tfinstall never asks for input.
    #[arg(
        long,
        value_name = "BOOL",
        default_value = "true",
        hide_default_value = true
    )]
    pub input: String,

    /// Provider policy file: which providers and versions may be installed,
    /// and how trusted their packages must be (docs/policy.md).
    #[arg(long, value_name = "FILE", env = "TFINSTALL_POLICY")]
    pub policy: Option<PathBuf>,

    /// Working directories to initialise in one run, each exactly as
    /// `tfinstall -chdir=DIR init` would; version lists and packages are
    /// fetched once for all of them. None means the current directory.
    #[arg(value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// Look again at every remote module: the newest version each call
    /// allows, each git ref fetched again.
    #[arg(long)]
    pub update: bool,

    /// How many module packages to fetch at once.
    #[arg(long, default_value_t = DEFAULT_PARALLELISM, value_name = "N")]
    pub parallelism: usize,

    /// How module packages from the module cache are placed in
    /// .terraform/modules: `auto` (hard links to the cache's read-only
    /// files) or `copy` (writable copies).
    #[arg(
        long = "module-link-mode",
        value_enum,
        default_value = "auto",
        value_name = "MODE",
        env = "TFINSTALL_MODULE_LINK_MODE"
    )]
    pub module_link_mode: ModuleLinkMode,

    /// Disable coloured output (also: the NO_COLOR environment variable).
    #[arg(long = "no-color")]
    pub no_color: bool,
}

/// `providers` alone prints the requirement tree; its subcommands do other
/// jobs with the same requirements.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ProvidersArgs {
    #[command(subcommand)]
    pub command: Option<ProvidersCommand>,

    /// Disable coloured output (also: the NO_COLOR environment variable).
    #[arg(long = "no-color")]
    pub no_color: bool,

    /// Print the requirements as JSON (see docs/json-output.md).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
tfinstall completions bash > ~/.local/share/bash-completion/completions/tfinstall\n  \
tfinstall completions zsh > \"${fpath[1]}/_tfinstall\"\n  \
tfinstall completions fish > ~/.config/fish/completions/tfinstall.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Each command's page in the docs, named at the end of its long help
/// (`--help`) so that the help and the docs point at each other. Paths are
/// relative to the repository, which is what a user has; a subcommand
/// (`cache warm`) has its command's page unless [`SUBCOMMAND_PAGES`] names
/// one of its own.
pub const DOC_PAGES: [(&str, &str); 7] = [
    ("init", "docs/init.md"),
    ("get", "docs/modules.md"),
    ("exec", "docs/handoff.md"),
    ("providers", "docs/providers.md"),
    ("cache", "docs/cache.md"),
    ("serve", "docs/serve.md"),
    ("completions", "README.md#commands"),
];

/// Subcommands documented on a page other than their command's.
const SUBCOMMAND_PAGES: [(&str, &str, &str); 1] = [("providers", "check", "docs/policy.md")];

/// The page that documents `sub` of `command`, whose own page is `page`.
fn page_of(command: &str, sub: &str, page: &'static str) -> &'static str {
    SUBCOMMAND_PAGES
        .iter()
        .find(|(c, s, _)| *c == command && *s == sub)
        .map_or(page, |(_, _, own)| own)
}

/// The parser: [`Cli`]'s, with each command's page from [`DOC_PAGES`] (and
/// the index for `tfinstall --help`) at the end of its long help.
pub fn command() -> clap::Command {
    let mut cli = with_page(Cli::command(), "README.md and docs/README.md");
    for (name, page) in DOC_PAGES {
        cli = cli.mut_subcommand(name, |command| {
            let names: Vec<String> = command
                .get_subcommands()
                .map(|sub| sub.get_name().to_owned())
                .collect();
            let mut command = with_page(command, page);
            for sub in names {
                let page = page_of(name, &sub, page);
                command = command.mut_subcommand(sub, |command| with_page(command, page));
            }
            command
        });
    }
    cli
}

/// `command` with `page` named after the rest of its long help.
fn with_page(command: clap::Command, page: &str) -> clap::Command {
    let line = format!("Documentation: {page} in tfinstall's repository.");
    let help = match command
        .get_after_long_help()
        .or_else(|| command.get_after_help())
    {
        Some(help) => format!("{help}\n\n{line}"),
        None => line,
    };
    command.after_long_help(help)
}

/// Respells `-name` and `-name=value` as `--name…` for every argument before a
/// lone `--`, and before the command that `exec` runs (whose flags are its
/// own). Single-letter flags (`-h`, `-V`) are left alone.
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut passthrough = false;
    let mut seen_subcommand = false;
    for (i, arg) in args.into_iter().enumerate() {
        if i == 0 || passthrough {
            out.push(arg);
            continue;
        }
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" || (text == "exec" && !seen_subcommand) {
            passthrough = true;
            out.push(arg);
            continue;
        }
        if !text.starts_with('-') {
            seen_subcommand = true;
        }
        let name = text
            .strip_prefix('-')
            .filter(|rest| !rest.starts_with('-'))
            .map(|rest| rest.split('=').next().unwrap_or_default());
        match name {
            Some(name) if name.len() > 1 && name.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                out.push(OsString::from(format!("-{text}")));
            }
            _ => out.push(arg),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(args: &[&str]) -> Vec<String> {
        normalize_args(args.iter().map(OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn each_commands_long_help_names_its_page() {
        let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let cli = command();
        for command in cli.get_subcommands() {
            let (_, page) = DOC_PAGES
                .iter()
                .find(|(name, _)| *name == command.get_name())
                .unwrap_or_else(|| panic!("no page in DOC_PAGES for {}", command.get_name()));
            let mut commands = vec![(*page, command.clone())];
            commands.extend(command.get_subcommands().map(|sub| {
                let page = page_of(command.get_name(), sub.get_name(), page);
                (page, sub.clone())
            }));
            for (page, mut command) in commands {
                let file = page.split('#').next().unwrap_or_default();
                assert!(repository.join(file).is_file(), "{page}");
                let help = command.render_long_help().to_string();
                assert!(
                    help.contains(&format!("Documentation: {page} in tfinstall's repository.")),
                    "{help}"
                );
            }
        }
    }

    #[test]
    fn single_dash_long_flags_are_respelled() {
        assert_eq!(
            norm(&[
                "tfinstall",
                "-chdir=x",
                "init",
                "-plugin-dir=/a",
                "-upgrade",
                "--no-color",
                "-h"
            ]),
            [
                "tfinstall",
                "--chdir=x",
                "init",
                "--plugin-dir=/a",
                "--upgrade",
                "--no-color",
                "-h"
            ]
        );
    }

    #[test]
    fn the_command_exec_runs_keeps_its_spelling() {
        assert_eq!(
            norm(&[
                "t",
                "-chdir=x",
                "exec",
                "terraform",
                "-chdir=y",
                "init",
                "-upgrade"
            ]),
            [
                "t",
                "--chdir=x",
                "exec",
                "terraform",
                "-chdir=y",
                "init",
                "-upgrade"
            ]
        );
        // A directory named exec is not the subcommand.
        assert_eq!(
            norm(&["t", "init", "exec", "-upgrade"]),
            ["t", "init", "exec", "--upgrade"]
        );
    }

    #[test]
    fn arguments_after_double_dash_are_untouched() {
        assert_eq!(
            norm(&["t", "init", "--", "-upgrade"]),
            ["t", "init", "--", "-upgrade"]
        );
    }

    /// The flags' defaults are spelled as text for `--help`; they must stay
    /// the limits the library documents.
    #[test]
    fn limit_defaults_match_the_library_defaults() {
        let cli = Cli::parse_from(["tfinstall", "init"]);
        let Command::Init(args) = cli.command else {
            panic!("expected init");
        };
        let limits = crate::package::extract::ExtractLimits::default();
        assert_eq!(args.max_package_size, limits.max_total_bytes);
        assert_eq!(args.max_package_files, limits.max_entries);
        assert_eq!(args.max_compression_ratio, limits.max_ratio);
        let download = crate::fetch::DownloadSettings::default();
        assert_eq!(args.download_retries, download.retries);
        assert_eq!(args.download_retry_delay, download.backoff);
        assert_eq!(args.download_stall_timeout, download.stall_timeout);
        assert_eq!(args.max_package_size, download.max_bytes);
    }

    #[test]
    fn parses_terraform_spelling() {
        let cli = Cli::parse_from(normalize_args(
            [
                "tfinstall",
                "init",
                "-plugin-dir=a",
                "-plugin-dir",
                "b",
                "-lockfile=readonly",
                "-input=false",
            ]
            .iter()
            .map(OsString::from),
        ));
        let Command::Init(args) = cli.command else {
            panic!("expected init");
        };
        assert_eq!(args.plugin_dirs, [PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(args.lockfile.as_deref(), Some("readonly"));
    }

    #[test]
    fn providers_subcommands_take_terraform_spelling() {
        let cli = Cli::parse_from(normalize_args(
            [
                "tfinstall",
                "providers",
                "lock",
                "-platform=linux_amd64",
                "-platform",
                "darwin_arm64",
                "-fs-mirror=m",
                "hashicorp/null",
            ]
            .iter()
            .map(OsString::from),
        ));
        let Command::Providers(ProvidersArgs {
            command: Some(ProvidersCommand::Lock(args)),
            ..
        }) = cli.command
        else {
            panic!("expected providers lock");
        };
        assert_eq!(args.platforms, ["linux_amd64", "darwin_arm64"]);
        assert_eq!(args.fs_mirror.as_deref(), Some("m"));
        assert_eq!(args.providers, ["hashicorp/null"]);

        let cli = Cli::parse_from(normalize_args(
            [
                "tfinstall",
                "providers",
                "mirror",
                "-lock-file=false",
                "out",
            ]
            .iter()
            .map(OsString::from),
        ));
        let Command::Providers(ProvidersArgs {
            command: Some(ProvidersCommand::Mirror(args)),
            ..
        }) = cli.command
        else {
            panic!("expected providers mirror");
        };
        assert!(!args.lock_file);
        assert_eq!(args.dirs, [PathBuf::from("out")]);
    }
}
