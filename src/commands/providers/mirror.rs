//! `tfinstall providers mirror DIR`: copies the configuration's providers
//! into DIR in the packed layout (the CLI configuration docs,
//! "filesystem_mirror") and writes the provider network mirror protocol's
//! `index.json` and `VERSION.json` beside them, so DIR works as a filesystem
//! mirror and, served by any static web server, as a network mirror.
//!
//! Unlike Terraform's command (hashicorp/terraform#28333): packages already
//! in DIR that still authenticate against their source are not downloaded
//! again; packages are fetched concurrently; indexes keep every version and
//! platform DIR already lists; JSON files are replaced atomically and only
//! when every package succeeded; and the CLI configuration's installation
//! methods are the sources, so a mirror can be made from a mirror.
//!
//! With `-offline` (issue 15) no request is made: versions and packages come
//! from the places `init -offline` uses, the plugin cache among them. A
//! package held only unpacked (every cache entry is) is copied in the
//! unpacked layout (`HOST/NS/TYPE/VERSION/OS_ARCH/`), which filesystem
//! mirrors and `-plugin-dir` read as they read archives. The network
//! mirror indexes list archives only, since their protocol serves nothing
//! else: served over HTTP, such a DIR offers just its archives.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tokio::sync::Semaphore;

use crate::addr::target_platforms;
use crate::addr::{Platform, ProviderAddr};
use crate::cache::PluginCache;
use crate::cli::ProvidersMirrorArgs;
use crate::cliconfig::{self, CliEnv};
use crate::diag::{Diagnostic, Diagnostics};
use crate::fetch::{Destination, DownloadSettings, Downloader};
use crate::fsutil::blocking;
use crate::fsutil::write_atomic;
use crate::install::link::copy_tree_hashed;
use crate::lockfile::Locks;
use crate::output::Output;
use crate::output::ordered::OrderedOutput;
use crate::package::layout::{provider_dir, unpacked_package_dir};
use crate::policy::Policy;
use crate::source::authentication::{
    StageError, alongside_documents, authenticate_archive, mirror_mismatch,
};
use crate::source::configured::{
    NetworkSources, SourceOptions, build_offline_source, build_source_excluding,
};
use crate::source::filesystem::scan_directory;
use crate::source::oci::publish::{self, Staged, is_oci_target, parse_target};
use crate::source::offline::OfflineSource;
use crate::source::{PackageAuthentication, PackageLocation, PackageMeta, Source, SourceError};
use crate::ui::Ui;
use crate::verify::AuthResult;
use crate::verify::hash::{PackageHash, sha256_file};
use crate::version::{Version, VersionConstraints};
use crate::workdir::configuration_requirements;
use crate::workdir::{LOCK_FILE, data_dir};

pub async fn run(args: ProvidersMirrorArgs, launch_dir: PathBuf) -> bool {
    let ui = Ui::detect(args.no_color);
    match mirror(&args, &launch_dir, &ui).await {
        Ok(warnings) => {
            ui.print_diagnostics(&warnings);
            true
        }
        Err(diags) => {
            ui.print_diagnostics(&diags);
            false
        }
    }
}

/// What one run placed in (or verified in) the mirror, with the hashes its
/// `VERSION.json` entry gets.
struct Mirrored {
    provider: ProviderAddr,
    version: Version,
    platform: Platform,
    hashes: Vec<PackageHash>,
}

/// Everything the concurrent tasks share.
struct Run {
    dir: PathBuf,
    source: Arc<dyn Source>,
    downloader: Downloader,
    /// Bounds the queries and downloads in flight.
    permits: Semaphore,
    /// Downloads land here (inside DIR, so placing them is a rename) and
    /// whatever is left disappears with it.
    staging: tempfile::TempDir,
    counter: AtomicUsize,
    platforms: Vec<Platform>,
    locks: Option<Locks>,
    output: OrderedOutput,
    /// Set with `-offline`: the source again, asked what it does hold when
    /// it cannot serve a request.
    offline: Option<Arc<OfflineSource>>,
    /// The plugin cache, whose entries' recorded `h1:` a copy must match.
    cache: Option<PluginCache>,
    /// Whether a package held only unpacked is copied as it is: not for an
    /// OCI target, which publishes archives.
    unpacked_layout: bool,
    /// `-policy`: the versions chosen and the packages copied must pass it.
    policy: Option<Arc<Policy>>,
}

