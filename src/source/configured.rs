//! Builds the one source the installer talks to from the CLI configuration
//! and flags, as Terraform's `internal/command/provider_source.go` does:
//! `-plugin-dir` replaces everything (the `terraform init` docs, "Plugin
//! Installation"); an explicit `provider_installation` block lists its
//! methods in order; with neither, the implied local directories come first
//! and the registry gets every provider they do not hold (the CLI
//! configuration docs, "Explicit Installation Method Configuration" and
//! "Implied Local Mirror Directories").

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use url::Url;

use crate::addr::pattern::{ProviderPattern, ProviderSelector};
use crate::addr::{Platform, ProviderAddr};
use crate::cliconfig::netrc::Netrc;
use crate::cliconfig::{CliConfig, CliEnv, Credentials, InstallMethod, MethodLocation};
use crate::diag::{Diagnostic, Diagnostics};
use crate::http::ApiClient;
use crate::memo::MemoPolicy;
use crate::source::Source;
use crate::source::discovery::{Discovery, TokenLookup};
use crate::source::filesystem::FilesystemMirror;
use crate::source::multi::{MultiSource, MultiSourceMethod};
use crate::source::network_mirror::NetworkMirror;
use crate::source::oci::credentials::OciCredentialStore;
use crate::source::oci::template::RepositoryTemplate;
use crate::source::oci::{OciMirror, Registries};
use crate::source::offline::OfflineSource;
use crate::source::registry::RegistrySource;
use crate::source::shared::SharedQueries;

pub struct SourceOptions<'a> {
    pub plugin_dirs: &'a [PathBuf],
    pub cli_config: &'a CliConfig,
    pub env: &'a CliEnv,
    /// Where tfinstall was started (before -chdir): the implied
    /// `terraform.d/plugins` directory is relative to it.
    pub launch_dir: &'a Path,
    /// The working directory the source is for: relative `-plugin-dir`
    /// and mirror paths are relative to it, as they are after `-chdir`.
    pub work_dir: &'a Path,
    pub network: &'a NetworkSources,
}

impl SourceOptions<'_> {
    fn local_path(&self, path: &Path) -> PathBuf {
        if path.is_relative() && self.work_dir != Path::new(".") {
            self.work_dir.join(path)
        } else {
            path.to_path_buf()
        }
    }
}

/// The registries and network mirrors of one run, built once: every working
/// directory of the run talks to the same ones, so that each question goes
/// out once however many directories ask it ([`SharedQueries`]), and one
/// discovery and one set of credentials serve them all.
pub struct NetworkSources {
    api: ApiClient,
    discovery: Arc<Discovery>,
    tokens: TokenLookup,
    netrc: Option<Arc<Netrc>>,
    registry: Arc<dyn Source>,
    /// By base URL and `trust_all_hashes`.
    mirrors: Mutex<HashMap<(Url, bool), Arc<dyn Source>>>,
    /// OCI registries (`oci_mirror`), with the credentials the CLI
    /// configuration and the Docker-style files give.
    oci: Arc<Registries>,
    /// How long every memo on the way upstream keeps its answers.
    memo_policy: MemoPolicy,
}

impl NetworkSources {
    /// The sources of one run: each question asked once, its answer kept
    /// for the run.
    pub fn new(cli_config: &CliConfig, env: &CliEnv, client: reqwest::Client) -> Self {
        Self::with_memo_policy(cli_config, env, client, MemoPolicy::PerRun)
    }

    /// The sources with every memo (credentials helper answers, discovery,
    /// version lists, download and checksum documents) keeping answers as
    /// `policy` says: `serve` lets them age.
    pub fn with_memo_policy(
        cli_config: &CliConfig,
        env: &CliEnv,
        client: reqwest::Client,
        policy: MemoPolicy,
    ) -> Self {
        let oci = Registries::new(
            client.clone(),
            Arc::new(OciCredentialStore::new(cli_config, env)),
        );
        let api = ApiClient::from_env(client);
        let tokens: TokenLookup =
            Arc::new(Credentials::new(cli_config, env).with_memo_policy(policy));
        let discovery = Arc::new(
            Discovery::new(
                &api,
                tokens.clone(),
                cli_config.hosts.clone(),
                discovery_memory(env),
            )
            .with_memo_policy(policy),
        );
        let registry =
            RegistrySource::new(discovery.clone(), api.clone(), cli_config.netrc.clone())
                .with_memo_policy(policy);
        NetworkSources {
            discovery,
            registry: Arc::new(SharedQueries::with_policy(Arc::new(registry), policy)),
            api,
            tokens,
            netrc: cli_config.netrc.clone(),
            mirrors: Mutex::new(HashMap::new()),
            oci: Arc::new(oci),
            memo_policy: policy,
        }
    }

