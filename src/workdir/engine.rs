//! Whose rules a working directory is read and installed with: Terraform's
//! or OpenTofu's ([`Engine`]). The flag decides when given; else the files
//! say: `*.tofu` files only OpenTofu reads, and a lock file whose every
//! entry is on one engine's default registry was made by that engine (a
//! sixth of real OpenTofu projects have a lock file and no `*.tofu` file).
//! A committed lock file is the team's record: it is never rewritten for
//! the other engine unasked, so where the two signals disagree the choice
//! is left to the user.

use std::path::Path;

use crate::diag::Diagnostic;
use crate::engine::Engine;
use crate::lockfile::Locks;

use super::{LOCK_FILE, in_dir};

/// What chose a directory's engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChosenBy {
    /// `-engine` or `TFINSTALL_ENGINE`.
    Flag,
    /// A `*.tofu` or `*.tofu.json` file in the directory.
    TofuFiles,
    /// Every entry of the lock file is on OpenTofu's registry.
    LockFile,
    /// Nothing: Terraform's rules, as ever.
    #[default]
    Default,
}

impl ChosenBy {
    /// The name `-json` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            ChosenBy::Flag => "flag",
            ChosenBy::TofuFiles => "tofu_files",
            ChosenBy::LockFile => "lock_file",
            ChosenBy::Default => "default",
        }
    }
}

/// A working directory's engine and why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineChoice {
    pub engine: Engine,
    pub chosen_by: ChosenBy,
    /// The engine whose default registry holds every entry of the lock
    /// file, when one does.
    pub lock_made_for: Option<Engine>,
}

impl EngineChoice {
    /// The engine for the working directory `dir`, given `-engine` (or
    /// `TFINSTALL_ENGINE`) as `flag`:
    /// - the flag, when given, whatever the files say;
    /// - OpenTofu when `dir` has `*.tofu` files, unless every entry of its
    ///   lock file is on `registry.terraform.io`: then Terraform made the
    ///   lock file, OpenTofu would replace its entries, and this is an
    ///   error that asks for the flag;
    /// - OpenTofu when every entry of the lock file is on
    ///   `registry.opentofu.org`;
    /// - Terraform otherwise, a lock file that mixes both registries too.
    ///
    /// A lock file that cannot be read decides nothing here; the command
    /// reports it when it reads it.
    pub fn for_dir(dir: &Path, flag: Option<Engine>) -> Result<EngineChoice, Diagnostic> {
        let lock_made_for = lock_made_for(dir);
        let choice = |engine, chosen_by| EngineChoice {
            engine,
            chosen_by,
            lock_made_for,
        };
        if let Some(engine) = flag {
            return Ok(choice(engine, ChosenBy::Flag));
        }
        if Engine::has_tofu_files(dir) {
            if lock_made_for == Some(Engine::Terraform) {
                return Err(tofu_files_with_terraform_lock(dir));
            }
            return Ok(choice(Engine::OpenTofu, ChosenBy::TofuFiles));
        }
        if lock_made_for == Some(Engine::OpenTofu) {
            return Ok(choice(Engine::OpenTofu, ChosenBy::LockFile));
        }
        Ok(choice(Engine::Terraform, ChosenBy::Default))
    }

    /// What to tell the user before installing, when the choice is one they
    /// may not expect: OpenTofu's rules because of the lock file, or the
    /// flag's rules over a lock file the other engine made.
    pub fn note(&self) -> Option<String> {
        let made_by = self.lock_made_for?;
        let lock_reason = format!(
            "every provider in {LOCK_FILE} is on {}",
            made_by.default_registry_host()
        );
        match self.chosen_by {
            ChosenBy::LockFile => Some(format!(
                "Installing as {name} does: {lock_reason}, so {name} made it. To install as {other} does instead, and rewrite the lock file for {other}, use -engine={other_flag}.",
                name = self.engine.name(),
                other = self.engine.other().name(),
                other_flag = self.engine.other().as_str(),
            )),
            ChosenBy::Flag if made_by != self.engine => Some(format!(
                "Installing as {name} does, as -engine={flag} asks, although {made_by} made {LOCK_FILE} ({lock_reason}): the lock file is rewritten for {name} where the two differ.",
                name = self.engine.name(),
                flag = self.engine.as_str(),
                made_by = made_by.name(),
            )),
            _ => None,
        }
    }

    /// The last line of `tfinstall providers`: whose rules it read with,
    /// and why when the lock file chose them.
    pub fn rules_line(&self) -> String {
        let (name, host) = (self.engine.name(), self.engine.default_registry_host());
        match self.chosen_by {
            ChosenBy::LockFile => format!(
                "Read with {name}'s rules (default registry {host}): {name} made {LOCK_FILE}, every provider in it is on {host}; -engine={other} reads with {other_name}'s.",
                other = self.engine.other().as_str(),
                other_name = self.engine.other().name(),
            ),
            _ => format!(
                "Read with {name}'s rules (-engine={}; default registry {host}).",
                self.engine.as_str()
            ),
        }
    }
}