async fn mirror(
    args: &ProvidersMirrorArgs,
    launch_dir: &Path,
    ui: &Ui,
) -> Result<Diagnostics, Diagnostics> {
    let [target] = args.dirs.as_slice() else {
        return Err(Diagnostic::error(
            "No output directory specified",
            "The providers mirror command requires an output directory as a command-line argument.",
        )
        .into());
    };
    let platforms = target_platforms(&args.platforms)?;
    let policy = Policy::from_flag(args.policy.as_deref())?;
    let data_dir = data_dir();
    let (requirements, mut warnings) = configuration_requirements(Path::new("."), &data_dir)?;
    if let Some(policy) = &policy {
        warnings.extend(policy.warnings().clone());
    }
    // An `oci://` target is published from a directory mirror made first.
    let oci_target = match is_oci_target(target) {
        Some(raw) => {
            let providers: Vec<&ProviderAddr> =
                requirements.keys().filter(|p| !p.is_builtin()).collect();
            let template = parse_target(raw, &providers)?;
            let staging = publish::staging_dir().map_err(|err| {
                Diagnostics::from(Diagnostic::error(
                    "Cannot create a staging directory",
                    format!("Could not create a temporary directory for the packages to publish: {err}. Set TMPDIR to a writable directory."),
                ))
            })?;
            Some((template, staging))
        }
        None => None,
    };
    let dir = match &oci_target {
        Some((_, staging)) => &staging.path().to_path_buf(),
        None => target,
    };
    let locks = if args.lock_file {
        let (locks, lock_diags) = Locks::load(Path::new(LOCK_FILE));
        if lock_diags.has_errors() {
            return Err(lock_diags);
        }
        warnings.extend(lock_diags);
        Some(locks)
    } else {
        None
    };

    let env = CliEnv::from_process();
    let (cli_config, config_diags) = cliconfig::load(&env);
    Output::new(false, !ui.color).config_problems(&config_diags);
    let client = crate::http::build_client()?;
    let network = NetworkSources::new(&cli_config, &env, client.clone());
    let options = SourceOptions {
        plugin_dirs: &[],
        cli_config: &cli_config,
        env: &env,
        launch_dir,
        work_dir: Path::new("."),
        network: &network,
    };
    let (source, offline, source_diags): (Arc<dyn Source>, _, _) = if args.offline {
        let (source, diags) = build_offline_source(&options, platforms.clone(), Some(dir));
        (source.clone(), Some(source), diags)
    } else {
        let (source, diags) = build_source_excluding(&options, Some(dir));
        (source, None, diags)
    };
    if source_diags.has_errors() {
        return Err(source_diags);
    }
    ui.print_diagnostics(&source_diags);

    let staging = std::fs::create_dir_all(dir)
        .and_then(|()| {
            tempfile::Builder::new()
                .prefix(".tfinstall-mirror-")
                .tempdir_in(dir)
        })
        .map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Cannot create the mirror directory",
                format!(
                    "Could not create {} or a staging directory in it: {err}. Check that the path is a writable directory.",
                    dir.display()
                ),
            ))
        })?;
    // One header slot per provider, then one slot per platform.
    let slots_per_provider = 1 + platforms.len();
    let run = Run {
        dir: dir.clone(),
        source,
        downloader: Downloader::new(client, DownloadSettings::from_env())
            .with_netrc(cli_config.netrc.clone()),
        permits: Semaphore::new(args.parallelism.max(1)),
        staging,
        counter: AtomicUsize::new(0),
        output: OrderedOutput::new(requirements.len() * slots_per_provider),
        platforms,
        locks,
        offline,
        cache: cli_config.plugin_cache_dir.as_ref().map(PluginCache::new),
        unpacked_layout: oci_target.is_none(),
        policy,
    };
    let tasks = requirements
        .iter()
        .enumerate()
        .map(|(i, (provider, constraints))| {
            mirror_provider(&run, i * slots_per_provider, provider, constraints)
        });
    let results = futures_util::future::join_all(tasks).await;
    // On any failure the indexes keep describing only what they did before.
    let mirrored: Vec<Mirrored> = Diagnostics::collect(results)?
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    if let Some((template, _staging)) = &oci_target {
        let registries = network.oci_registries();
        let staged = mirrored
            .into_iter()
            .map(|m| Staged {
                archive: packed_path(&run.dir, &m.provider, &m.version, &m.platform),
                provider: m.provider,
                version: m.version,
                platform: m.platform,
            })
            .collect();
        let say = |line: String| crate::stdio::outln!("{line}");
        publish::push(template, &registries, staged, &say).await?;
        return Ok(warnings);
    }
    let dir = run.dir.clone();
    tokio::task::spawn_blocking(move || update_indexes(&dir, &mirrored))
        .await
        .map_err(|err| {
            Diagnostics::from(Diagnostic::error(
                "Failed to update indexes",
                err.to_string(),
            ))
        })??;
    Ok(warnings)
}

