//! `tfinstall cache warm`, `verify`, `stats` and `prune`: filling the
//! plugin and module caches ahead of time (CI images), checking them for
//! damage, and keeping them small on machines that keep them for months
//! (issue 24). Each works on the module cache alone when only
//! `TFINSTALL_MODULE_CACHE_DIR` is set.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::addr::Platform;
use std::collections::BTreeSet;
use std::time::SystemTime;

use serde_json::json;

use crate::addr::target_platforms;
use crate::cache::module_upkeep::{ModuleEntryUsage, ModulePruneCriteria, ModulePruneReport};
use crate::cache::modules::{MODULE_CACHE_DIR_ENV, ModuleCache};
use crate::cache::{CacheStats, EntryUsage, PluginCache, PruneCriteria, PruneReport};
use crate::cli::{CachePruneArgs, CacheStatsArgs, CacheVerifyArgs, CacheWarmArgs};
use crate::cliconfig::{self, CliConfig, CliEnv};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::Engine;
use crate::fetch::{DownloadSettings, Downloader};
use crate::handoff::config_file;
use crate::install::events::InstallEvent;
use crate::install::installer::{CacheUse, Installer};
use crate::install::layout::{InstallLayout, LayoutKind};
use crate::lockfile::Locks;
use crate::module_install::{ModuleSources, PreparedModules, module_cache};
use crate::output::Output;
use crate::policy::Policy;
use crate::source::configured::{NetworkSources, SourceOptions, build_source};
use crate::stdio::outln;
use crate::units::{format_age, format_size, format_utc};
use crate::workdir::configuration_requirements_staged;
use crate::workdir::engine::EngineChoice;

/// `cache warm [DIR…]`: each directory read with the engine its own files
/// choose unless `engine_flag` (`-engine`) says; directories whose engines
/// differ are warmed as two groups, one after the other, each with its
/// engine's CLI configuration (the engine is one for the whole process at
/// any time, see [`Engine::select`]).
pub async fn warm(args: CacheWarmArgs, launch_dir: PathBuf, engine_flag: Option<Engine>) -> bool {
    // One run per process: each module is read once for it.
    crate::module::remember_modules_read();
    let out = Output::new(false, args.no_color);
    let dirs = if args.dirs.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.dirs.clone()
    };
    let mut ok = true;
    let mut groups: Vec<(Engine, Vec<PathBuf>)> = Vec::new();
    for dir in dirs {
        match EngineChoice::for_dir(&dir, engine_flag) {
            Ok(choice) => match groups
                .iter_mut()
                .find(|(engine, _)| *engine == choice.engine)
            {
                Some((_, group)) => group.push(dir),
                None => groups.push((choice.engine, vec![dir])),
            },
            Err(diag) => {
                out.diagnostics(&diag.into());
                ok = false;
            }
        }
    }
    let several = groups.len() > 1;
    for (engine, dirs) in groups {
        engine.select();
        if several {
            let listed: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            outln!("\nAs {} does, for {}:", engine.name(), listed.join(", "));
        }
        match run_warm(&args, &dirs, &launch_dir, &out).await {
            Ok(warnings) => out.diagnostics(&warnings),
            Err(diags) => {
                out.diagnostics(&diags);
                ok = false;
            }
        }
    }
    ok
}

pub fn verify(args: CacheVerifyArgs) -> bool {
    let out = Output::new(false, args.no_color);
    let env = CliEnv::from_process();
    let (cli_config, config_diags) = cliconfig::load(&env);
    out.config_problems(&config_diags);
    let caches = match configured_caches(&cli_config) {
        Ok(caches) => caches,
        Err(diag) => {
            out.diagnostics(&diag.into());
            return false;
        }
    };
    let plugins = caches.plugins.as_ref().map(|cache| {
        let (checked, damage) = cache.verify();
        (cache, checked, damage)
    });
    let modules = caches.modules.as_ref().map(|modules| {
        let (checked, unrecorded, damage) = modules.verify();
        (modules, checked, unrecorded, damage)
    });
    let plugin_damage = plugins.iter().flat_map(|(_, _, damage)| damage);
    let module_damage = modules.iter().flat_map(|(_, _, _, damage)| damage);
    for problem in plugin_damage.chain(module_damage) {
        outln!("- {}: {}", problem.dir.display(), problem.problem);
    }
    let mut problems = Diagnostics::new();
    if let Some((cache, checked, damage)) = &plugins {
        if damage.is_empty() {
            outln!(
                "Checked {checked} cache entries in {}: all match what was installed.",
                cache.root().display()
            );
        } else {
            problems.push(Diagnostic::error(
                "Damaged plugin cache entries",
                format!(
                    "{} of {checked} entries in {} no longer match what was installed. Delete the directories listed above; the next tfinstall init or cache warm downloads them again.",
                    damage.len(),
                    cache.root().display()
                ),
            ));
        }
    }
    // Beside a plugin cache, a module cache with no entry (a warm of local
    // modules only makes its directory) is not mentioned; on its own, it
    // is what was asked about.
    let modules = modules
        .filter(|(_, checked, unrecorded, _)| checked + unrecorded > 0 || caches.plugins.is_none());
    if let Some((modules, checked, unrecorded, damage)) = &modules {
        if damage.is_empty() {
            outln!(
                "Checked {checked} module cache entries in {}: all match what was fetched.",
                modules.root().display()
            );
        } else {
            problems.push(Diagnostic::error(
                "Damaged module cache entries",
                format!(
                    "{} of {checked} module entries in {} no longer match what was fetched, or can be changed through a working directory. Delete the directories listed above (their files are read-only: chmod -R u+w DIR first); the next tfinstall init or cache warm fetches them again.",
                    damage.len(),
                    modules.root().display()
                ),
            ));
        }
        if *unrecorded > 0 {
            outln!(
                "{} recorded no digest to check against (made before tfinstall recorded one).",
                plural(*unrecorded, "module entry", "module entries")
            );
        }
    }
    out.diagnostics(&problems);
    !problems.has_errors()
}

