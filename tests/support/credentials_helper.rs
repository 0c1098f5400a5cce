//! A real credentials helper: a `#!/bin/sh` script installed where
//! Terraform looks for one, below `HOME/.terraform.d/plugins`, that records
//! the arguments of every run and then does whatever the test asks.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

pub struct CredentialsHelper {
    /// The installed script, which tfinstall must name in its errors.
    pub path: PathBuf,
    log: PathBuf,
}

impl CredentialsHelper {
    /// Installs `file` (e.g. `terraform-credentials-test`, or
    /// `linux_amd64/terraform-credentials-test_v1.0.0`) below the plugins
    /// directory of `home`. Each run appends its arguments to a log, then
    /// runs the shell commands of `body`.
    pub fn install(home: &Path, file: &str, body: &str) -> CredentialsHelper {
        let path = home.join(".terraform.d/plugins").join(file);
        let log = home.join(format!("{}.log", file.replace('/', "-")));
        std::fs::create_dir_all(path.parent().unwrap()).expect("create plugins dir");
        let script = format!(
            "#!/bin/sh\nfor arg in \"$@\"; do printf '[%s]' \"$arg\"; done >> '{log}'\necho >> '{log}'\n{body}\n",
            log = log.display()
        );
        std::fs::write(&path, script).expect("write credentials helper");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("make credentials helper executable");
        CredentialsHelper { path, log }
    }

    /// One line per run, each argument as `[arg]`.
    pub fn runs(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// A `credentials_helper` block for the CLI configuration.
pub fn credentials_helper_block(name: &str, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|arg| format!("{arg:?}")).collect();
    format!(
        "credentials_helper \"{name}\" {{\n  args = [{}]\n}}\n",
        args.join(", ")
    )
}