async fn mirror_provider(
    run: &Run,
    first_slot: usize,
    provider: &ProviderAddr,
    constraints: &VersionConstraints,
) -> Result<Vec<Option<Mirrored>>, Diagnostics> {
    let platform_slots = (first_slot + 1)..(first_slot + 1 + run.platforms.len());
    let finish_all = || {
        run.output.finish(first_slot);
        platform_slots
            .clone()
            .for_each(|slot| run.output.finish(slot));
    };
    if provider.is_builtin() {
        run.output.line(
            first_slot,
            format!(
                "- Skipping {} because it is built in to Terraform CLI",
                provider.for_display()
            ),
        );
        finish_all();
        return Ok(Vec::new());
    }
    run.output.line(
        first_slot,
        format!("- Mirroring {}...", provider.for_display()),
    );
    let version = match select_version(run, provider, constraints).await {
        Ok((version, line)) => {
            run.output.line(first_slot, line);
            run.output.finish(first_slot);
            version
        }
        Err(diag) => {
            finish_all();
            return Err(diag.into());
        }
    };
    let jobs = run
        .platforms
        .iter()
        .zip(platform_slots)
        .map(|(platform, slot)| {
            let version = &version;
            async move {
                let result = mirror_package(run, slot, provider, version, platform).await;
                run.output.finish(slot);
                result
            }
        });
    Diagnostics::collect(futures_util::future::join_all(jobs).await)
}

/// The locked version when the lock file has one (Terraform ≥ 1.4), else the
/// newest acceptable one; with the line that says which and why.
async fn select_version(
    run: &Run,
    provider: &ProviderAddr,
    constraints: &VersionConstraints,
) -> Result<(Version, String), Diagnostic> {
    let (whence, held) = match &run.offline {
        Some(offline) => (
            "offline",
            held_offline(&offline.held(provider).await, &run.platforms),
        ),
        None => ("from its origin registry", String::new()),
    };
    let not_available = |err: String| {
        Diagnostic::error(
            "Provider not available",
            format!("Failed to download {provider} {whence}: {err}{held}."),
        )
    };
    let available = {
        let _permit = run.permits.acquire().await;
        run.source
            .available_versions(provider)
            .await
            .map_err(|err| not_available(err.to_string()))?
    };
    let constraints_text = constraints.to_string();
    if let Some(lock) = run.locks.as_ref().and_then(|l| l.get(provider)) {
        if let Some((_, refused)) = run
            .policy
            .as_ref()
            .and_then(|policy| policy.refuse_locked(provider, &lock.version))
        {
            return Err(refused);
        }
        if !constraints.allows(&lock.version) {
            return Err(Diagnostic::error(
                "Inconsistent dependency lock file",
                format!(
                    "The dependency lock file selects {} v{}, which does not match the configured version constraint {constraints_text}.\n\nTo update the locked dependency selections to match a changed configuration, run:\n  terraform init -upgrade",
                    provider.for_display(),
                    lock.version
                ),
            ));
        }
        if !available.versions.contains(&lock.version) {
            return Err(not_available(format!(
                "the version {} selected by the dependency lock file is no longer available",
                lock.version
            )));
        }
        let line = format!(
            "  - Selected v{} to match dependency lock file",
            lock.version
        );
        return Ok((lock.version.clone(), line));
    }
    let (versions, removed) = match &run.policy {
        Some(policy) => policy.screen(provider, &available.versions),
        None => (available.versions.clone(), Vec::new()),
    };
    let Some(version) = constraints.newest_allowed(&versions) else {
        if let Some(refused) = run
            .policy
            .as_ref()
            .and_then(|policy| policy.none_allowed(provider, constraints, &removed))
        {
            return Err(refused);
        }
        return Err(not_available(format!(
            "no releases match the given constraints {constraints_text}"
        )));
    };
    let line = if constraints_text.is_empty() {
        format!("  - Selected v{version} with no constraints")
    } else {
        format!("  - Selected v{version} to meet constraints {constraints_text}")
    };
    Ok((version.clone(), line))
}