    /// The run's service discovery (with its host blocks and credentials),
    /// for the module registry protocol.
    pub fn discovery(&self) -> Arc<Discovery> {
        self.discovery.clone()
    }

    /// The registry API client, with Terraform's timeout and retries.
    pub fn api(&self) -> ApiClient {
        self.api.clone()
    }

    pub fn oci_registries(&self) -> Arc<Registries> {
        self.oci.clone()
    }

    /// The origin registries (`direct`), one source for every host.
    pub fn registry(&self) -> Arc<dyn Source> {
        self.registry.clone()
    }

    pub fn network_mirror(&self, url: Url, trust_all_hashes: bool) -> Arc<dyn Source> {
        let mut mirrors = self.mirrors.lock().unwrap_or_else(|e| e.into_inner());
        mirrors
            .entry((url.clone(), trust_all_hashes))
            .or_insert_with(|| {
                let mirror = NetworkMirror::new(
                    url,
                    self.api.clone(),
                    self.tokens.clone(),
                    self.netrc.clone(),
                    trust_all_hashes,
                );
                Arc::new(SharedQueries::with_policy(
                    Arc::new(mirror),
                    self.memo_policy,
                ))
            })
            .clone()
    }
}

pub fn build_source(opts: &SourceOptions<'_>) -> (Arc<MultiSource>, Diagnostics) {
    build_source_excluding(opts, None)
}

/// `build_source` without any filesystem mirror that is the directory
/// `excluded`: `providers mirror` writes into it, and a mirror must not be
/// its own source (Terraform sidesteps this by ignoring the CLI
/// configuration altogether).
pub fn build_source_excluding(
    opts: &SourceOptions<'_>,
    excluded: Option<&Path>,
) -> (Arc<MultiSource>, Diagnostics) {
    let is_excluded = |dir: &Path| excluded.is_some_and(|ex| same_dir(dir, ex));
    let mut diags = Diagnostics::new();
    if !opts.plugin_dirs.is_empty() {
        let methods = opts
            .plugin_dirs
            .iter()
            .map(|dir| MultiSourceMethod {
                source: Arc::new(FilesystemMirror::new(opts.local_path(dir))),
                selector: ProviderSelector::default(),
            })
            .collect();
        return (Arc::new(MultiSource::new(methods)), diags);
    }

    let registry = || opts.network.registry();

    let Some(installation) = &opts.cli_config.provider_installation else {
        return (
            Arc::new(implied_source(opts, registry(), &is_excluded)),
            diags,
        );
    };
    // Terraform drops a method it cannot build and carries on with the rest,
    // which quietly sends providers to another source (the registry, say,
    // instead of an air-gapped mirror). tfinstall reports every such method
    // and installs nothing until the configuration is fixed.
    let mut methods = Vec::new();
    for method in &installation.methods {
        let pos = &method.pos;
        let selector = match method_selector(method) {
            Ok(s) => s,
            Err(diag) => {
                diags.push(diag);
                continue;
            }
        };
        let source: Arc<dyn Source> = match &method.location {
            MethodLocation::FilesystemMirror(path) if is_excluded(path) => continue,
            MethodLocation::FilesystemMirror(path) => {
                Arc::new(FilesystemMirror::new(opts.local_path(path)))
            }
            MethodLocation::Direct => registry(),
            MethodLocation::OciMirror(raw) => {
                match RepositoryTemplate::parse(raw, &selector.include) {
                    Ok(template) => {
                        Arc::new(OciMirror::new(template, opts.network.oci_registries()))
                    }
                    Err(err) => {
                        diags.push(
                            Diagnostic::error(
                                "Invalid oci_mirror repository template",
                                format!(
                                    "Invalid oci_mirror block at {}:{}:{}: {err}.",
                                    pos.file.display(),
                                    pos.line,
                                    pos.column
                                ),
                            )
                            .at_pos(pos),
                        );
                        continue;
                    }
                }
            }
            MethodLocation::NetworkMirror(raw) => match Url::parse(raw) {
                Ok(url) if url.scheme() == "https" && url.host_str().is_some() => {
                    opts.network.network_mirror(url, method.trust_all_hashes)
                }
                _ => {
                    diags.push(
                        Diagnostic::error(
                            "Invalid URL for provider installation source",
                            format!(
                                "Cannot use {raw:?} as a URL for a network provider mirror: the mirror must be at an https: URL."
                            ),
                        )
                        .at_pos(pos),
                    );
                    continue;
                }
            },
        };
        methods.push(MultiSourceMethod { source, selector });
    }
    (Arc::new(MultiSource::new(methods)), diags)
}