/// The engine whose default registry holds every entry of the lock file in
/// `dir`; `None` when there is no such file, it is empty or unreadable, or
/// its entries are on other registries or on both.
fn lock_made_for(dir: &Path) -> Option<Engine> {
    let (locks, diags) = Locks::load(&in_dir(dir, LOCK_FILE));
    if diags.has_errors() || locks.is_empty() {
        return None;
    }
    [Engine::Terraform, Engine::OpenTofu]
        .into_iter()
        .find(|engine| {
            locks
                .iter()
                .all(|lock| lock.addr.hostname.as_ascii() == engine.default_registry_host())
        })
}

fn tofu_files_with_terraform_lock(dir: &Path) -> Diagnostic {
    let place = if dir == Path::new(".") {
        "This directory".to_owned()
    } else {
        format!("The directory {}", dir.display())
    };
    Diagnostic::error(
        "Lock file made by Terraform",
        format!(
            "{place} has *.tofu files, which only OpenTofu reads, but every provider in its {LOCK_FILE} is on registry.terraform.io: Terraform made the lock file. Installing as OpenTofu does would replace its entries with registry.opentofu.org ones, so tfinstall does not choose. Choose with -engine=terraform (install as Terraform does and keep the lock file) or -engine=opentofu (install as OpenTofu does and rewrite the lock file for it); TFINSTALL_ENGINE does the same."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(hosts: &[&str]) -> String {
        hosts
            .iter()
            .enumerate()
            .map(|(i, host)| {
                format!("provider \"{host}/acme/p{i}\" {{\n  version = \"1.0.0\"\n}}\n\n")
            })
            .collect()
    }

    fn choose(files: &[(&str, String)], flag: Option<Engine>) -> Result<EngineChoice, Diagnostic> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        EngineChoice::for_dir(dir.path(), flag)
    }

    fn engine_and_reason(choice: Result<EngineChoice, Diagnostic>) -> (Engine, ChosenBy) {
        let choice = choice.expect("chosen");
        (choice.engine, choice.chosen_by)
    }

    const TOFU: &str = "registry.opentofu.org";
    const TERRAFORM: &str = "registry.terraform.io";

    #[test]
    fn the_lock_file_chooses_when_every_entry_is_on_opentofus_registry() {
        let tf = ("main.tf", String::new());
        assert_eq!(
            engine_and_reason(choose(std::slice::from_ref(&tf), None)),
            (Engine::Terraform, ChosenBy::Default)
        );
        let only_tofu = (LOCK_FILE, lock(&[TOFU, TOFU]));
        let choice = choose(&[tf.clone(), only_tofu.clone()], None).unwrap();
        assert_eq!(
            (choice.engine, choice.chosen_by, choice.lock_made_for),
            (Engine::OpenTofu, ChosenBy::LockFile, Some(Engine::OpenTofu))
        );
        assert!(choice.note().unwrap().contains("-engine=terraform"));
        // Mixed, elsewhere, empty or broken: today's rule.
        for text in [
            lock(&[TOFU, TERRAFORM]),
            lock(&[TOFU, "example.com"]),
            String::new(),
            "provider {".to_owned(),
        ] {
            assert_eq!(
                engine_and_reason(choose(&[tf.clone(), (LOCK_FILE, text)], None)),
                (Engine::Terraform, ChosenBy::Default)
            );
        }
        // The flag decides, and says it overrules the lock file.
        let told = choose(&[tf.clone(), only_tofu], Some(Engine::Terraform)).unwrap();
        assert_eq!(told.engine, Engine::Terraform);
        assert!(told.note().unwrap().contains("as -engine=terraform asks"));
    }

    #[test]
    fn tofu_files_and_a_terraform_lock_file_leave_the_choice_to_the_user() {
        let tofu = ("main.tofu", String::new());
        let terraform_lock = (LOCK_FILE, lock(&[TERRAFORM]));
        let err = choose(&[tofu.clone(), terraform_lock.clone()], None).unwrap_err();
        assert_eq!(err.summary, "Lock file made by Terraform");
        assert!(err.detail.contains("-engine=terraform"));
        assert!(err.detail.contains("-engine=opentofu"));
        for engine in [Engine::Terraform, Engine::OpenTofu] {
            let told = choose(&[tofu.clone(), terraform_lock.clone()], Some(engine)).unwrap();
            assert_eq!((told.engine, told.chosen_by), (engine, ChosenBy::Flag));
        }
        for lock_text in [lock(&[TOFU]), lock(&[TOFU, TERRAFORM])] {
            assert_eq!(
                engine_and_reason(choose(&[tofu.clone(), (LOCK_FILE, lock_text)], None)),
                (Engine::OpenTofu, ChosenBy::TofuFiles)
            );
        }
    }
}
