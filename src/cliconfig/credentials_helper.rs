//! The program a `credentials_helper "NAME"` block names: an executable
//! `terraform-credentials-NAME` that Terraform finds among its global
//! plugins and runs as `… ARGS get HOSTNAME`, reading the host's credentials
//! from its JSON answer. Only `get` is ever used here: `store` and `forget`
//! serve `terraform login`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::{CliEnv, CredentialsHelper};
use crate::addr::{Hostname, Platform};
use crate::units::{format_duration, parse_duration};
use crate::version::Version;

/// Terraform waits for a helper forever. One that waits for input nobody
/// will give (an unlocked keychain, a login prompt) would hang the install
/// with nothing on screen to say why.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const TIMEOUT_VARIABLE: &str = "TFINSTALL_CREDENTIALS_HELPER_TIMEOUT";

const FILE_PREFIX: &str = "terraform-credentials-";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HelperProgram {
    executable: PathBuf,
    args: Vec<String>,
    timeout: Duration,
}

impl HelperProgram {
    /// The installed program for `helper`, if there is one. Like Terraform,
    /// it looks in the `plugins` directory of each data directory
    /// (`~/.terraform.d`; for OpenTofu also `$XDG_DATA_HOME/opentofu`) and
    /// its `OS_ARCH` subdirectory only, whatever the CLI configuration says
    /// about provider directories.
    pub fn find(helper: &CredentialsHelper, env: &CliEnv) -> Option<HelperProgram> {
        let dirs: Vec<PathBuf> = env
            .data_dirs()
            .into_iter()
            .flat_map(|dir| {
                let plugins = dir.join("plugins");
                let machine_dir = plugins.join(Platform::current().to_string());
                [plugins, machine_dir]
            })
            .collect();
        let executable = find_executable(&helper.name, &dirs)?;
        // An unusable value is ignored, as with the download settings'
        // variables: a typo should not cost anyone their credentials.
        let timeout = env
            .var(TIMEOUT_VARIABLE)
            .and_then(|value| parse_duration(value).ok())
            .unwrap_or(DEFAULT_TIMEOUT);
        Some(HelperProgram {
            executable,
            args: helper.args.clone(),
            timeout,
        })
    }

    /// The helper's token for `host`, `None` when it has none. The error
    /// says what went wrong, naming the executable; it never quotes the
    /// helper's standard output, which may hold a secret.
    pub async fn get(&self, host: &Hostname) -> Result<Option<String>, String> {
        let path = self.executable.display();
        let child = tokio::process::Command::new(&self.executable)
            .args(&self.args)
            .arg("get")
            .arg(host.as_ascii())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Dropping the output future on timeout then ends the helper.
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| format!("could not run the credentials helper {path}: {err}"))?;
        let output = tokio::time::timeout(self.timeout, child.wait_with_output())
            .await
            .map_err(|_| {
                format!(
                    "the credentials helper {path} did not answer within {} and was stopped (set {TIMEOUT_VARIABLE} to allow it longer)",
                    format_duration(self.timeout)
                )
            })?
            .map_err(|err| format!("could not run the credentials helper {path}: {err}"))?;
        if !output.status.success() {
            let how = match output.status.code() {
                Some(code) => format!("exited with status {code}"),
                None => format!("was ended ({})", output.status),
            };
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(match stderr.trim() {
                "" => format!("the credentials helper {path} {how} and printed no error message"),
                message => format!("the credentials helper {path} {how}: {message}"),
            });
        }
        parse_answer(&output.stdout).map_err(|err| {
            format!(
                "the credentials helper {path} printed something other than a JSON object like {{\"token\": \"…\"}} ({err})"
            )
        })
    }
}

/// Terraform's reading of the answer: a JSON object whose `token`, when it
/// is a string, is the token. An object without one means no credentials,
/// and so does `null`, which Go decodes as an empty map. Other keys belong
/// to other kinds of credentials and are ignored.
fn parse_answer(stdout: &[u8]) -> Result<Option<String>, serde_json::Error> {
    let answer: Option<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_slice(stdout)?;
    Ok(answer.and_then(|mut fields| match fields.remove("token") {
        Some(serde_json::Value::String(token)) => Some(token),
        _ => None,
    }))
}

/// The newest helper called `name` in `dirs`, as Terraform's plugin
/// discovery picks it: on equal versions the earlier directory, and within
/// one directory the earlier file name, wins.
fn find_executable(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let mut newest: Option<(Version, PathBuf)> = None;
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .collect();
        files.sort();
        for file in files {
            let Some((found, version)) = helper_file_name(&file) else {
                continue;
            };
            let path = dir.join(&file);
            if found != name || !is_file(&path) {
                continue;
            }
            if newest.as_ref().is_none_or(|(best, _)| version > *best) {
                newest = Some((version, path));
            }
        }
    }
    newest.map(|(_, path)| path)
}

/// The helper name and version in a file name, read as Terraform does:
/// `terraform-credentials-` (case matters there), then the rest lower-cased,
/// without `.exe`, split at `_v` into name and version, and the version cut
/// at `_x` (the protocol suffix of plugins Terraform 0.12 auto-installed).
/// No version means 0.0.0. A version that does not parse makes Terraform
/// crash; it is skipped here.
fn helper_file_name(file: &str) -> Option<(String, Version)> {
    let rest = file.strip_prefix(FILE_PREFIX)?.to_lowercase();
    let rest = rest.strip_suffix(".exe").unwrap_or(&rest);
    let (name, version) = rest.split_once("_v").unwrap_or((rest, "0.0.0"));
    let version = version.split_once("_x").map_or(version, |(v, _)| v);
    if name.is_empty() {
        return None;
    }
    Some((name.to_string(), Version::parse(version).ok()?))
}