/// The caches `cache stats`, `verify` and `prune` look at: a plugin cache
/// with the module cache that goes with it, or a module cache on its own
/// (only `TFINSTALL_MODULE_CACHE_DIR` set), which a user who caches only
/// modules still needs to see, check and prune. At least one is there.
struct Caches {
    plugins: Option<PluginCache>,
    /// Beside a plugin cache, `None` when its directory does not exist (no
    /// module was ever cached there).
    modules: Option<ModuleCache>,
}

impl Caches {
    /// `plugins` and the module cache that goes with it.
    fn of_plugin_cache(plugins: PluginCache) -> Caches {
        Caches {
            modules: modules_beside(&plugins),
            plugins: Some(plugins),
        }
    }
}

/// The configured plugin cache with its module cache, else the module
/// cache `TFINSTALL_MODULE_CACHE_DIR` names on its own.
fn configured_caches(cli_config: &CliConfig) -> Result<Caches, Diagnostic> {
    if let Some(dir) = &cli_config.plugin_cache_dir {
        return Ok(Caches::of_plugin_cache(PluginCache::new(dir)));
    }
    match module_cache(cli_config) {
        Some(modules) => Ok(Caches {
            plugins: None,
            modules: Some(modules),
        }),
        None => Err(no_cache_configured()),
    }
}

/// The module cache that goes with `cache`: `TFINSTALL_MODULE_CACHE_DIR`,
/// else its `.modules/`; `None` when that directory does not exist (no
/// module was ever cached there).
fn modules_beside(cache: &PluginCache) -> Option<ModuleCache> {
    ModuleCache::configured(
        std::env::var_os(MODULE_CACHE_DIR_ENV).map(PathBuf::from),
        Some(cache.root()),
    )
    .filter(|modules| modules.root().is_dir())
}

pub fn stats(args: CacheStatsArgs) -> bool {
    let out = Output::new(false, args.no_color);
    let caches = match chosen_caches(args.cache_dir.as_ref(), &out) {
        Ok(caches) => caches,
        Err(diag) => {
            out.diagnostics(&diag.into());
            return false;
        }
    };
    let plugins = caches.plugins.as_ref().map(|cache| (cache, cache.stats()));
    let modules = caches.modules.as_ref().map(|modules| {
        let entries = modules.usage();
        (modules, entries)
    });
    if args.json {
        // A module cache on its own has no plugin cache fields to give.
        let mut document = match &plugins {
            Some((cache, stats)) => plugin_stats_json(cache, stats),
            None => json!({}),
        };
        document["modules"] = json!(modules.as_ref().map(|(modules, entries)| json!({
            "cache_dir": modules.root().display().to_string(),
            "entries": entries.len(),
            "bytes": entries.iter().map(|e| e.bytes).sum::<u64>(),
            "oldest_use": entries.iter().filter_map(|e| e.last_use).min().map(format_utc),
            "newest_use": entries.iter().filter_map(|e| e.last_use).max().map(format_utc),
            "packages": module_sources(entries).iter().map(|(source, count, bytes)| json!({
                "source": source,
                "entries": count,
                "bytes": bytes,
            })).collect::<Vec<_>>(),
        })));
        outln!("{document}");
        return true;
    }
    if let Some((cache, stats)) = &plugins {
        print_plugin_stats(cache, stats);
    }
    // Beside a plugin cache, a module cache with no entry is not
    // mentioned; on its own, it is what was asked about.
    let modules = modules.filter(|(_, entries)| !entries.is_empty() || plugins.is_none());
    if let Some((modules, entries)) = &modules {
        if plugins.is_some() {
            outln!();
        }
        print_module_stats(modules, entries);
    }
    true
}