/// What `-offline` could have mirrored instead, and how to get more.
fn held_offline(held: &[(Version, Vec<Platform>)], platforms: &[Platform]) -> String {
    let listed: Vec<String> = held
        .iter()
        .map(|(version, held_for)| match held_for.as_slice() {
            [] => format!("{version} for none of them"),
            some if some.len() == platforms.len() => format!("{version} for all of them"),
            some => {
                let names: Vec<String> = some.iter().map(ToString::to_string).collect();
                format!("{version} for {} only", names.join(", "))
            }
        })
        .collect();
    let held = if listed.is_empty() {
        "no version of it".to_owned()
    } else {
        listed.join("; ")
    };
    let asked: Vec<String> = platforms.iter().map(ToString::to_string).collect();
    format!(
        ". With -offline, the plugin cache and the local directories hold, of the platforms asked for ({}): {held}. Run without -offline to fetch it, or fill the cache with tfinstall cache warm",
        asked.join(", ")
    )
}

async fn mirror_package(
    run: &Run,
    slot: usize,
    provider: &ProviderAddr,
    version: &Version,
    platform: &Platform,
) -> Result<Option<Mirrored>, Diagnostic> {
    let _permit = run.permits.acquire().await;
    let failed = |summary: &str, err: String| {
        Diagnostic::error(
            summary,
            format!("Failed to download {provider} v{version} for {platform}: {err}."),
        )
    };
    // A registry's checksum documents are part of what it says of the
    // release; failing to get them is failing to get the release's metadata.
    let unavailable = |err: SourceError| failed("Provider release not available", err.to_string());
    let meta = run
        .source
        .package_meta(provider, version, platform)
        .await
        .map_err(unavailable)?;
    if let PackageLocation::LocalDir(src) = &meta.location
        && run.unpacked_layout
    {
        return mirror_unpacked(run, slot, provider, version, platform, src)
            .await
            .map(|()| None);
    }
    let target = packed_path(&run.dir, provider, version, platform);
    let mirrored = |hashes| Mirrored {
        provider: provider.clone(),
        version: version.clone(),
        platform: platform.clone(),
        hashes,
    };

    if target.is_file() {
        if let PackageAuthentication::Signed(signed) = &meta.authentication {
            signed.documents.get().await.map_err(unavailable)?;
        }
        match already_mirrored(&meta, &target).await {
            Some((auth, hashes)) => {
                admit(run, provider, version, &auth)?;
                let how = match auth {
                    AuthResult::Unauthenticated => String::new(),
                    auth => format!(" ({auth})"),
                };
                run.output.line(
                    slot,
                    format!("  - Package for {platform} is already in the mirror{how}"),
                );
                return Ok(Some(mirrored(hashes)));
            }
            None => run.output.line(
                slot,
                format!(
                    "  - Package for {platform} in the mirror does not match its source; replacing it"
                ),
            ),
        }
    }

    run.output
        .line(slot, format!("  - Downloading package for {platform}..."));
    let n = run.counter.fetch_add(1, Ordering::Relaxed);
    let staged = run.staging.path().join(format!("{n}-{}", meta.filename));
    let digest = alongside_documents(&meta.authentication, obtain(run, &meta, &staged))
        .await
        .map_err(|err| match err {
            StageError::Source(err) => unavailable(err),
            StageError::Package(err) => failed("Cannot download provider release", err),
            StageError::Refused(refusal) => refusal.diagnostic(),
        })?;
    let auth = verify(&meta, &staged, &digest).await.map_err(|err| {
        Diagnostic::error(
            "Invalid provider package",
            format!("Failed to authenticate {provider} v{version} for {platform}: {err}."),
        )
    })?;
    admit(run, provider, version, &auth)?;
    if !matches!(meta.authentication, PackageAuthentication::None) {
        run.output
            .line(slot, format!("  - Package authenticated: {auth}"));
    }
    let hashes = package_hashes(&staged, &digest)
        .await
        .map_err(|err| failed("Invalid provider package", err))?;
    let place = || -> std::io::Result<()> {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(&staged, &target)
    };
    place().map_err(|err| {
        Diagnostic::error(
            "Cannot download provider release",
            format!("Failed to place {provider} package into mirror directory: {err}."),
        )
    })?;
    Ok(Some(mirrored(hashes)))
}

