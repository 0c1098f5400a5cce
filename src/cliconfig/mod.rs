//! Terraform's CLI configuration (its "CLI Configuration File" docs and the
//! environment variables they name): the files a user already has for
//! Terraform, read so that tfinstall installs from the same mirrors, with the
//! same cache and credentials, as `terraform init`.
//!
//! Loading follows Terraform step by step: each file is decoded into a raw
//! form that still has Terraform's string-keyed maps, the raw forms are
//! merged with Terraform's precedence rules, the merged result is validated,
//! and only then are hostnames normalized into [`CliConfig`]. Keeping the
//! raw form until after the merge matters: a later file's `credentials`
//! block replaces an earlier one for the same key even when it has no token.

mod args;
mod credentials;
mod credentials_helper;
mod decode;
mod expand;
pub mod netrc;
mod provider_installation;
mod render;
mod syntax;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::addr::{Hostname, ProviderAddr};
use crate::diag::{Diagnostic, Diagnostics, SourcePos};
use crate::engine::Engine;

pub use credentials::{Credentials, CredentialsError, token_variable};
pub use render::render;

/// Everything the CLI configuration depends on outside its files, gathered
/// in one value so tests (and embedding callers) can supply their own.
#[derive(Clone, Debug, Default)]
pub struct CliEnv {
    /// Environment variables: `TF_CLI_CONFIG_FILE`, `TERRAFORM_CONFIG`,
    /// `TF_PLUGIN_CACHE_DIR`, `TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE`,
    /// `TF_TOKEN_*`, and whatever `$VAR` references in the files name.
    pub vars: BTreeMap<String, String>,
    /// Where per-user CLI configuration lives: the home directory on Unix
    /// (`.terraformrc`, `.terraform.d`), `%APPDATA%` on Windows
    /// (`terraform.rc`, `terraform.d`). `None` when it cannot be determined.
    pub profile_dir: Option<PathBuf>,
    /// Whose rules find the files: OpenTofu adds `.tofurc` and XDG places.
    pub engine: Engine,
}

impl CliEnv {
    /// Variables that are not valid Unicode are left out: no setting read
    /// from the environment can use them meaningfully.
    pub fn from_process() -> Self {
        let vars = std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .collect();
        // Terraform uses $HOME first, then the OS user database, on Unix;
        // the roaming application-data folder on Windows.
        let profile_dir = if cfg!(windows) {
            dirs::config_dir()
        } else {
            dirs::home_dir()
        };
        CliEnv {
            vars,
            profile_dir,
            engine: Engine::current(),
        }
    }

    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    fn non_empty_var(&self, name: &str) -> Option<&str> {
        self.var(name).filter(|v| !v.is_empty())
    }

    /// The main file named by `TF_CLI_CONFIG_FILE` or else `TERRAFORM_CONFIG`;
    /// naming one also turns off the config directory.
    fn config_file_override(&self) -> Option<PathBuf> {
        self.non_empty_var("TF_CLI_CONFIG_FILE")
            .or_else(|| self.non_empty_var("TERRAFORM_CONFIG"))
            .map(PathBuf::from)
    }

    /// Terraform's `~/.terraformrc`. OpenTofu's `~/.tofurc`, unless only
    /// `~/.terraformrc` exists (then that), or neither exists and
    /// `XDG_CONFIG_HOME` is set (then `$XDG_CONFIG_HOME/opentofu/tofurc`).
    fn default_config_file(&self) -> Option<PathBuf> {
        let profile = self.profile_dir.as_ref()?;
        let (terraform, opentofu) = if cfg!(windows) {
            ("terraform.rc", "tofu.rc")
        } else {
            (".terraformrc", ".tofurc")
        };
        let terraform = profile.join(terraform);
        if self.engine == Engine::Terraform {
            return Some(terraform);
        }
        let opentofu = profile.join(opentofu);
        Some(match self.non_empty_var("XDG_CONFIG_HOME") {
            _ if opentofu.exists() => opentofu,
            _ if terraform.exists() => terraform,
            Some(xdg) if !cfg!(windows) => Path::new(xdg).join("opentofu").join("tofurc"),
            _ => opentofu,
        })
    }

    /// `~/.terraform.d`, the directory Terraform has always used.
    fn legacy_dir(&self) -> Option<PathBuf> {
        let name = if cfg!(windows) {
            "terraform.d"
        } else {
            ".terraform.d"
        };
        self.profile_dir.as_ref().map(|dir| dir.join(name))
    }