fn plugin_stats_json(cache: &PluginCache, stats: &CacheStats) -> serde_json::Value {
    json!({
        "cache_dir": cache.root().display().to_string(),
        "entries": stats.entries.len(),
        "providers": stats.providers().iter().map(|p| json!({
            "provider": p.provider.to_string(),
            "versions": p.versions.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "entries": p.entries,
            "bytes": p.bytes,
        })).collect::<Vec<_>>(),
        "bytes_on_disk": stats.bytes_on_disk,
        "bytes_saved_by_links": stats.bytes_saved_by_links,
        "oldest_use": stats.oldest_use().map(format_utc),
        "newest_use": stats.newest_use().map(format_utc),
    })
}

/// The plugin cache's part of `cache stats`: its entries and providers,
/// what they take, what hard links save, and when they were last used.
fn print_plugin_stats(cache: &PluginCache, stats: &CacheStats) {
    let providers = stats.providers();
    outln!(
        "{}: {} entries of {} providers, {} on disk; hard links into working directories save {} more.",
        cache.root().display(),
        stats.entries.len(),
        providers.len(),
        format_size(stats.bytes_on_disk),
        format_size(stats.bytes_saved_by_links),
    );
    if let (Some(oldest), Some(newest)) = (stats.oldest_use(), stats.newest_use()) {
        outln!(
            "Last used: the oldest entry {}, the newest {}.",
            when(oldest),
            when(newest)
        );
    }
    if !providers.is_empty() {
        outln!();
    }
    for p in &providers {
        outln!(
            "- {}: {} ({} {}), {}",
            p.provider.for_display(),
            p.versions
                .iter()
                .map(|v| format!("v{v}"))
                .collect::<Vec<_>>()
                .join(", "),
            p.entries,
            if p.entries == 1 { "entry" } else { "entries" },
            format_size(p.bytes),
        );
    }
}

/// The module cache's part of `cache stats`: its entries, what they take
/// (files hard-linked into working directories counted once, here), when
/// they were last used, and each source's share.
fn print_module_stats(modules: &ModuleCache, entries: &[ModuleEntryUsage]) {
    let sources = module_sources(entries);
    outln!(
        "{}: {} of {}, {}.",
        modules.root().display(),
        plural(entries.len(), "module entry", "module entries"),
        plural(sources.len(), "source", "sources"),
        format_size(entries.iter().map(|e| e.bytes).sum()),
    );
    let uses = || entries.iter().filter_map(|e| e.last_use);
    if let (Some(oldest), Some(newest)) = (uses().min(), uses().max()) {
        outln!(
            "Last used: the oldest module entry {}, the newest {}.",
            when(oldest),
            when(newest)
        );
    }
    if !sources.is_empty() {
        outln!();
    }
    for (source, count, bytes) in &sources {
        outln!(
            "- {source}: {}, {}",
            plural(*count, "entry", "entries"),
            format_size(*bytes)
        );
    }
}

/// Each source's entries and bytes, by source.
fn module_sources(entries: &[ModuleEntryUsage]) -> Vec<(String, usize, u64)> {
    let mut by_source: std::collections::BTreeMap<String, (usize, u64)> = Default::default();
    for entry in entries {
        let totals = by_source.entry(entry.source()).or_default();
        totals.0 += 1;
        totals.1 += entry.bytes;
    }
    by_source
        .into_iter()
        .map(|(source, (count, bytes))| (source, count, bytes))
        .collect()
}