/// A file or a symbolic link to one: what Terraform accepts as a plugin.
fn is_file(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|meta| !meta.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_terraform_reads_them() {
        let token = |text: &str| parse_answer(text.as_bytes()).map_err(|err| err.to_string());
        assert_eq!(token(r#"{"token":"abc"}"#), Ok(Some("abc".to_string())));
        assert_eq!(
            token(" \n{\"username\": \"x\", \"token\": \"abc\"}\n"),
            Ok(Some("abc".to_string()))
        );
        assert_eq!(token("{}"), Ok(None));
        assert_eq!(token("null"), Ok(None));
        assert_eq!(token(r#"{"token": 42}"#), Ok(None));
        assert_eq!(token(r#"{"token": null}"#), Ok(None));
        assert_eq!(token(r#"{"token": ""}"#), Ok(Some(String::new())));
        for garbage in [
            "",
            "token=abc",
            "[\"abc\"]",
            "\"abc\"",
            "{\"token\":\"a\"} x",
            "{",
        ] {
            assert!(token(garbage).is_err(), "{garbage:?}");
        }
    }

    #[test]
    fn file_names_give_name_and_version() {
        let read = |file: &str| helper_file_name(file).map(|(name, v)| (name, v.to_string()));
        let pair = |name: &str, version: &str| Some((name.to_string(), version.to_string()));
        assert_eq!(read("terraform-credentials-vault"), pair("vault", "0.0.0"));
        assert_eq!(
            read("terraform-credentials-vault_v1.2.3"),
            pair("vault", "1.2.3")
        );
        assert_eq!(
            read("terraform-credentials-Vault_V1.2.3_x4.exe"),
            pair("vault", "1.2.3")
        );
        assert_eq!(
            read("terraform-credentials-my-store_v2"),
            pair("my-store", "2.0.0")
        );
        assert_eq!(read("terraform-credentials-vault_vnext"), None);
        assert_eq!(read("terraform-credentials-"), None);
        assert_eq!(read("Terraform-credentials-vault"), None);
        assert_eq!(read("terraform-provider-vault"), None);
    }

    #[test]
    fn the_newest_file_wins_and_the_first_directory_breaks_ties() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        for (dir, files) in [
            (
                &a,
                &[
                    "terraform-credentials-vault_v1.0.0",
                    "terraform-credentials-other_v9.0.0",
                ][..],
            ),
            (
                &b,
                &[
                    "terraform-credentials-vault_v1.0.0",
                    "terraform-credentials-vault",
                ],
            ),
        ] {
            fs::create_dir_all(dir).unwrap();
            for file in files {
                fs::write(dir.join(file), "").unwrap();
            }
        }
        let dirs = [a.clone(), b.clone()];
        assert_eq!(
            find_executable("vault", &dirs),
            Some(a.join("terraform-credentials-vault_v1.0.0"))
        );
        fs::write(b.join("terraform-credentials-VAULT_v1.10.0"), "").unwrap();
        assert_eq!(
            find_executable("vault", &dirs),
            Some(b.join("terraform-credentials-VAULT_v1.10.0"))
        );
        // Directories are not programs, and names are compared lower-cased.
        fs::create_dir(a.join("terraform-credentials-vault_v2.0.0")).unwrap();
        assert_eq!(
            find_executable("vault", &dirs),
            Some(b.join("terraform-credentials-VAULT_v1.10.0"))
        );
        assert_eq!(find_executable("Vault", &dirs), None);
        assert_eq!(find_executable("missing", &dirs), None);
    }

    #[test]
    fn only_the_plugins_directory_and_its_platform_subdirectory_are_searched() {
        let home = tempfile::tempdir().unwrap();
        let env = CliEnv {
            profile_dir: Some(home.path().to_path_buf()),
            ..CliEnv::default()
        };
        let helper = CredentialsHelper {
            name: "vault".to_string(),
            args: vec!["--role".to_string()],
            pos: crate::diag::SourcePos::new(PathBuf::from("x"), 1, 1),
        };
        let config_dir = env.config_dir().unwrap();
        let elsewhere = config_dir.join("plugins/registry.example/terraform-credentials-vault");
        fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
        fs::write(&elsewhere, "").unwrap();
        assert_eq!(HelperProgram::find(&helper, &env), None);

        let machine_dir = config_dir
            .join("plugins")
            .join(Platform::current().to_string());
        fs::create_dir_all(&machine_dir).unwrap();
        fs::write(machine_dir.join("terraform-credentials-vault_v0.1.0"), "").unwrap();
        let found = HelperProgram::find(&helper, &env).unwrap();
        assert_eq!(
            found.executable,
            machine_dir.join("terraform-credentials-vault_v0.1.0")
        );
        assert_eq!(found.args, ["--role"]);
        assert_eq!(found.timeout, DEFAULT_TIMEOUT);

        let mut env = env;
        env.vars
            .insert(TIMEOUT_VARIABLE.to_string(), "250ms".to_string());
        let found = HelperProgram::find(&helper, &env).unwrap();
        assert_eq!(found.timeout, Duration::from_millis(250));
        env.vars
            .insert(TIMEOUT_VARIABLE.to_string(), "soon".to_string());
        let found = HelperProgram::find(&helper, &env).unwrap();
        assert_eq!(found.timeout, DEFAULT_TIMEOUT);
    }
}