/// Copies the unpacked package at `src` into DIR's unpacked layout: built
/// in the staging directory and renamed into place, so an interrupted run
/// leaves no partial package where filesystem mirrors look.
async fn mirror_unpacked(
    run: &Run,
    slot: usize,
    provider: &ProviderAddr,
    version: &Version,
    platform: &Platform,
    src: &Path,
) -> Result<(), Diagnostic> {
    let failed = |err: String| {
        Diagnostic::error(
            "Cannot copy provider package",
            format!(
                "Failed to copy {provider} v{version} for {platform} from {}: {err}.",
                src.display()
            ),
        )
    };
    let target = unpacked_package_dir(&run.dir, provider, version, platform);
    // A cache entry tfinstall made records the `h1:` it was verified with;
    // the copy must still have it.
    let recorded = run
        .cache
        .as_ref()
        .and_then(|cache| cache.lookup(provider, version, platform))
        .filter(|entry| same_path(&entry.dir, src))
        .and_then(|entry| entry.meta);
    // An unpacked directory vouches for nothing; a cache entry for what its
    // record says.
    let auth = recorded
        .as_ref()
        .map_or(AuthResult::Unauthenticated, |meta| {
            AuthResult::from(&meta.auth)
        });
    admit(run, provider, version, &auth)?;
    let recorded = recorded.and_then(|meta| meta.h1());

    if target.is_dir() {
        let (src_dir, target_dir) = (src.to_path_buf(), target.clone());
        let want = recorded.clone();
        // The cache's record, when there is one, is what the copy must be.
        let unchanged = blocking(move || {
            let want = match want {
                Some(h1) => h1,
                None => PackageHash::h1_of_dir(&src_dir)?,
            };
            Ok(PackageHash::h1_of_dir(&target_dir)? == want)
        })
        .await
        .unwrap_or(false);
        if unchanged {
            run.output.line(
                slot,
                format!("  - Package for {platform} is already in the mirror"),
            );
            return Ok(());
        }
        run.output.line(
            slot,
            format!(
                "  - Package for {platform} in the mirror does not match its source; replacing it"
            ),
        );
    }

    run.output.line(
        slot,
        format!("  - Copying unpacked package for {platform}..."),
    );
    let n = run.counter.fetch_add(1, Ordering::Relaxed);
    let staged = run.staging.path().join(format!("{n}-{platform}"));
    let (from, to) = (src.to_path_buf(), staged.clone());
    let h1 = blocking(move || copy_tree_hashed(&from, &to))
        .await
        .map_err(|err| failed(err.to_string()))?;
    if let Some(recorded) = recorded
        && recorded != h1
    {
        return Err(failed(format!(
            "its files hash to {h1}, but the plugin cache recorded {recorded} when it verified them; run tfinstall cache verify"
        )));
    }
    let replaced = run.staging.path().join(format!("{n}-replaced"));
    let place = || -> std::io::Result<()> {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if target.is_dir() {
            std::fs::rename(&target, &replaced)?;
        }
        std::fs::rename(&staged, &target)
    };
    place().map_err(|err| {
        Diagnostic::error(
            "Cannot copy provider package",
            format!("Failed to place {provider} package into mirror directory: {err}."),
        )
    })
}

/// The provider policy's word on a package authenticated as `auth`: a
/// refusal fails its mirroring, before anything is placed.
fn admit(
    run: &Run,
    provider: &ProviderAddr,
    version: &Version,
    auth: &AuthResult,
) -> Result<(), Diagnostic> {
    match &run.policy {
        Some(policy) => policy
            .admit(provider, version, auth)
            .map(drop)
            .map_err(|refusal| refusal.diagnostic()),
        None => Ok(()),
    }
}