pub fn prune(args: CachePruneArgs) -> bool {
    let out = Output::new(false, args.no_color);
    let prepared = chosen_caches(args.cache_dir.as_ref(), &out)
        .and_then(|caches| Ok((caches, prune_criteria(&args)?)));
    let (caches, criteria) = match prepared {
        Ok(prepared) => prepared,
        Err(diag) => {
            out.diagnostics(&diag.into());
            return false;
        }
    };
    let now = SystemTime::now();
    let plugins = caches
        .plugins
        .as_ref()
        .map(|cache| (cache, cache.prune(&criteria, args.dry_run, now)));
    let module_criteria = ModulePruneCriteria {
        unused_for: criteria.unused_for,
        keep_latest: criteria.keep_latest,
    };
    let modules = caches.modules.as_ref().map(|modules| {
        let report = modules.prune(&module_criteria, args.dry_run, now);
        (modules, report)
    });
    // The hand-off files killed `tfinstall exec` runs left behind hold
    // copies of tokens: a scheduled prune removes them too.
    let hand_offs = if args.dry_run {
        Vec::new()
    } else {
        config_file::remove_abandoned(&std::env::temp_dir())
    };
    if args.json {
        // A module cache on its own has no plugin cache fields to give.
        let mut document = match &plugins {
            Some((cache, report)) => plugin_prune_json(cache, report),
            None => json!({}),
        };
        document["dry_run"] = json!(args.dry_run);
        document["handoff_dirs_removed"] = json!(
            hand_offs
                .iter()
                .map(|dir| dir.display().to_string())
                .collect::<Vec<_>>()
        );
        document["modules"] = json!(modules.as_ref().map(|(modules, report)| json!({
            "cache_dir": modules.root().display().to_string(),
            "removed": report.removed.iter().map(|(entry, freed)| {
                let mut item = module_entry_json(entry);
                item["freed_bytes"] = json!(freed);
                item
            }).collect::<Vec<_>>(),
            "in_use": report.in_use.iter().map(module_entry_json).collect::<Vec<_>>(),
            "used_meanwhile": report.used_meanwhile.iter().map(module_entry_json).collect::<Vec<_>>(),
            "failed": report.failed.iter().map(|(entry, err)| {
                let mut item = module_entry_json(entry);
                item["error"] = json!(err);
                item
            }).collect::<Vec<_>>(),
            "kept": report.kept,
            "leftovers_removed": report.leftovers,
            "bytes_freed": report.bytes_freed(),
        })));
        outln!("{document}");
    } else {
        for dir in &hand_offs {
            outln!(
                "- Removed {}: the hand-off of a tfinstall exec that was killed",
                dir.display()
            );
        }
        if let Some((cache, report)) = &plugins {
            print_prune_report(cache, report, args.dry_run, now);
        }
        if let Some((modules, report)) = &modules {
            let anything = report.kept > 0
                || report.leftovers > 0
                || !report.removed.is_empty()
                || !report.in_use.is_empty()
                || !report.used_meanwhile.is_empty()
                || !report.failed.is_empty();
            // Beside a plugin cache, an empty module cache is not
            // mentioned; on its own, it is what was asked about.
            if anything || plugins.is_none() {
                print_module_prune_report(modules, report, &module_criteria, args.dry_run, now);
            }
        }
    }
    let plugin_failures = plugins
        .iter()
        .map(|(cache, report)| (cache.root(), report.failed.len()));
    let module_failures = modules
        .iter()
        .map(|(modules, report)| (modules.root(), report.failed.len()));
    let failed_in: Vec<(&Path, usize)> = plugin_failures
        .chain(module_failures)
        .filter(|(_, failed)| *failed > 0)
        .collect();
    if failed_in.is_empty() {
        return true;
    }
    out.diagnostics(
        &Diagnostic::error(
            "Some cache entries could not be removed",
            format!(
                "{} of the entries selected in {} could not be removed (listed above with the reason). Fix their permissions and run the prune again; they are whole entries still, or gone.",
                failed_in.iter().map(|(_, failed)| failed).sum::<usize>(),
                failed_in
                    .iter()
                    .map(|(root, _)| root.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
        )
        .into(),
    );
    false
}

fn plugin_prune_json(cache: &PluginCache, report: &PruneReport) -> serde_json::Value {
    json!({
        "cache_dir": cache.root().display().to_string(),
        "removed": report.removed.iter().map(|p| {
            let mut item = entry_json(&p.entry);
            item["freed_bytes"] = json!(p.freed);
            item
        }).collect::<Vec<_>>(),
        "in_use": report.in_use.iter().map(entry_json).collect::<Vec<_>>(),
        "used_meanwhile": report.used_meanwhile.iter().map(entry_json).collect::<Vec<_>>(),
        "failed": report.failed.iter().map(|(entry, err)| {
            let mut item = entry_json(entry);
            item["error"] = json!(err);
            item
        }).collect::<Vec<_>>(),
        "kept": report.kept,
        "leftovers_removed": report.leftovers,
        "bytes_freed": report.bytes_freed(),
    })
}

fn print_module_prune_report(
    modules: &ModuleCache,
    report: &ModulePruneReport,
    criteria: &ModulePruneCriteria,
    dry_run: bool,
    now: SystemTime,
) {
    outln!();
    if report.leftovers > 0 {
        outln!(
            "- Cleaned up {} of the module cache left over from an interrupted run",
            plural(report.leftovers, "item", "items")
        );
    }
    let verb = if dry_run { "Would remove" } else { "Removed" };
    for (entry, freed) in &report.removed {
        let ago = entry.last_use.map_or(String::new(), |used| {
            format!(
                ", last used {} ago",
                format_age(now.duration_since(used).unwrap_or_default())
            )
        });
        outln!(
            "- {verb} module {} ({}{ago}): frees {}",
            entry.describe(),
            entry.dir.display(),
            format_size(*freed)
        );
    }
    for entry in &report.in_use {
        outln!(
            "- Skipped module {}: a running tfinstall is using it; a later prune removes it",
            entry.describe()
        );
    }
    for entry in &report.used_meanwhile {
        outln!("- Kept module {}: a run used it just now", entry.describe());
    }
    for (entry, err) in &report.failed {
        outln!("- Could not remove module {}: {err}", entry.describe());
    }
    let mut summary = format!(
        "{verb} {} from {}, {} {}; kept {}",
        plural(report.removed.len(), "module entry", "module entries"),
        modules.root().display(),
        if dry_run { "freeing" } else { "freed" },
        format_size(report.bytes_freed()),
        report.kept + report.used_meanwhile.len(),
    );
    if !report.in_use.is_empty() {
        summary.push_str(&format!("; skipped {} in use", report.in_use.len()));
    }
    if criteria.is_empty() {
        summary
            .push_str(" (lock files name no module: -unused-for or -keep-latest prunes modules)");
    }
    summary.push('.');
    outln!("{summary}");
}

fn module_entry_json(entry: &ModuleEntryUsage) -> serde_json::Value {
    json!({
        "package": entry.describe(),
        "source": entry.source(),
        "dir": entry.dir.display().to_string(),
        "last_use": entry.last_use.map(format_utc),
        "bytes": entry.bytes,
    })
}

fn print_prune_report(cache: &PluginCache, report: &PruneReport, dry_run: bool, now: SystemTime) {
    let ago = |entry: &EntryUsage| {
        entry.last_use.map_or(String::new(), |used| {
            format!(
                ", last used {} ago",
                format_age(now.duration_since(used).unwrap_or_default())
            )
        })
    };
    let name = |entry: &EntryUsage| {
        format!(
            "{} v{} for {}",
            entry.provider.for_display(),
            entry.version,
            entry.platform
        )
    };
    if report.leftovers > 0 {
        outln!(
            "- Cleaned up {} left over from an interrupted removal or fill",
            plural(report.leftovers, "item", "items")
        );
    }
    let verb = if dry_run { "Would remove" } else { "Removed" };
    for pruned in &report.removed {
        outln!(
            "- {verb} {} ({}{}): frees {}",
            name(&pruned.entry),
            pruned.entry.dir.display(),
            ago(&pruned.entry),
            format_size(pruned.freed)
        );
    }
    for entry in &report.in_use {
        outln!(
            "- Skipped {}: a running tfinstall is using it; a later prune removes it",
            name(entry)
        );
    }
    for entry in &report.used_meanwhile {
        outln!("- Kept {}: a run used it just now", name(entry));
    }
    for (entry, err) in &report.failed {
        outln!("- Could not remove {}: {err}", name(entry));
    }
    let bytes: u64 = report.removed.iter().map(|p| p.entry.bytes).sum();
    let freed = report.bytes_freed();
    let mut summary = format!(
        "\n{} {} from {}, {} {}",
        if dry_run { "Would remove" } else { "Removed" },
        plural(report.removed.len(), "entry", "entries"),
        cache.root().display(),
        if dry_run { "freeing" } else { "freed" },
        format_size(freed),
    );
    if bytes > freed {
        summary.push_str(&format!(
            " ({} more stays on disk while working directories hard-link it)",
            format_size(bytes - freed)
        ));
    }
    summary.push_str(&format!(
        "; kept {}",
        report.kept + report.used_meanwhile.len()
    ));
    if !report.in_use.is_empty() {
        summary.push_str(&format!("; skipped {} in use", report.in_use.len()));
    }
    summary.push('.');
    outln!("{summary}");
}

fn entry_json(entry: &EntryUsage) -> serde_json::Value {
    json!({
        "provider": entry.provider.to_string(),
        "version": entry.version.to_string(),
        "platform": entry.platform.to_string(),
        "dir": entry.dir.display().to_string(),
        "last_use": entry.last_use.map(format_utc),
        "bytes": entry.bytes,
    })
}

fn when(time: SystemTime) -> String {
    let age = SystemTime::now().duration_since(time).unwrap_or_default();
    format!("{} ({} ago)", format_utc(time), format_age(age))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `-cache-dir` (a plugin cache or serve store) with its module cache, else
/// the configured caches; the directory looked at must exist (a typo must
/// not read as an empty cache).
fn chosen_caches(given: Option<&PathBuf>, out: &Output) -> Result<Caches, Diagnostic> {
    let caches = match given {
        Some(dir) => Caches::of_plugin_cache(PluginCache::new(dir)),
        None => {
            let (cli_config, config_diags) = cliconfig::load(&CliEnv::from_process());
            out.config_problems(&config_diags);
            configured_caches(&cli_config)?
        }
    };
    let missing = |root: &Path, fix: &str| {
        Diagnostic::error(
            "No such cache directory",
            format!("{} is not a directory. {fix}", root.display()),
        )
    };
    match (&caches.plugins, &caches.modules) {
        (Some(plugins), _) if !plugins.root().is_dir() => Err(missing(
            plugins.root(),
            "Name the plugin cache or serve store with -cache-dir=DIR, or check plugin_cache_dir / TF_PLUGIN_CACHE_DIR.",
        )),
        (None, Some(modules)) if !modules.root().is_dir() => Err(missing(
            modules.root(),
            "Check TFINSTALL_MODULE_CACHE_DIR (the first init, get or cache warm that caches a module makes it), or name a plugin cache with -cache-dir=DIR.",
        )),
        _ => Ok(caches),
    }
}

/// The criteria the flags give; every lock file is read before anything
/// is removed, so a bad one stops the prune whole.
fn prune_criteria(args: &CachePruneArgs) -> Result<PruneCriteria, Diagnostic> {
    let mut criteria = PruneCriteria {
        unused_for: args.unused_for,
        keep_latest: args.keep_latest.map(|n| n as usize),
        keep_locked: None,
    };
    if !args.keep_lock_files.is_empty() {
        let mut locked = BTreeSet::new();
        for pattern in &args.keep_lock_files {
            let files = expand_glob(pattern);
            if files.is_empty() {
                return Err(Diagnostic::error(
                    "No such lock file",
                    format!(
                        "-keep-lock-file={pattern} names no file. Check the path (quote a glob so the shell leaves it to tfinstall); nothing was removed."
                    ),
                ));
            }
            for file in files {
                let (locks, diags) = Locks::load(&file);
                if let Some(problem) = diags
                    .iter()
                    .find(|d| d.severity == crate::diag::Severity::Error)
                {
                    return Err(Diagnostic::error(
                        "Unreadable lock file",
                        format!(
                            "-keep-lock-file names {}, which cannot be read as a lock file: {}: {}. Fix or leave out that file; nothing was removed.",
                            file.display(),
                            problem.summary,
                            problem.detail
                        ),
                    ));
                }
                locked.extend(locks.iter().map(|l| (l.addr.clone(), l.version.clone())));
            }
        }
        criteria.keep_locked = Some(locked);
    }
    if criteria.is_empty() {
        return Err(Diagnostic::error(
            "Nothing to prune by",
            "cache prune removes the entries that match every criterion given, so with none it would remove them all. Give at least one of -unused-for=DURATION (such as 30d), -keep-latest=N or -keep-lock-file=PATH; -dry-run shows what they select.",
        ));
    }
    Ok(criteria)
}

/// The existing files `pattern` names: itself when it has no wildcard,
/// else every match of `*` and `?` within a path component and of `**`
/// across any number of directories. As in a shell, a wildcard matches a
/// hidden name only when the pattern spells its dot, so `repos/*/` skips
/// `.git` and `.terraform`; the usual `.terraform.lock.hcl` is spelled
/// out, so it is found.
fn expand_glob(pattern: &str) -> Vec<PathBuf> {
    let path = Path::new(pattern);
    if !pattern.contains(['*', '?']) {
        return if path.is_file() {
            vec![path.to_path_buf()]
        } else {
            Vec::new()
        };
    }
    let mut bases = vec![PathBuf::new()];
    for component in path.components() {
        let std::path::Component::Normal(part) = component else {
            for base in &mut bases {
                base.push(component);
            }
            continue;
        };
        let part = part.to_string_lossy();
        if part == "**" {
            let mut all = Vec::new();
            for base in bases {
                descend(&base, &mut all);
            }
            bases = all;
        } else if part.contains(['*', '?']) {
            bases = bases
                .iter()
                .flat_map(|base| children(base))
                .filter(|child| {
                    let name = child.file_name().unwrap_or_default().to_string_lossy();
                    (!name.starts_with('.') || part.starts_with('.'))
                        && wildcard_match(part.as_bytes(), name.as_bytes())
                })
                .collect();
        } else {
            for base in &mut bases {
                base.push(part.as_ref());
            }
        }
    }
    let mut files: Vec<PathBuf> = bases.into_iter().filter(|p| p.is_file()).collect();
    files.sort();
    files.dedup();
    files
}

fn children(dir: &Path) -> Vec<PathBuf> {
    let listed = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::read_dir(listed)
        .map(|entries| entries.flatten().map(|e| dir.join(e.file_name())).collect())
        .unwrap_or_default()
}

/// `dir` and every directory below it that is not hidden.
fn descend(dir: &Path, into: &mut Vec<PathBuf>) {
    into.push(dir.to_path_buf());
    for child in children(dir) {
        let hidden = child
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if !hidden && std::fs::symlink_metadata(&child).is_ok_and(|m| m.is_dir()) {
            descend(&child, into);
        }
    }
}

fn wildcard_match(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            wildcard_match(&pattern[1..], name)
                || (!name.is_empty() && wildcard_match(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => wildcard_match(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => wildcard_match(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// Neither a plugin cache nor a module cache is configured: nothing for
/// the `cache` commands to work on.
fn no_cache_configured() -> Diagnostic {
    Diagnostic::error(
        "No plugin cache configured",
        "Set plugin_cache_dir in the CLI configuration (~/.terraformrc or the file TF_CLI_CONFIG_FILE names), or the TF_PLUGIN_CACHE_DIR environment variable, to the directory to use; its .modules/ caches modules too. To cache only modules, set TFINSTALL_MODULE_CACHE_DIR instead.",
    )
}

async fn run_warm(
    args: &CacheWarmArgs,
    dirs: &[PathBuf],
    launch_dir: &Path,
    out: &Arc<Output>,
) -> Result<Diagnostics, Diagnostics> {
    let platforms = target_platforms(&args.platforms)?;
    let policy = Policy::from_flag(args.policy.as_deref())?;
    if let Some(policy) = &policy {
        out.diagnostics(policy.warnings());
    }
    let env = CliEnv::from_process();
    let (mut cli_config, mut config_diags) = cliconfig::load(&env);
    // Filling a cache that does not exist yet (a fresh CI image) is what
    // warming is for: make it, then read the configuration again without
    // the "cannot be opened" problem Terraform would report.
    if let Some(dir) = cli_config.plugin_cache_dir.clone()
        && !dir.exists()
    {
        std::fs::create_dir_all(&dir).map_err(|err| {
            Diagnostic::error(
                "Cannot create the plugin cache",
                format!(
                    "Could not create the plugin cache directory {}: {err}. Create it, or point plugin_cache_dir / TF_PLUGIN_CACHE_DIR at a directory you can write.",
                    dir.display()
                ),
            )
        })?;
        (cli_config, config_diags) = cliconfig::load(&env);
    }
    out.config_problems(&config_diags);
    let module_cache = module_cache(&cli_config);
    let plugin_cache = cli_config.plugin_cache_dir.as_ref().map(PluginCache::new);
    if plugin_cache.is_none() && module_cache.is_none() {
        return Err(no_cache_configured().into());
    }
    let client = crate::http::build_client()?;
    let network = NetworkSources::new(&cli_config, &env, client.clone());
    let mut warnings = Diagnostics::new();
    // The provider sources are read before anything is fetched, so that a
    // mistake in them stops the warm before it starts.
    let providers = match plugin_cache {
        Some(cache) => {
            let (source, source_diags) = build_source(&SourceOptions {
                plugin_dirs: &args.plugin_dirs,
                cli_config: &cli_config,
                env: &env,
                launch_dir,
                work_dir: Path::new("."),
                network: &network,
            });
            if source_diags.has_errors() {
                return Err(source_diags);
            }
            warnings.extend(source_diags);
            Some((cache, source))
        }
        None => None,
    };
    // Modules first: the providers the modules require are read from them.
    let modules = ModuleSources::for_run(
        &network,
        client.clone(),
        DownloadSettings::from_env(),
        cli_config.netrc.clone(),
        args.parallelism,
    )
    .with_cache(module_cache.clone())
    .with_live_events(out.module_event_sink());
    let cached_before: BTreeSet<PathBuf> = module_cache
        .as_ref()
        .map(|cache| cache.entry_dirs().into_iter().collect())
        .unwrap_or_default();
    let installed = futures_util::future::join_all(
        dirs.iter()
            .map(|dir| warm_modules(&modules, module_cache.as_ref(), dir)),
    )
    .await;
    let mut warmed = Vec::new();
    for (dir, installed) in dirs.iter().zip(installed) {
        let installed = installed?;
        if let Some((prepared, _)) = &installed {
            warnings.extend(prepared.warnings.clone());
        }
        warmed.push((dir, installed));
    }
    let Some((cache, source)) = providers else {
        if let Some(cache) = &module_cache {
            report_warmed_modules(cache, &modules.cached_packages(), &cached_before);
            warnings.push(Diagnostic::warning(
                "Providers not warmed",
                format!(
                    "No plugin cache is configured, so cache warm filled only the module cache at {}. Set plugin_cache_dir in the CLI configuration (~/.terraformrc or the file TF_CLI_CONFIG_FILE names), or the TF_PLUGIN_CACHE_DIR environment variable, to warm providers too.",
                    cache.root().display()
                ),
            ));
        }
        return Ok(warnings);
    };
    let mut configurations = Vec::new();
    for (dir, installed) in &warmed {
        let data_dir = dir.join(crate::workdir::data_dir());
        let staged = installed
            .as_ref()
            .and_then(|(prepared, _)| prepared.staged());
        let (requirements, module_diags) =
            configuration_requirements_staged(dir, &data_dir, staged.as_ref())?;
        warnings.extend(module_diags);
        let (locks, lock_diags) = Locks::load(&dir.join(crate::workdir::LOCK_FILE));
        if lock_diags.has_errors() {
            return Err(lock_diags);
        }
        warnings.extend(lock_diags);
        configurations.push((requirements, locks));
    }
    outln!("Warming the plugin cache at {}", cache.root().display());
    // Every directory and platform at once, through one cache whose entries
    // are filled once however many of them need a package; the results are
    // then listed in the order given.
    let downloader = Arc::new(
        Downloader::new(client, DownloadSettings::from_env()).with_netrc(cli_config.netrc.clone()),
    );
    let cache_use = CacheUse::new(cache.clone(), cli_config.plugin_cache_may_break_lock_file);
    let (source, downloader, cache_use, out, cache_root, policy) = (
        &source,
        &downloader,
        &cache_use,
        &out,
        cache.root(),
        &policy,
    );
    let warms = configurations.iter().flat_map(|(requirements, locks)| {
        platforms.iter().map(move |platform| {
            let installer = Installer {
                parallelism: args.parallelism,
                cache: Some(cache_use.clone()),
                policy: policy.clone(),
                events: warm_events(Arc::clone(out)),
                // Nothing is installed: a layout in a directory that does not
                // exist keeps every "already installed" check false.
                ..Installer::new(
                    source.clone(),
                    InstallLayout::new(cache_root.join(".none"), LayoutKind::Providers),
                    platform.clone(),
                    (*downloader).clone(),
                )
            };
            async move { (platform, installer.warm(requirements, locks).await) }
        })
    });
    let (mut added, mut present) = (0, 0);
    for (platform, result) in futures_util::future::join_all(warms).await {
        for (provider, version, was_added) in result? {
            let shown = provider.for_display();
            if was_added {
                added += 1;
                outln!("- Added {shown} v{version} for {platform}");
            } else {
                present += 1;
                outln!("- {shown} v{version} for {platform} was already cached");
            }
        }
    }
    outln!(
        "\nThe plugin cache now holds every provider package the configuration needs for {}: {added} added, {present} already there.",
        platforms
            .iter()
            .map(Platform::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    // After the providers, a module cache the run did not use is not
    // mentioned.
    let used = modules.cached_packages();
    if let Some(cache) = module_cache.as_ref().filter(|_| !used.is_empty()) {
        outln!();
        report_warmed_modules(cache, &used, &cached_before);
    }
    Ok(warnings)
}

/// Fills the module cache with every remote package the configuration in
/// `dir` calls, nested ones included (registry modules calling others,
/// local modules inside remote ones), and the registry answers `init
/// -offline` reads: by installing its modules as `init` does, into a
/// scratch directory in the module cache's `.tmp/`, where the files are
/// hard links to the entries. The staged modules are what the providers
/// the modules require are read from; the scratch directory goes with the
/// result. `None` when the configuration calls no module (or no module
/// cache is configured, which a configured plugin cache rules out).
async fn warm_modules(
    sources: &ModuleSources,
    cache: Option<&ModuleCache>,
    dir: &Path,
) -> Result<Option<(PreparedModules, tempfile::TempDir)>, Diagnostics> {
    let Some(cache) = cache else {
        return Ok(None);
    };
    let calls_any =
        crate::module::module_calls(dir, Path::new(""), None).is_ok_and(|calls| !calls.is_empty());
    if !calls_any {
        return Ok(None);
    }
    let scratch = cache.fetch_dir().map_err(|err| {
        Diagnostic::error(
            "Cannot use the module cache",
            format!(
                "Could not create a directory in {}: {err}. Check that you can write the module cache (beside the plugin cache, or TFINSTALL_MODULE_CACHE_DIR).",
                cache.root().display()
            ),
        )
    })?;
    let prepared = crate::module_install::prepare(sources, dir, scratch.path(), false, &()).await?;
    Ok(Some((prepared, scratch)))
}

/// One line per module package the run used from the module cache, then
/// how many it added.
fn report_warmed_modules(
    cache: &ModuleCache,
    used: &[(String, PathBuf)],
    cached_before: &BTreeSet<PathBuf>,
) {
    outln!("Warming the module cache at {}", cache.root().display());
    let (mut added, mut present) = (0, 0);
    for (addr, dir) in used {
        let id = dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        if cached_before.contains(dir) {
            present += 1;
            outln!("- Module package {addr} ({id}) was already cached");
        } else {
            added += 1;
            outln!("- Added module package {addr} ({id})");
        }
    }
    outln!(
        "\nThe module cache now holds every module package the configuration calls, and the registry answers init -offline needs: {added} added, {present} already there."
    );
}

/// Only warnings and the wait notice are shown while warming; the result
/// lines say per platform what happened to each package.
fn warm_events(out: Arc<Output>) -> crate::install::events::EventSink {
    Arc::new(move |event| {
        if matches!(
            event,
            InstallEvent::Warning(_) | InstallEvent::WaitingForCache { .. }
        ) {
            out.event(&event);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_within_a_name() {
        assert!(wildcard_match(b"*.hcl", b".terraform.lock.hcl"));
        assert!(wildcard_match(b"app-?", b"app-1"));
        assert!(!wildcard_match(b"app-?", b"app-12"));
        assert!(wildcard_match(b"a*b*c", b"aXXbYc"));
        assert!(!wildcard_match(b"a*b*c", b"aXXbY"));
    }

    #[test]
    fn globs_find_lock_files_at_any_depth() {
        let root = tempfile::tempdir().unwrap();
        for dir in ["repos/a", "repos/b/live/prod", "repos/.hidden", "other"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
            std::fs::write(root.path().join(dir).join(".terraform.lock.hcl"), "").unwrap();
        }
        let base = root.path().display();
        let found = |pattern: &str| -> Vec<String> {
            expand_glob(&format!("{base}/{pattern}"))
                .iter()
                .map(|p| p.strip_prefix(root.path()).unwrap().display().to_string())
                .collect()
        };
        assert_eq!(
            found("repos/*/.terraform.lock.hcl"),
            ["repos/a/.terraform.lock.hcl"]
        );
        assert_eq!(
            found("repos/**/.terraform.lock.hcl"),
            [
                "repos/a/.terraform.lock.hcl",
                "repos/b/live/prod/.terraform.lock.hcl"
            ]
        );
        assert_eq!(
            found("other/.terraform.lock.hcl"),
            ["other/.terraform.lock.hcl"]
        );
        assert_eq!(found("nowhere/*.hcl"), Vec::<String>::new());
        assert_eq!(found("repos/a/missing.hcl"), Vec::<String>::new());
    }
}