/// The local directories Terraform (or OpenTofu, which also searches
/// `$XDG_DATA_HOME/opentofu/plugins`) searches when the CLI configuration
/// has no `provider_installation` block, in its order. Both use the
/// `terraform` XDG subdirectories after that.
pub fn implied_mirror_dirs(env: &CliEnv, launch_dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![launch_dir.join("terraform.d").join("plugins")];
    dirs.extend(env.data_dirs().into_iter().map(|dir| dir.join("plugins")));
    let data_home = env
        .var("XDG_DATA_HOME")
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            env.profile_dir
                .as_ref()
                .map(|h| h.join(".local").join("share"))
        });
    if let Some(data_home) = data_home {
        dirs.push(data_home.join("terraform").join("plugins"));
    }
    let data_dirs = env
        .var("XDG_DATA_DIRS")
        .filter(|v| !v.is_empty())
        .unwrap_or("/usr/local/share/:/usr/share/");
    dirs.extend(
        data_dirs
            .split(':')
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|p| p.join("terraform").join("plugins")),
    );
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// A method's include/exclude patterns, or the error naming where they are.
fn method_selector(method: &InstallMethod) -> Result<ProviderSelector, Diagnostic> {
    ProviderSelector::parse(&method.include, &method.exclude).map_err(|err| {
        Diagnostic::error(
            err.summary().unwrap_or("Invalid provider source patterns"),
            err.detail(),
        )
        .at_pos(&method.pos)
    })
}

/// Where discovery answers are kept between runs.
fn discovery_memory(env: &CliEnv) -> Option<PathBuf> {
    env.tfinstall_cache_dir().map(|dir| dir.join("discovery"))
}

/// The installation methods that need no network, for `-offline`: the
/// `-plugin-dir` directories, or else the CLI configuration's filesystem
/// mirrors (network mirrors and registries are left out), or else the
/// implied local directories; and the plugin cache, whose entries keep the
/// provenance that vouches for them. It offers the versions held for every
/// one of `platforms`; `excluded` is left out as in
/// [`build_source_excluding`].
pub fn build_offline_source(
    opts: &SourceOptions<'_>,
    platforms: Vec<Platform>,
    excluded: Option<&Path>,
) -> (Arc<OfflineSource>, Diagnostics) {
    let is_excluded = |dir: &Path| excluded.is_some_and(|ex| same_dir(dir, ex));
    let mut diags = Diagnostics::new();
    let everything = || ProviderSelector::default();
    let mut dirs: Vec<(PathBuf, ProviderSelector)> = Vec::new();
    if !opts.plugin_dirs.is_empty() {
        dirs.extend(
            opts.plugin_dirs
                .iter()
                .map(|dir| (opts.local_path(dir), everything())),
        );
    } else if let Some(installation) = &opts.cli_config.provider_installation {
        for method in &installation.methods {
            let MethodLocation::FilesystemMirror(path) = &method.location else {
                continue;
            };
            match method_selector(method) {
                Ok(selector) => dirs.push((opts.local_path(path), selector)),
                Err(diag) => diags.push(diag),
            }
        }
    } else {
        dirs.extend(
            implied_mirror_dirs(opts.env, opts.launch_dir)
                .into_iter()
                .map(|dir| (dir, everything())),
        );
    }
    if let Some(cache) = &opts.cli_config.plugin_cache_dir {
        dirs.push((cache.clone(), everything()));
    }
    let methods = dirs
        .into_iter()
        .filter(|(dir, _)| !is_excluded(dir))
        .map(|(dir, selector)| MultiSourceMethod {
            source: Arc::new(FilesystemMirror::new(dir)),
            selector,
        })
        .collect();
    let local = Arc::new(MultiSource::new(methods));
    (Arc::new(OfflineSource::new(local, platforms)), diags)
}

fn implied_source(
    opts: &SourceOptions<'_>,
    registry: Arc<dyn Source>,
    is_excluded: &dyn Fn(&Path) -> bool,
) -> MultiSource {
    let mut methods = Vec::new();
    let mut found_locally: BTreeSet<ProviderAddr> = BTreeSet::new();
    for dir in implied_mirror_dirs(opts.env, opts.launch_dir) {
        if is_excluded(&dir) {
            continue;
        }
        let mirror = FilesystemMirror::new(dir);
        found_locally.extend(mirror.packages().keys().cloned());
        methods.push(MultiSourceMethod {
            source: Arc::new(mirror),
            selector: ProviderSelector::default(),
        });
    }
    // A provider present in any local directory is never fetched from its
    // registry, even when the version or platform it needs is missing there.
    methods.push(MultiSourceMethod {
        source: registry,
        selector: ProviderSelector {
            include: Vec::new(),
            exclude: found_locally.iter().map(ProviderPattern::from).collect(),
        },
    });
    MultiSource::new(methods)
}

/// Whether two paths name the same directory; paths that do not exist yet
/// are compared as written.
fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