/// Whether two paths name the same file, however they are spelled.
fn same_path(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// `DIR/HOST/NS/TYPE/terraform-provider-TYPE_VERSION_OS_ARCH.zip`, the path
/// Terraform's `PackedFilePath` gives (Unicode hostname).
fn packed_path(
    dir: &Path,
    provider: &ProviderAddr,
    version: &Version,
    platform: &Platform,
) -> PathBuf {
    provider_dir(dir, provider).join(format!(
        "terraform-provider-{}_{version}_{platform}.zip",
        provider.type_name
    ))
}

/// Whether the archive already at `target` is the package the source
/// offers now, checked as a fresh download would be. A source that vouches
/// for nothing (a network mirror without hashes) cannot confirm it, so it
/// is fetched again.
async fn already_mirrored(
    meta: &PackageMeta,
    target: &Path,
) -> Option<(AuthResult, Vec<PackageHash>)> {
    let path = target.to_path_buf();
    let digest = blocking(move || sha256_file(&path)).await.ok()?;
    let auth = match (&meta.authentication, &meta.location) {
        (PackageAuthentication::None, PackageLocation::LocalArchive(src)) => {
            let src = src.clone();
            let source_digest = blocking(move || sha256_file(&src)).await.ok()?;
            (source_digest == digest).then_some(AuthResult::Unauthenticated)?
        }
        (PackageAuthentication::None, _) => return None,
        _ => verify(meta, target, &digest).await.ok()?,
    };
    let hashes = package_hashes(target, &digest).await.ok()?;
    Some((auth, hashes))
}

/// Puts the package archive at `staged` and returns its SHA-256.
async fn obtain(run: &Run, meta: &PackageMeta, staged: &Path) -> Result<[u8; 32], String> {
    match &meta.location {
        PackageLocation::Http(_) | PackageLocation::OciBlob(_) => meta
            .location
            .download(&run.downloader, Destination::File(staged), &|_| {})
            .await
            .map(|downloaded| downloaded.sha256)
            .map_err(|err| err.to_string()),
        PackageLocation::LocalArchive(src) => {
            let (src, dest) = (src.clone(), staged.to_path_buf());
            blocking(move || {
                std::fs::copy(&src, &dest)?;
                sha256_file(&dest)
            })
            .await
            .map_err(|err| err.to_string())
        }
        PackageLocation::LocalDir(dir) => Err(format!(
            "the source has it only as an unpacked directory ({}), and an OCI registry holds .zip archives; mirror from a source that has the archive",
            dir.display()
        )),
    }
}

/// The source's authentication (a registry's signed checksums, or a
/// mirror's hashes) for an archive on disk. A
/// network mirror's `h1:` hashes are of the archive, as Terraform checks them.
async fn verify(
    meta: &PackageMeta,
    archive: &Path,
    digest: &[u8; 32],
) -> Result<AuthResult, String> {
    let zh = PackageHash::zh_of_digest(digest);
    let size = tokio::fs::metadata(archive)
        .await
        .map_err(|err| format!("failed to read {}: {err}", archive.display()))?
        .len();
    let (auth, _) = authenticate_archive(meta, digest, &zh, size).await?;
    if let PackageAuthentication::Hashes { listed, .. } = &meta.authentication
        && !listed.contains(&zh)
    {
        let path = archive.to_path_buf();
        let h1 = blocking(move || PackageHash::h1_of_zip(&path).map_err(std::io::Error::other))
            .await
            .map_err(|err| err.to_string())?;
        if !listed.contains(&h1) {
            return Err(mirror_mismatch(listed));
        }
    }
    Ok(auth)
}

/// `[h1, zh]` for an archive: `h1:` of its contents as Terraform's mirror
/// command records it, and the `zh:` of its bytes, so that both checks a
/// client may make find a match.
async fn package_hashes(archive: &Path, digest: &[u8; 32]) -> Result<Vec<PackageHash>, String> {
    let path = archive.to_path_buf();
    let h1 = blocking(move || PackageHash::h1_of_zip(&path).map_err(std::io::Error::other))
        .await
        .map_err(|err| format!("the package is not a valid zip archive: {err}"))?;
    Ok(vec![h1, PackageHash::zh_of_digest(digest)])
}

fn index_error(detail: String) -> Diagnostics {
    Diagnostic::error("Failed to update indexes", detail).into()
}

/// Rewrites each provider's `index.json` and `VERSION.json` from the
/// archives now in DIR, merged into what the files already list. All new
/// contents are computed before anything is written, so a problem with one
/// file leaves every file as it was.
fn update_indexes(dir: &Path, mirrored: &[Mirrored]) -> Result<(), Diagnostics> {
    let fresh: HashMap<(&ProviderAddr, &Version, &Platform), &[PackageHash]> = mirrored
        .iter()
        .map(|m| ((&m.provider, &m.version, &m.platform), m.hashes.as_slice()))
        .collect();
    // Archives by the directory holding them, which is where the indexes go.
    let mut by_dir: BTreeMap<PathBuf, Vec<(ProviderAddr, Version, Platform, PathBuf)>> =
        BTreeMap::new();
    for (provider, packages) in scan_directory(dir) {
        for package in packages {
            if let PackageLocation::LocalArchive(path) = package.location
                && let Some(parent) = path.parent()
            {
                by_dir.entry(parent.to_path_buf()).or_default().push((
                    provider.clone(),
                    package.version,
                    package.platform,
                    path,
                ));
            }
        }
    }

    let mut writes: Vec<(PathBuf, String)> = Vec::new();
    for (index_dir, archives) in by_dir {
        let index_path = index_dir.join("index.json");
        let mut versions = read_object(&index_path, "versions")?;
        let mut version_docs: BTreeMap<Version, BTreeMap<String, Value>> = BTreeMap::new();
        for (provider, version, platform, path) in archives {
            versions
                .entry(version.to_string())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if !version_docs.contains_key(&version) {
                let doc = read_object(&index_dir.join(format!("{version}.json")), "archives")?;
                version_docs.insert(version.clone(), doc);
            }
            let Some(doc) = version_docs.get_mut(&version) else {
                continue;
            };
            let key = platform.to_string();
            let hashes: Vec<PackageHash> = match fresh.get(&(&provider, &version, &platform)) {
                Some(hashes) => hashes.to_vec(),
                // Entries this run did not touch stay as they are.
                None if doc.contains_key(&key) => continue,
                None => archive_hashes(&path).map_err(|err| {
                    index_error(format!(
                        "Failed to determine a hash value for {provider} v{version} on {platform}: {err}."
                    ))
                })?,
            };
            let filename = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let hashes: Vec<Value> = hashes
                .iter()
                .map(|h| Value::String(h.to_string()))
                .collect();
            let mut entry = serde_json::Map::new();
            entry.insert("hashes".into(), Value::Array(hashes));
            entry.insert("url".into(), Value::String(filename));
            doc.insert(key, Value::Object(entry));
        }
        writes.push(render(&index_path, "versions", versions)?);
        for (version, doc) in version_docs {
            let path = index_dir.join(format!("{version}.json"));
            writes.push(render(&path, "archives", doc)?);
        }
    }

    for (path, text) in writes {
        if std::fs::read(&path).ok().as_deref() == Some(text.as_bytes()) {
            continue;
        }
        write_atomic(&path, text.as_bytes(), 0o644).map_err(|err| {
            index_error(format!(
                "Failed to write an updated JSON index {}: {err}.",
                path.display()
            ))
        })?;
    }
    Ok(())
}

/// The `field` object of an existing index file, or an empty one when the
/// file does not exist yet.
fn read_object(path: &Path, field: &str) -> Result<BTreeMap<String, Value>, Diagnostics> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(err) => {
            return Err(index_error(format!(
                "Could not read the existing index {}: {err}.",
                path.display()
            )));
        }
    };
    let invalid = |why: String| {
        index_error(format!(
            "The existing index {} is not a valid mirror index: {why}. Fix or remove it, then run tfinstall providers mirror again.",
            path.display()
        ))
    };
    let doc: Value = serde_json::from_slice(&text).map_err(|err| invalid(err.to_string()))?;
    match doc.get(field) {
        None => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => Ok(map.clone().into_iter().collect()),
        Some(_) => Err(invalid(format!("\"{field}\" is not an object"))),
    }
}

fn archive_hashes(path: &Path) -> std::io::Result<Vec<PackageHash>> {
    let digest = sha256_file(path)?;
    let h1 = PackageHash::h1_of_zip(path).map_err(std::io::Error::other)?;
    Ok(vec![h1, PackageHash::zh_of_digest(&digest)])
}

/// Go's `json.MarshalIndent(v, "", "  ")`: sorted keys, two-space indent,
/// no final newline, which is what Terraform's mirror command writes.
fn render(
    path: &Path,
    field: &str,
    map: BTreeMap<String, Value>,
) -> Result<(PathBuf, String), Diagnostics> {
    let mut doc = serde_json::Map::new();
    doc.insert(field.to_string(), Value::Object(map.into_iter().collect()));
    let text = serde_json::to_string_pretty(&Value::Object(doc)).map_err(|err| {
        index_error(format!(
            "Failed to encode the JSON index {}: {err}.",
            path.display()
        ))
    })?;
    Ok((path.to_path_buf(), text))
}
