//! OpenTofu's `oci_mirror` installation method and `providers mirror
//! oci://…` end to end, against a real registry (CNCF Distribution, Debian's
//! `docker-registry`) on 127.0.0.1 with TLS from a test CA and htpasswd
//! Basic authentication. Registry contents for the install tests are
//! published by the test support's own pusher, written from OpenTofu's
//! documentation and independent of tfinstall.

mod support;

use support::oci_registry::{OciRegistry, PASSWORD, USER};
use support::*;

const NULL: &str = "registry.terraform.io/hashicorp/null";

/// A registry with a project that trusts its CA and nothing else.
struct Setup {
    ca: TestCa,
    registry: OciRegistry,
    project: Project,
}

impl Setup {
    fn new() -> Setup {
        let ca = TestCa::new();
        let registry = OciRegistry::start(&ca);
        let mut project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
        project.trust(&ca);
        Setup {
            ca,
            registry,
            project,
        }
    }

    /// Publishes `hashicorp/null` `version` for `platforms` under
    /// `tf/hashicorp/null`; the spec, to check against.
    fn publish_null(&self, version: &str, platforms: &[&str]) -> ProviderSpec {
        let spec = ProviderSpec::new("hashicorp", "null", version).platforms(platforms);
        let packages: Vec<(&str, Vec<u8>)> = platforms
            .iter()
            .map(|p| (*p, spec.package_zip(p)))
            .collect();
        self.registry.publish(
            &self.ca,
            "tf/hashicorp/null",
            &version.replace('+', "_"),
            &packages,
        );
        spec
    }

    /// A CLI configuration with one `oci_mirror` for every provider of the
    /// default registry, and `credentials` (an `oci_credentials` block, say).
    fn oci_config(&mut self, credentials: &str) {
        let config = format!(
            "provider_installation {{\n  oci_mirror {{\n    repository_template = \"{}/tf/${{namespace}}/${{type}}\"\n    include = [\"registry.terraform.io/*/*\"]\n  }}\n}}\n{credentials}",
            self.registry.host
        );
        self.project.cli_config(&config);
    }

    fn login_block(&self) -> String {
        format!(
            "oci_credentials \"{}\" {{\n  username = \"{USER}\"\n  password = \"{PASSWORD}\"\n}}\n",
            self.registry.host
        )
    }
}

#[test]
fn installs_from_an_oci_mirror_and_locks_h1_and_the_layer_digest() {
    let mut setup = Setup::new();
    let platform = current_platform();
    let spec = setup.publish_null("3.2.2", &[&platform, "plan9_amd64"]);
    setup.publish_null("3.2.1", &[&platform]);
    let login = setup.login_block();
    setup.oci_config(&login);

    let run = setup.project.init(&[]);
    run.assert_success()
        .assert_contains("- Installing hashicorp/null v3.2.2...")
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)")
        .assert_contains("Incomplete lock file information for providers");
    let zip = spec.package_zip(&platform);
    assert_eq!(
        std::fs::read(
            setup
                .project
                .installed_dir(NULL, "3.2.2")
                .join(spec.executable_name())
        )
        .unwrap(),
        spec.executable_content(&platform)
    );
    assert_eq!(
        setup.project.lock(),
        lock_file(&[lock_block(
            NULL,
            "3.2.2",
            "~> 3.2",
            &[spec.h1(&platform), zh_hash(&zip)]
        )])
    );

    // With both hashes locked, a fresh install has nothing to warn about.
    std::fs::remove_dir_all(setup.project.data()).unwrap();
    setup
        .project
        .init(&[])
        .assert_success()
        .assert_not_contains("Incomplete lock file information");
}