    /// Where `*.tfrc` files and `credentials.tfrc.json` are: `~/.terraform.d`,
    /// or for OpenTofu `$XDG_CONFIG_HOME/opentofu` when that variable is set
    /// and `~/.terraform.d` does not exist.
    pub fn config_dir(&self) -> Option<PathBuf> {
        let legacy = self.legacy_dir();
        match self.non_empty_var("XDG_CONFIG_HOME") {
            Some(xdg)
                if self.engine == Engine::OpenTofu
                    && !cfg!(windows)
                    && !legacy.as_ref().is_some_and(|dir| dir.is_dir()) =>
            {
                Some(Path::new(xdg).join("opentofu"))
            }
            _ => legacy,
        }
    }

    /// Where tfinstall keeps what it learns between runs that is neither
    /// configuration nor packages (service discovery answers):
    /// `$XDG_CACHE_HOME/tfinstall`, else `~/.cache/tfinstall`; the platform's
    /// cache directory on Windows.
    pub fn tfinstall_cache_dir(&self) -> Option<PathBuf> {
        let base = if cfg!(windows) {
            dirs::cache_dir()
        } else {
            self.non_empty_var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .filter(|dir| dir.is_absolute())
                .or_else(|| self.profile_dir.as_ref().map(|home| home.join(".cache")))
        };
        base.map(|dir| dir.join("tfinstall"))
    }

    /// Directories whose `plugins` subdirectory holds providers (an implied
    /// mirror) and credentials helpers: `~/.terraform.d`, and for OpenTofu
    /// also `$XDG_DATA_HOME/opentofu` when that variable is set.
    pub fn data_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.legacy_dir().into_iter().collect();
        if self.engine == Engine::OpenTofu
            && !cfg!(windows)
            && let Some(xdg) = self.non_empty_var("XDG_DATA_HOME")
        {
            dirs.push(Path::new(xdg).join("opentofu"));
        }
        dirs
    }
}

/// The merged CLI configuration, with hostnames normalized. Entries whose
/// hostname is invalid are left out (and reported while loading).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CliConfig {
    pub plugin_cache_dir: Option<PathBuf>,
    pub plugin_cache_may_break_lock_file: bool,
    /// `disable_checkpoint` and `disable_checkpoint_signature`: tfinstall
    /// makes no checkpoint call, but carries them to the configuration it
    /// hands to Terraform (see `crate::handoff`).
    pub disable_checkpoint: bool,
    pub disable_checkpoint_signature: bool,
    /// Tokens from `credentials` blocks, `None` for a block without one;
    /// see [`Credentials`] for the lookup that also considers `TF_TOKEN_*`
    /// variables and the credentials helper.
    pub credentials: BTreeMap<Hostname, Option<String>>,
    /// `host` blocks: service discovery overrides (service id → URL).
    pub hosts: BTreeMap<Hostname, BTreeMap<String, String>>,
    /// The first `provider_installation` block; Terraform ignores the rest.
    pub provider_installation: Option<ProviderInstallation>,
    /// Asked for the hosts that neither `TF_TOKEN_*` variables nor
    /// `credentials` blocks cover; see [`Credentials`].
    pub credentials_helper: Option<CredentialsHelper>,
    /// OpenTofu's `oci_credentials "REGISTRY[/REPOSITORY-PREFIX]"` blocks,
    /// keyed by label.
    pub oci_credentials: BTreeMap<String, OciCredentials>,
    /// OpenTofu's `oci_default_credentials` block; its defaults when absent.
    pub oci_default_credentials: OciDefaultCredentials,
    /// HTTP Basic credentials for package downloads, from `.netrc`.
    pub netrc: Option<Arc<netrc::Netrc>>,
}

impl CliConfig {
    /// The providers `dev_overrides` replaces with a local build: nothing
    /// installs them, and nothing hands them over.
    pub fn dev_override_addrs(&self) -> impl Iterator<Item = &ProviderAddr> {
        self.provider_installation
            .iter()
            .flat_map(|p| p.dev_overrides.iter().map(|(addr, _)| addr))
    }
}

/// What one `oci_credentials` block gives for the registries it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OciCredentials {
    Basic {
        username: String,
        password: String,
    },
    /// `docker-credential-NAME`, asked only when a registry wants credentials.
    Helper(String),
}

/// How OCI registry credentials are found beyond `oci_credentials` blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciDefaultCredentials {
    /// `false` turns off the Docker-style configuration files altogether.
    pub discover_ambient_credentials: bool,
    /// Replaces the usual Docker-style file locations when set.
    pub docker_style_config_files: Option<Vec<PathBuf>>,
    /// A `docker-credential-NAME` helper for registries nothing else covers.
    pub docker_credentials_helper: Option<String>,
}

impl Default for OciDefaultCredentials {
    fn default() -> Self {
        OciDefaultCredentials {
            discover_ambient_credentials: true,
            docker_style_config_files: None,
            docker_credentials_helper: None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProviderInstallation {
    /// In written order; paths are `$VAR`-expanded and cleaned.
    pub dev_overrides: Vec<(ProviderAddr, PathBuf)>,
    /// In written order; the order is the search priority.
    pub methods: Vec<InstallMethod>,
}

/// One installation method. `include`/`exclude` stay raw strings: Terraform
/// validates them only when building sources, and reports problems there.
#[derive(Clone, Debug, PartialEq)]
pub struct InstallMethod {
    pub location: MethodLocation,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    /// OpenTofu's `trust_all_hashes` on a `network_mirror`; always false
    /// with Terraform's rules, whose decoder ignores the argument.
    pub trust_all_hashes: bool,
    pub pos: SourcePos,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MethodLocation {
    /// As written (no expansion, no cleaning), like Terraform.
    FilesystemMirror(PathBuf),
    /// As written; checked for `https` when building the source.
    NetworkMirror(String),
    /// OpenTofu's `oci_mirror`: the `repository_template` as written,
    /// checked against the method's `include` when building the source.
    OciMirror(String),
    Direct,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialsHelper {
    pub name: String,
    pub args: Vec<String>,
    pub pos: SourcePos,
}

/// One file's settings (or a merge of several) before hostnames are
/// normalized, keyed as written, exactly as Terraform merges them.
#[derive(Clone, Debug, Default, PartialEq)]
struct RawConfig {
    /// Empty means unset, which is how Terraform's merge tells them apart.
    plugin_cache_dir: String,
    plugin_cache_may_break_lock_file: bool,
    disable_checkpoint: bool,
    disable_checkpoint_signature: bool,
    hosts: BTreeMap<String, BTreeMap<String, String>>,
    /// `None` for a block without a usable token.
    credentials: BTreeMap<String, Option<String>>,
    credentials_helpers: BTreeMap<String, CredentialsHelper>,
    provider_installation: Vec<ProviderInstallation>,
    oci_credentials: BTreeMap<String, OciCredentials>,
    /// One per file that has the block; more than one is an error.
    oci_default_credentials: Vec<OciDefaultCredentials>,
}

impl RawConfig {
    /// Terraform's `A.Merge(B)`: A's cache dir unless empty, the lock-file
    /// flag saturates on, B's map entries replace A's, installation blocks
    /// are concatenated.
    fn merge(mut self, other: RawConfig) -> RawConfig {
        if self.plugin_cache_dir.is_empty() {
            self.plugin_cache_dir = other.plugin_cache_dir;
        }
        self.plugin_cache_may_break_lock_file |= other.plugin_cache_may_break_lock_file;
        self.disable_checkpoint |= other.disable_checkpoint;
        self.disable_checkpoint_signature |= other.disable_checkpoint_signature;
        self.hosts.extend(other.hosts);
        self.credentials.extend(other.credentials);
        self.credentials_helpers.extend(other.credentials_helpers);
        self.provider_installation
            .extend(other.provider_installation);
        self.oci_credentials.extend(other.oci_credentials);
        self.oci_default_credentials
            .extend(other.oci_default_credentials);
        self
    }

    /// The settings environment variables provide; `TF_PLUGIN_CACHE_DIR`
    /// gets no `$VAR` expansion (the shell already did that).
    fn from_env(env: &CliEnv) -> RawConfig {
        RawConfig {
            plugin_cache_dir: env
                .var("TF_PLUGIN_CACHE_DIR")
                .unwrap_or_default()
                .to_string(),
            plugin_cache_may_break_lock_file: env
                .non_empty_var("TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE")
                .is_some_and(|v| v != "0"),
            ..RawConfig::default()
        }
    }

    /// Terraform's checks on the merged configuration. They are errors, yet
    /// Terraform carries on after showing them, and so should callers.
    fn validate(&self) -> Diagnostics {
        let mut diags = Diagnostics::new();
        let mut error = |message: String| diags.push(Diagnostic::error(message, ""));
        for host in self.hosts.keys() {
            if let Err(err) = Hostname::parse(host) {
                error(format!(
                    "The host {host:?} block has an invalid hostname: {err}"
                ));
            }
        }
        for host in self.credentials.keys() {
            if let Err(err) = Hostname::parse(host) {
                error(format!(
                    "The credentials {host:?} block has an invalid hostname: {err}"
                ));
            }
        }
        if self.credentials_helpers.len() > 1 {
            error("No more than one credentials_helper block may be specified".to_string());
        }
        if self.provider_installation.len() > 1 {
            error("No more than one provider_installation block may be specified".to_string());
        }
        if self.oci_default_credentials.len() > 1 {
            error("No more than one oci_default_credentials block may be specified".to_string());
        }
        if !self.plugin_cache_dir.is_empty()
            && let Err(err) = fs::metadata(&self.plugin_cache_dir)
        {
            error(format!(
                "The specified plugin cache dir {} cannot be opened: stat {}: {}",
                self.plugin_cache_dir,
                self.plugin_cache_dir,
                go_style_io_error(&err)
            ));
        }
        diags
    }

    fn into_config(self) -> CliConfig {
        let credentials = self
            .credentials
            .into_iter()
            .filter_map(|(host, token)| Some((Hostname::parse(&host).ok()?, token)))
            .collect();
        let hosts = self
            .hosts
            .into_iter()
            .filter_map(|(host, services)| Some((Hostname::parse(&host).ok()?, services)))
            .collect();
        CliConfig {
            plugin_cache_dir: Some(self.plugin_cache_dir)
                .filter(|dir| !dir.is_empty())
                .map(PathBuf::from),
            plugin_cache_may_break_lock_file: self.plugin_cache_may_break_lock_file,
            disable_checkpoint: self.disable_checkpoint,
            disable_checkpoint_signature: self.disable_checkpoint_signature,
            credentials,
            hosts,
            provider_installation: self.provider_installation.into_iter().next(),
            credentials_helper: self.credentials_helpers.into_values().next(),
            oci_credentials: self.oci_credentials,
            oci_default_credentials: self
                .oci_default_credentials
                .into_iter()
                .next()
                .unwrap_or_default(),
            netrc: None,
        }
    }
}

/// Go's wording for the common cases, since the surrounding message is
/// Terraform's and quotes Go's `os.Stat` error.
fn go_style_io_error(err: &io::Error) -> String {
    match err.kind() {
        io::ErrorKind::NotFound => "no such file or directory".to_string(),
        io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        io::ErrorKind::NotADirectory => "not a directory".to_string(),
        _ => err.to_string(),
    }
}

/// Reads the CLI configuration the way Terraform's
/// `internal/command/cliconfig/cliconfig.go` does: the main file, then
/// `*.tfrc`/`*.tfrc.json` in the config directory unless an override
/// variable is set, then the environment, which wins. Problems come back as
/// diagnostics and never stop loading: like Terraform, a caller shows them
/// (errors under "There are some problems with the CLI configuration:") and
/// carries on with what could be read.
pub fn load(env: &CliEnv) -> (CliConfig, Diagnostics) {
    let mut diags = Diagnostics::new();
    let mut merged = RawConfig::default();
    let override_file = env.config_file_override();
    if let Some(path) = override_file.clone().or_else(|| env.default_config_file()) {
        match fs::File::open(&path) {
            Ok(_) => {
                let (config, more) = load_file(&path, env);
                diags.extend(more);
                merged = merged.merge(config);
            }
            Err(err) if override_file.is_some() || err.kind() != io::ErrorKind::NotFound => {
                diags.push(unopenable_main_file(&path, &err));
            }
            Err(_) => {}
        }
    }
    if override_file.is_none()
        && let Some(dir) = env.config_dir().filter(|dir| dir.is_dir())
    {
        let (config, more) = load_dir(&dir, env);
        diags.extend(more);
        merged = merged.merge(config);
    }
    merged = RawConfig::from_env(env).merge(merged);
    diags.extend(merged.validate());
    let mut config = merged.into_config();
    let (netrc, netrc_warning) = netrc::Netrc::load(env);
    config.netrc = netrc.map(Arc::new);
    if let Some(warning) = netrc_warning {
        diags.push(warning);
    }
    (config, diags)
}

fn unopenable_main_file(path: &Path, err: &io::Error) -> Diagnostic {
    let quoted = format!("{:?}", path.display().to_string());
    let detail = if err.kind() == io::ErrorKind::NotFound {
        format!("The CLI configuration file at {quoted} does not exist.")
    } else {
        format!("The CLI configuration file at {quoted} cannot be opened: {err}.")
    };
    Diagnostic::warning("Unable to open CLI configuration file", detail)
}

fn load_file(path: &Path, env: &CliEnv) -> (RawConfig, Diagnostics) {
    let read_error = |message: String| {
        let diag = Diagnostic::error(format!("Error reading {}: {message}", path.display()), "");
        (RawConfig::default(), Diagnostics::from(diag))
    };
    match fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(src) => decode::decode_file(path, &src, env),
            Err(_) => read_error("the file is not valid UTF-8 text".to_string()),
        },
        Err(err) => read_error(err.to_string()),
    }
}

/// Files are merged in name order (Go's `ReadDir` sorts by name), so a
/// later name's entries win.
fn load_dir(dir: &Path, env: &CliEnv) -> (RawConfig, Diagnostics) {
    let mut diags = Diagnostics::new();
    let mut merged = RawConfig::default();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            let diag = Diagnostic::error(format!("Error reading {}: {err}", dir.display()), "");
            return (merged, Diagnostics::from(diag));
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".tfrc") || name.ends_with(".tfrc.json"))
        .collect();
    names.sort();
    for name in names {
        let (config, more) = load_file(&dir.join(name), env);
        diags.extend(more);
        merged = merged.merge(config);
    }
    (merged, diags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Home {
        dir: tempfile::TempDir,
        vars: BTreeMap<String, String>,
    }

    impl Home {
        fn new() -> Self {
            Home {
                dir: tempfile::tempdir().unwrap(),
                vars: BTreeMap::new(),
            }
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.dir.path().join(rel)
        }

        fn write(&self, rel: &str, content: &str) -> PathBuf {
            let path = self.path(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, content).unwrap();
            path
        }

        fn set(&mut self, name: &str, value: &str) {
            self.vars.insert(name.to_string(), value.to_string());
        }

        fn env(&self) -> CliEnv {
            CliEnv {
                vars: self.vars.clone(),
                profile_dir: Some(self.dir.path().to_path_buf()),
                engine: Default::default(),
            }
        }

        fn load(&self) -> (CliConfig, Diagnostics) {
            load(&self.env())
        }
    }

    fn host(name: &str) -> Hostname {
        Hostname::parse(name).unwrap()
    }

    fn messages(diags: &Diagnostics) -> Vec<String> {
        diags.iter().map(|d| d.summary.clone()).collect()
    }

    /// Which file and directory each engine reads, as OpenTofu 1.10's
    /// `config_unix.go` picks them.
    #[cfg(unix)]
    #[test]
    fn opentofu_prefers_tofurc_and_falls_back_to_xdg_places() {
        let mut home = Home::new();
        let env = |home: &Home, engine| CliEnv {
            engine,
            ..home.env()
        };
        let file = |home: &Home, engine| env(home, engine).default_config_file().unwrap();
        let dir = |home: &Home, engine| env(home, engine).config_dir().unwrap();
        home.set(
            "XDG_CONFIG_HOME",
            &home.path("xdg-config").display().to_string(),
        );
        home.set(
            "XDG_DATA_HOME",
            &home.path("xdg-data").display().to_string(),
        );

        assert_eq!(
            file(&home, Engine::OpenTofu),
            home.path("xdg-config/opentofu/tofurc")
        );
        assert_eq!(
            dir(&home, Engine::OpenTofu),
            home.path("xdg-config/opentofu")
        );
        assert_eq!(file(&home, Engine::Terraform), home.path(".terraformrc"));
        assert_eq!(dir(&home, Engine::Terraform), home.path(".terraform.d"));

        home.write(".terraformrc", "");
        assert_eq!(file(&home, Engine::OpenTofu), home.path(".terraformrc"));
        home.write(".tofurc", "");
        assert_eq!(file(&home, Engine::OpenTofu), home.path(".tofurc"));
        assert_eq!(file(&home, Engine::Terraform), home.path(".terraformrc"));

        fs::create_dir(home.path(".terraform.d")).unwrap();
        assert_eq!(dir(&home, Engine::OpenTofu), home.path(".terraform.d"));
        assert_eq!(
            env(&home, Engine::OpenTofu).data_dirs(),
            [home.path(".terraform.d"), home.path("xdg-data/opentofu")]
        );
        assert_eq!(
            env(&home, Engine::Terraform).data_dirs(),
            [home.path(".terraform.d")]
        );

        home.vars.clear();
        fs::remove_file(home.path(".tofurc")).unwrap();
        fs::remove_file(home.path(".terraformrc")).unwrap();
        assert_eq!(file(&home, Engine::OpenTofu), home.path(".tofurc"));
    }

    #[cfg(unix)]
    #[test]
    fn opentofu_reads_tofurc_and_not_terraformrc_when_both_exist() {
        let home = Home::new();
        home.write(".terraformrc", "plugin_cache_dir = \"/from-terraformrc\"\n");
        home.write(".tofurc", "plugin_cache_dir = \"/from-tofurc\"\n");
        let (config, _) = load(&CliEnv {
            engine: Engine::OpenTofu,
            ..home.env()
        });
        assert_eq!(
            config.plugin_cache_dir.as_deref(),
            Some(Path::new("/from-tofurc"))
        );
        let (config, _) = home.load();
        assert_eq!(
            config.plugin_cache_dir.as_deref(),
            Some(Path::new("/from-terraformrc"))
        );
    }

    #[cfg(unix)]
    #[test]
    fn main_file_then_config_dir_then_environment() {
        let mut home = Home::new();
        let cache_a = home.path("cache-a");
        let cache_b = home.path("cache-b");
        fs::create_dir_all(&cache_a).unwrap();
        fs::create_dir_all(&cache_b).unwrap();
        home.write(
            ".terraformrc",
            &format!(
                "plugin_cache_dir = \"{}\"\ncredentials \"a.example\" {{ token = \"main\" }}\ncredentials \"b.example\" {{ token = \"main\" }}\nprovider_installation {{\n  direct {{}}\n}}\n",
                cache_a.display()
            ),
        );
        home.write(
            ".terraform.d/b.tfrc",
            &format!(
                "plugin_cache_dir = \"{}\"\ncredentials \"a.example\" {{ username = \"no token\" }}\n",
                cache_b.display()
            ),
        );
        home.write(
            ".terraform.d/credentials.tfrc.json",
            r#"{"credentials": {"c.example": {"token": "from-login"}}}"#,
        );
        home.write(".terraform.d/ignored.txt", "not = [valid");
        let (config, diags) = home.load();
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(config.plugin_cache_dir.as_deref(), Some(cache_a.as_path()));
        // The config dir's token-less block replaces the main file's entry.
        assert_eq!(
            config.credentials,
            BTreeMap::from([
                (host("a.example"), None),
                (host("b.example"), Some("main".to_string())),
                (host("c.example"), Some("from-login".to_string())),
            ])
        );
        assert_eq!(
            config.provider_installation.unwrap().methods[0].location,
            MethodLocation::Direct
        );

        home.set("TF_PLUGIN_CACHE_DIR", cache_b.to_str().unwrap());
        let (config, _) = home.load();
        assert_eq!(config.plugin_cache_dir.as_deref(), Some(cache_b.as_path()));
    }

    #[test]
    fn override_variable_replaces_main_file_and_skips_config_dir() {
        let mut home = Home::new();
        home.write(
            ".terraformrc",
            "credentials \"a.example\" { token = \"default\" }\n",
        );
        home.write(
            ".terraform.d/x.tfrc",
            "credentials \"b.example\" { token = \"dir\" }\n",
        );
        let custom = home.write(
            "custom.rc",
            "credentials \"c.example\" { token = \"custom\" }\n",
        );
        home.set("TERRAFORM_CONFIG", custom.to_str().unwrap());
        let (config, diags) = home.load();
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(
            config.credentials.keys().collect::<Vec<_>>(),
            [&host("c.example")]
        );

        let other = home.write("other.rc", "credentials \"d.example\" { token = \"tf\" }\n");
        home.set("TF_CLI_CONFIG_FILE", other.to_str().unwrap());
        let (config, _) = home.load();
        assert_eq!(
            config.credentials.keys().collect::<Vec<_>>(),
            [&host("d.example")]
        );
    }

    #[test]
    fn oci_credential_blocks_as_opentofu_writes_them() {
        let home = Home::new();
        home.write(
            ".terraformrc",
            "oci_credentials \"reg.example\" {\n  username = \"u\"\n  password = \"p\"\n}\noci_credentials \"reg.example/team\" {\n  docker_credentials_helper = \"pass\"\n}\noci_default_credentials {\n  discover_ambient_credentials = false\n  docker_style_config_files = [\"/etc/auth.json\"]\n}\n",
        );
        let (config, diags) = home.load();
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(
            config.oci_credentials,
            BTreeMap::from([
                (
                    "reg.example".to_string(),
                    OciCredentials::Basic {
                        username: "u".into(),
                        password: "p".into()
                    }
                ),
                (
                    "reg.example/team".to_string(),
                    OciCredentials::Helper("pass".into())
                ),
            ])
        );
        assert_eq!(
            config.oci_default_credentials,
            OciDefaultCredentials {
                discover_ambient_credentials: false,
                docker_style_config_files: Some(vec!["/etc/auth.json".into()]),
                docker_credentials_helper: None,
            }
        );
    }

    #[test]
    fn oci_credential_blocks_must_say_how() {
        let home = Home::new();
        home.write(
            ".terraformrc",
            "oci_credentials \"reg.example\" {\n  username = \"u\"\n}\noci_default_credentials {}\n",
        );
        home.write(".terraform.d/b.tfrc", "oci_default_credentials {}\n");
        let (config, diags) = home.load();
        let messages = messages(&diags);
        assert!(
            messages
                .iter()
                .any(|m| m.contains("\"username\" and \"password\" must be set together")),
            "{messages:?}"
        );
        assert!(
            messages.contains(
                &"No more than one oci_default_credentials block may be specified".to_string()
            ),
            "{messages:?}"
        );
        assert!(config.oci_credentials.is_empty());
    }

    #[test]
    fn missing_override_file_warns_and_still_skips_config_dir() {
        let mut home = Home::new();
        home.write(
            ".terraform.d/x.tfrc",
            "credentials \"b.example\" { token = \"dir\" }\n",
        );
        let missing = home.path("nope.rc");
        home.set("TF_CLI_CONFIG_FILE", missing.to_str().unwrap());
        let (config, diags) = home.load();
        assert!(config.credentials.is_empty());
        assert_eq!(diags.0.len(), 1);
        let diag = &diags.0[0];
        assert!(!diag.is_error());
        assert_eq!(diag.summary, "Unable to open CLI configuration file");
        assert_eq!(
            diag.detail,
            format!(
                "The CLI configuration file at \"{}\" does not exist.",
                missing.display()
            )
        );
    }

    #[test]
    fn missing_default_file_is_silent() {
        let home = Home::new();
        let (config, diags) = home.load();
        assert!(diags.is_empty(), "{diags}");
        assert_eq!(config, CliConfig::default());
        let (config, diags) = load(&CliEnv::default());
        assert!(diags.is_empty());
        assert_eq!(config, CliConfig::default());
    }

    #[test]
    fn environment_settings() {
        let mut home = Home::new();
        home.set("TF_PLUGIN_CACHE_DIR", "boop");
        home.set(
            "TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE",
            "anything_except_zero",
        );
        let (config, diags) = home.load();
        assert_eq!(config.plugin_cache_dir, Some(PathBuf::from("boop")));
        assert!(config.plugin_cache_may_break_lock_file);
        // "boop" does not exist relative to the working directory.
        assert_eq!(messages(&diags).len(), 1);
        assert!(messages(&diags)[0].starts_with("The specified plugin cache dir boop cannot be opened: stat boop: no such file or directory"));

        home.set("TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE", "0");
        assert!(!home.load().0.plugin_cache_may_break_lock_file);
        home.set("TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE", "");
        assert!(!home.load().0.plugin_cache_may_break_lock_file);
        // The flag saturates: a file cannot turn the environment's "on" off,
        // nor the environment a file's.
        home.write(
            ".terraformrc",
            "plugin_cache_may_break_dependency_lock_file = true\n",
        );
        assert!(home.load().0.plugin_cache_may_break_lock_file);
    }

    #[test]
    fn validation_counts() {
        let with = |f: &dyn Fn(&mut RawConfig)| {
            let mut config = RawConfig::default();
            f(&mut config);
            config.validate().0.len()
        };
        let pos = SourcePos::new(PathBuf::from("x"), 1, 1);
        let helper = |name: &str| CredentialsHelper {
            name: name.to_string(),
            args: vec![],
            pos: pos.clone(),
        };
        assert_eq!(with(&|_| {}), 0);
        assert_eq!(
            with(&|c| {
                c.hosts.insert("example.com".into(), BTreeMap::new());
            }),
            0
        );
        assert_eq!(
            with(&|c| {
                c.hosts.insert("example..com".into(), BTreeMap::new());
            }),
            1
        );
        assert_eq!(
            with(&|c| {
                c.credentials
                    .insert("example.com".into(), Some("foo".into()));
            }),
            0
        );
        assert_eq!(
            with(&|c| {
                c.credentials
                    .insert("example..com".into(), Some("foo".into()));
            }),
            1
        );
        assert_eq!(
            with(&|c| {
                c.credentials_helpers.insert("foo".into(), helper("foo"));
            }),
            0
        );
        assert_eq!(
            with(&|c| {
                c.credentials_helpers.insert("foo".into(), helper("foo"));
                c.credentials_helpers.insert("bar".into(), helper("bar"));
            }),
            1
        );
        assert_eq!(
            with(&|c| c.provider_installation = vec![ProviderInstallation::default()]),
            0
        );
        assert_eq!(
            with(&|c| c.provider_installation = vec![ProviderInstallation::default(); 2]),
            1
        );
        assert_eq!(with(&|c| c.plugin_cache_dir = "fake".into()), 1);

        let mut config = RawConfig::default();
        config.hosts.insert("example..com".into(), BTreeMap::new());
        config
            .credentials
            .insert("example..com".into(), Some("foo".into()));
        assert_eq!(
            messages(&config.validate()),
            [
                "The host \"example..com\" block has an invalid hostname: hostname contains empty label (two consecutive periods)",
                "The credentials \"example..com\" block has an invalid hostname: hostname contains empty label (two consecutive periods)",
            ]
        );
    }

    #[test]
    fn invalid_hostnames_are_reported_and_dropped() {
        let home = Home::new();
        home.write(
            ".terraformrc",
            "host \"example..com\" { services = {} }\nhost \"ok.example\" { services = { \"providers.v1\" = \"https://ok.example/p/\" } }\ncredentials \"bad..example\" { token = \"x\" }\n",
        );
        let (config, diags) = home.load();
        assert_eq!(diags.0.len(), 2, "{diags}");
        assert_eq!(
            config.hosts.keys().collect::<Vec<_>>(),
            [&host("ok.example")]
        );
        assert!(config.credentials.is_empty());
    }

    #[test]
    fn second_provider_installation_block_is_an_error_and_ignored() {
        let home = Home::new();
        home.write(".terraformrc", "provider_installation {\n  direct {}\n}\n");
        home.write(
            ".terraform.d/x.tfrc",
            "provider_installation {\n  filesystem_mirror { path = \"/m\" }\n}\n",
        );
        let (config, diags) = home.load();
        assert_eq!(
            messages(&diags),
            ["No more than one provider_installation block may be specified"]
        );
        let installation = config.provider_installation.unwrap();
        assert_eq!(installation.methods[0].location, MethodLocation::Direct);
    }

    #[test]
    fn credentials_helper_is_parsed_silently() {
        let home = Home::new();
        let path = home.write(
            ".terraformrc",
            "\ncredentials_helper \"vault\" {\n  args = [\"-x\"]\n}\n",
        );
        let (config, diags) = home.load();
        assert!(diags.is_empty(), "{diags}");
        let helper = config.credentials_helper.unwrap();
        assert_eq!(
            (helper.name.as_str(), helper.args.as_slice()),
            ("vault", &["-x".to_string()][..])
        );
        assert_eq!((helper.pos.file, helper.pos.line), (path, 2));
    }

    #[test]
    fn bom_json_and_malformed_files_through_load() {
        let home = Home::new();
        home.write(
            ".terraformrc",
            "\u{feff}provider_installation {\n  dev_overrides {\n    \"hashicorp/null\" = \"/dev/null-provider\"\n  }\n  direct {}\n}\n",
        );
        home.write(
            ".terraform.d/a.tfrc.json",
            "\u{feff}{\"credentials\": {\"app.terraform.io\": {\"token\": \"tok\"}}}",
        );
        let broken = home.write(
            ".terraform.d/b.tfrc",
            "credentials \"x\" {\n  token = \"unterminated\n}\n",
        );
        let (config, diags) = home.load();
        let installation = config.provider_installation.unwrap();
        assert_eq!(installation.dev_overrides.len(), 1);
        assert_eq!(
            installation.dev_overrides[0].1,
            PathBuf::from("/dev/null-provider")
        );
        assert_eq!(
            config.credentials[&host("app.terraform.io")].as_deref(),
            Some("tok")
        );
        assert_eq!(diags.0.len(), 1);
        assert_eq!(
            diags.0[0].summary,
            format!(
                "Error parsing {}: At 2:11: literal not terminated",
                broken.display()
            )
        );
        let rendered = diags.0[0].to_string();
        assert!(
            rendered.contains(&format!("on {} line 2", broken.display())),
            "{rendered}"
        );
    }

    #[test]
    fn unreadable_files_are_errors() {
        let home = Home::new();
        fs::create_dir_all(home.path(".terraform.d/dir.tfrc")).unwrap();
        home.write(".terraform.d/latin1.tfrc", "");
        fs::write(home.path(".terraform.d/latin1.tfrc"), b"a = \"\xe9\"\n").unwrap();
        let (_, diags) = home.load();
        let summaries = messages(&diags);
        assert_eq!(summaries.len(), 2, "{summaries:?}");
        assert!(summaries[0].starts_with(&format!(
            "Error reading {}",
            home.path(".terraform.d/dir.tfrc").display()
        )));
        assert!(summaries[1].ends_with("the file is not valid UTF-8 text"));
    }
}
