//! Terraform's provider network mirror protocol, with its hash checks and
//! credentials, end to end: the built binary installs from a static mirror
//! tree served over HTTPS by an in-process server, with a CA made for the
//! test.

mod support;

use support::*;
use tempfile::TempDir;

const NULL: &str = "registry.terraform.io/hashicorp/null";
const TOKEN: &str = "mirror-secret-token";

/// A network mirror tree below `/mirror/` on its own HTTPS server.
struct Served {
    ca: TestCa,
    server: TestServer,
    root: TempDir,
    /// The mirror base URL, `https://127.0.0.1:PORT/mirror/`.
    base: String,
    tree: PublishedTree,
}

impl Served {
    fn new(mirror: NetworkMirror) -> Self {
        let ca = TestCa::new();
        let server = TestServer::https(&ca);
        Self::on(ca, server, mirror)
    }

    fn on(ca: TestCa, server: TestServer, mirror: NetworkMirror) -> Self {
        let root = tempfile::tempdir().expect("mirror root");
        let base = format!("{}mirror/", server.url());
        let tree = mirror.write(&root.path().join("mirror"), &base);
        server.serve_dir(root.path());
        Served {
            ca,
            server,
            root,
            base,
            tree,
        }
    }

    fn package(&self, version: &str) -> &PackageInfo {
        self.tree.package("null", version, &current_platform())
    }

    /// Server path of a provider document, e.g. `index.json` or `3.2.2.json`.
    fn doc_path(&self, file: &str) -> String {
        format!("/mirror/registry.terraform.io/hashicorp/null/{file}")
    }

    fn zip_path(&self, version: &str) -> String {
        self.package(version)
            .url_path
            .clone()
            .expect("mirror zip path")
    }

    /// `tfinstall init ARGS…` in `project`, trusting this server.
    fn run(&self, project: &Project, args: &[&str]) -> Run {
        let mut command = project.command(&["init"]);
        command.args(args);
        self.ca.configure(&mut command);
        Run::of(command)
    }

    fn init(&self, project: &Project) -> Run {
        self.run(project, &[])
    }

    fn upgrade(&self, project: &Project) -> Run {
        self.run(project, &["-upgrade"])
    }
}

fn null_mirror() -> NetworkMirror {
    NetworkMirror::new()
        .provider(ProviderSpec::new("hashicorp", "null", "3.2.1"))
        .provider(ProviderSpec::new("hashicorp", "null", "3.2.2"))
}

fn null_project() -> Project {
    Project::requiring(&[("null", "hashicorp/null", "~> 3.2")])
}

/// The lock file Terraform 1.x writes for a mirror install: the locally
/// computed `h1:` only, because mirror hashes are not signed (Terraform's
/// `NewPackageHashAuthentication`).
fn h1_only_lock(h1: &str) -> String {
    lock_file(&[lock_block(NULL, "3.2.2", "~> 3.2", &[h1])])
}

#[track_caller]
fn assert_installed_from_mirror(project: &Project, served: &Served, run: &Run, auth: &str) {
    run.assert_success()
        .assert_contains("- Finding hashicorp/null versions matching \"~> 3.2\"...")
        .assert_contains("- Installing hashicorp/null v3.2.2...")
        .assert_contains(&format!("- Installed hashicorp/null v3.2.2 ({auth})"));
    let spec = ProviderSpec::new("hashicorp", "null", "3.2.2");
    assert_eq!(
        std::fs::read(
            project
                .installed_dir(NULL, "3.2.2")
                .join(spec.executable_name())
        )
        .unwrap(),
        spec.executable_content(&current_platform())
    );
    assert_eq!(project.lock(), h1_only_lock(&served.package("3.2.2").h1));
    assert_eq!(served.server.count(&served.zip_path("3.2.2")), 1);
}

#[test]
fn installs_from_a_mirror_with_terraforms_lock_entry_and_warning() {
    let served = Served::new(null_mirror());
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));

    let run = served.init(&project);
    assert_installed_from_mirror(&project, &served, &run, "verified checksum");
    run.assert_contains("Warning: Incomplete lock file information for providers")
        .assert_contains(&format!(
            "forced to calculate lock file checksums locally for the following providers:\n  - hashicorp/null\n\nThe current .terraform.lock.hcl file only includes checksums for {}",
            current_platform()
        ))
        .assert_contains("Terraform has created a lock file .terraform.lock.hcl");

    // The older version's archive index is never needed.
    assert_eq!(served.server.count(&served.doc_path("3.2.1.json")), 0);
    for file in ["index.json", "3.2.2.json"] {
        let requests = served.server.requests_to(&served.doc_path(file));
        assert_eq!(requests.len(), 1, "{file} fetched once");
        assert!(
            requests[0].header("x-terraform-version").is_some(),
            "{file} carries X-Terraform-Version"
        );
        assert_eq!(requests[0].header("authorization"), None);
    }

    // A second run finds the package installed and matching the lock: no
    // changes, no lock message, nothing downloaded again. The memo of
    // installed hashes may be refreshed (a stamp taken right after the
    // install is re-checked once), so it is left out of the comparison.
    let without_memo = |mut snapshot: support::snapshot::Snapshot| {
        snapshot.entries.remove(".terraform/.tfinstall-hashes.json");
        snapshot
    };
    let before = without_memo(project.snapshot());
    let again = served.init(&project);
    again
        .assert_success()
        .assert_contains("- Using previously-installed hashicorp/null v3.2.2")
        .assert_not_contains("Incomplete lock file information")
        .assert_not_contains("Terraform has");
    assert_eq!(without_memo(project.snapshot()), before);
    assert_eq!(served.server.count(&served.zip_path("3.2.2")), 1);
}

#[test]
fn archive_urls_resolve_against_the_version_documents_final_url() {
    for style in [
        UrlStyle::Absolute,
        UrlStyle::RootRelative,
        UrlStyle::PathRelative,
    ] {
        // HTTP/1.1 only here, so both protocols get a full install.
        let ca = TestCa::new();
        let server = TestServer::https_http1_only(&ca);
        let served = Served::on(ca, server, null_mirror().url_style(style));
        let project = null_project();
        project.write_home(".terraformrc", &network_mirror_config(&served.base));
        let run = served.init(&project);
        assert_installed_from_mirror(&project, &served, &run, "verified checksum");
        assert_eq!(
            served.server.requests_to(&served.zip_path("3.2.2"))[0].version,
            "HTTP/1.1",
            "{style:?}"
        );
    }
}

#[test]
fn a_redirected_version_document_resolves_archive_urls_against_where_it_landed() {
    let served = Served::new(null_mirror());
    // The archive index now lives elsewhere, next to its own copy of the zip
    // under a different name; a bare file name must resolve against the
    // redirect's target, not the URL first asked for.
    let moved = served.root.path().join("moved");
    std::fs::create_dir_all(&moved).unwrap();
    let zip_name = "renamed-null.zip";
    std::fs::copy(&served.package("3.2.2").path, moved.join(zip_name)).unwrap();
    std::fs::copy(
        served
            .root
            .path()
            .join("mirror/registry.terraform.io/hashicorp/null/3.2.2.json"),
        moved.join("3.2.2.json"),
    )
    .unwrap();
    edit_json(&moved.join("3.2.2.json"), |doc| {
        for archive in doc["archives"].as_object_mut().unwrap().values_mut() {
            archive["url"] = zip_name.into();
        }
    });
    served.server.fault(
        &served.doc_path("3.2.2.json"),
        Fault::Redirect {
            status: 302,
            location: "/moved/3.2.2.json".to_owned(),
        },
    );
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));

    let run = served.init(&project);
    run.assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)");
    assert_eq!(served.server.count(&format!("/moved/{zip_name}")), 1);
    assert_eq!(served.server.count(&served.zip_path("3.2.2")), 0);
    assert_eq!(project.lock(), h1_only_lock(&served.package("3.2.2").h1));
}

#[test]
fn either_listed_hash_kind_alone_verifies_the_package() {
    for hashes in [MirrorHashes::H1Only, MirrorHashes::ZhOnly] {
        let served = Served::new(null_mirror().hashes(hashes.clone()));
        let project = null_project();
        project.write_home(".terraformrc", &network_mirror_config(&served.base));
        let run = served.init(&project);
        assert_installed_from_mirror(&project, &served, &run, "verified checksum");
    }
}

#[test]
fn a_package_matching_no_listed_hash_is_refused() {
    let served = Served::new(null_mirror().hashes(MirrorHashes::Wrong));
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let before = project.snapshot();

    let run = served.init(&project);
    let listed = h1_hash(&[("wrong", b"not this package")]);
    run.assert_failure()
        .assert_contains("Error: Failed to install provider")
        .assert_contains(&format!(
            "Error while installing hashicorp/null v3.2.2: provider package doesn't match the expected checksum \"{listed}\""
        ))
        .assert_not_contains("- Installed");
    project.assert_unchanged(&before);
}

#[test]
fn a_zip_matching_only_one_of_two_listed_zh_hashes_is_refused_with_terraforms_sic() {
    let wrong_zh = zh_hash(b"some other archive");
    let wrong_h1 = h1_hash(&[("other", b"other")]);
    let served = Served::new(null_mirror().hashes(MirrorHashes::Custom(vec![wrong_h1, wrong_zh])));
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let before = project.snapshot();

    served
        .init(&project)
        .assert_failure()
        .assert_contains(
            "Error while installing hashicorp/null v3.2.2: provider package doesn't match the any of the expected checksums",
        );
    project.assert_unchanged(&before);
}

#[test]
fn only_unknown_hash_schemes_are_refused() {
    let served =
        Served::new(null_mirror().hashes(MirrorHashes::Custom(vec!["h9:somethingnew".to_owned()])));
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let before = project.snapshot();

    served.init(&project).assert_failure().assert_contains(
        "Error while installing hashicorp/null v3.2.2: this version of Terraform does not support any of the checksum formats given for this provider",
    );
    project.assert_unchanged(&before);
}

#[test]
fn a_mirror_listing_no_hashes_installs_unauthenticated() {
    let served = Served::new(null_mirror().hashes(MirrorHashes::Omitted));
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let run = served.init(&project);
    assert_installed_from_mirror(&project, &served, &run, "unauthenticated");
    run.assert_contains("Incomplete lock file information for providers");
}

/// Terraform treats a 404 for a `VERSION.json` that `index.json` listed as a
/// failed query, not as "not here": the `direct` method after the mirror is
/// never asked, and the run stops (`http_mirror_source.go`,
/// `multi_source.go`). tfinstall keeps the quirk so both tools pick the same
/// source.
#[test]
fn a_missing_version_document_aborts_instead_of_falling_through() {
    let served = Served::new(null_mirror());
    std::fs::remove_file(
        served
            .root
            .path()
            .join("mirror/registry.terraform.io/hashicorp/null/3.2.2.json"),
    )
    .unwrap();
    // The direct method's registry (this same server) has 3.2.2 too, so a
    // fall-through would succeed and be visible as a download request.
    let key = PgpKey::generate();
    Registry::new(&key)
        .provider(ProviderSpec::new("hashicorp", "null", "3.2.2"))
        .write(served.root.path(), &served.server.url());
    let download = format!(
        "/{}",
        Registry::download_path("hashicorp", "null", "3.2.2", &current_platform())
    );
    let project = null_project();
    project.write_home(
        ".terraformrc",
        &format!(
            "{}\nprovider_installation {{\n  network_mirror {{\n    url = \"{}\"\n  }}\n  direct {{}}\n}}\n",
            host_block(
                "registry.terraform.io",
                &served.server.url_for("/v1/providers/")
            ),
            served.base
        ),
    );
    let before = project.snapshot();

    served
        .init(&project)
        .assert_failure()
        .assert_contains("Error: Failed to install provider")
        .assert_contains(&format!(
            "Error while installing hashicorp/null v3.2.2: failed to query provider mirror {} for {NULL}: provider mirror does not have archive index for previously-reported {NULL} version 3.2.2",
            served.base
        ));
    // Versions are the union over both methods, so the registry is asked
    // for its list; it is never asked for the package.
    assert_eq!(
        served.server.count("/v1/providers/hashicorp/null/versions"),
        1
    );
    assert_eq!(served.server.count(&download), 0);
    project.assert_unchanged(&before);
}

#[test]
fn a_mirror_without_the_provider_is_not_an_error() {
    // index.json answers 404: "not here", so the other method's versions
    // count. The filesystem mirror comes first: a network mirror listed
    // first would be asked for 3.2.2.json and abort the run (see above).
    let served = Served::new(NetworkMirror::new().provider(ProviderSpec::new(
        "hashicorp",
        "random",
        "3.6.0",
    )));
    let plugins = tempfile::tempdir().unwrap();
    FsMirror::new()
        .provider(
            ProviderSpec::new("hashicorp", "null", "3.2.2"),
            Layout::Packed,
        )
        .write(plugins.path());
    let project = null_project();
    project.write_home(
        ".terraformrc",
        &format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = \"{}\"\n  }}\n  network_mirror {{\n    url = \"{}\"\n  }}\n}}\n",
            plugins.path().display(),
            served.base
        ),
    );
    served
        .init(&project)
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2 (unauthenticated)");
    assert_eq!(served.server.count(&served.doc_path("index.json")), 1);
}

#[test]
fn credentials_go_to_the_json_documents_and_never_to_the_archive() {
    let served = Served::new(null_mirror());
    served.server.require_bearer(".json", TOKEN);
    let project = null_project();
    let host = served.server.host();

    // No credentials: the mirror refuses, and nothing changes.
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let before = project.snapshot();
    served
        .init(&project)
        .assert_failure()
        .assert_contains("Error: Failed to query available provider packages")
        .assert_contains(&format!(
            "Could not retrieve the list of available versions for provider hashicorp/null: host {host} rejected the given authentication credentials"
        ));
    project.assert_unchanged(&before);
    assert_eq!(served.server.count(&served.zip_path("3.2.2")), 0);

    // With a credentials block for the mirror's host (and port) it works.
    project.write_home(
        ".terraformrc",
        &format!(
            "credentials \"{host}\" {{\n  token = \"{TOKEN}\"\n}}\n\n{}",
            network_mirror_config(&served.base)
        ),
    );
    served.server.clear_log();
    let run = served.init(&project);
    assert_installed_from_mirror(&project, &served, &run, "verified checksum");
    for file in ["index.json", "3.2.2.json"] {
        let requests = served.server.requests_to(&served.doc_path(file));
        assert_eq!(
            requests[0].header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str()),
            "{file}"
        );
    }
    let archive = &served.server.requests_to(&served.zip_path("3.2.2"))[0];
    assert_eq!(archive.header("authorization"), None);
    assert_eq!(archive.header("x-terraform-version"), None);
}

#[test]
fn a_credentials_helper_authorizes_the_json_documents_and_its_failure_stops_the_run() {
    let served = Served::new(null_mirror());
    served.server.require_bearer(".json", TOKEN);
    let project = null_project();
    let host = served.server.host();
    let config = format!(
        "{}\n{}",
        credentials_helper_block("test", &[]),
        network_mirror_config(&served.base)
    );
    project.write_home(".terraformrc", &config);
    let helper = CredentialsHelper::install(
        &project.home,
        "terraform-credentials-test",
        &format!("echo '{{\"token\": \"{TOKEN}\"}}'"),
    );
    let run = served.init(&project);
    assert_installed_from_mirror(&project, &served, &run, "verified checksum");
    run.assert_not_contains(TOKEN);
    assert_eq!(helper.runs(), [format!("[get][{host}]")]);
    let archive = &served.server.requests_to(&served.zip_path("3.2.2"))[0];
    assert_eq!(archive.header("authorization"), None);

    let project = null_project();
    project.write_home(".terraformrc", &config);
    let helper = CredentialsHelper::install(
        &project.home,
        "terraform-credentials-test",
        "echo 'no vault here' >&2\nexit 2",
    );
    served.server.clear_log();
    let before = project.snapshot();
    served.init(&project).assert_failure().assert_says(&format!(
        "Could not retrieve the list of available versions for provider hashicorp/null: failed to query provider mirror {} for {NULL}: failed to retrieve credentials for {host}: the credentials helper {} exited with status 2: no vault here.",
        served.base,
        helper.path.display()
    ));
    project.assert_unchanged(&before);
    assert!(served.server.requests().is_empty());
}

#[test]
fn credentials_from_a_tfrc_file_in_the_config_dir_also_apply() {
    let served = Served::new(null_mirror());
    served.server.require_bearer(".json", TOKEN);
    let project = null_project();
    // What `terraform login` writes, read alongside ~/.terraformrc.
    project.write_home(
        ".terraform.d/credentials.tfrc.json",
        &format!(
            "{{\"credentials\": {{\"{}\": {{\"token\": \"{TOKEN}\"}}}}}}",
            served.server.host()
        ),
    );
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let run = served.init(&project);
    assert_installed_from_mirror(&project, &served, &run, "verified checksum");
}

#[test]
fn an_http_mirror_is_refused_with_a_clear_message() {
    let server = TestServer::http();
    let project = null_project();
    let url = server.url();
    let rc = project.write_home(".terraformrc", &network_mirror_config(&url));
    let before = project.snapshot();

    project
        .init(&[])
        .assert_failure()
        .assert_contains(&format!(
            "Error: Invalid URL for provider installation source\n\n  on {} line 2, in provider_installation:\n   2:   network_mirror {{\n\nCannot use \"{url}\" as a URL for a network provider mirror: the mirror must be at an https: URL.",
            rc.display()
        ));
    assert!(
        server.requests().is_empty(),
        "an http mirror must never be contacted"
    );
    project.assert_unchanged(&before);
}

#[test]
fn a_json_document_with_the_wrong_content_type_is_refused() {
    let served = Served::new(null_mirror());
    let index = std::fs::read_to_string(
        served
            .root
            .path()
            .join("mirror/registry.terraform.io/hashicorp/null/index.json"),
    )
    .unwrap();
    served
        .server
        .route(&served.doc_path("index.json"), Response::text(index));
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let before = project.snapshot();

    served
        .init(&project)
        .assert_failure()
        .assert_contains("Error: Failed to query available provider packages")
        .assert_contains(&format!(
            "failed to query provider mirror {} for {NULL}: response has invalid Content-Type: must be application/json",
            served.base
        ));
    project.assert_unchanged(&before);
}

#[test]
fn garbage_json_is_refused() {
    for file in ["index.json", "3.2.2.json"] {
        let served = Served::new(null_mirror());
        served.server.route(
            &served.doc_path(file),
            Response::json("{\"versions\": [1, 2"),
        );
        let project = null_project();
        project.write_home(".terraformrc", &network_mirror_config(&served.base));
        let before = project.snapshot();

        let run = served.init(&project);
        run.assert_failure()
            .assert_contains(&format!(
                "failed to query provider mirror {} for {NULL}: invalid response content from mirror server",
            served.base
            ))
            .assert_not_contains("- Installed");
        project.assert_unchanged(&before);
    }
}

#[test]
fn a_server_error_is_reported_with_its_status() {
    let served = Served::new(null_mirror());
    served
        .server
        .fault(&served.doc_path("index.json"), Fault::Status(500));
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let before = project.snapshot();
    served
        .init(&project)
        .assert_failure()
        .assert_contains(&format!(
            "failed to query provider mirror {} for {NULL}: ",
            served.base
        ))
        .assert_contains("500");
    project.assert_unchanged(&before);
}

/// Terraform has a mirror-specific message for a missing platform but its
/// multi-source (`multi_source.go`) hides it behind the generic one;
/// tfinstall keeps the source's own error, so the user learns which mirror
/// lacks the package.
#[test]
fn a_platform_the_mirror_lacks_is_reported_naming_the_mirror() {
    let served = Served::new(
        NetworkMirror::new()
            .provider(ProviderSpec::new("hashicorp", "null", "3.2.2").platforms(&["plan9_386"])),
    );
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let before = project.snapshot();
    served
        .init(&project)
        .assert_failure()
        .assert_contains("Error: Incompatible provider version")
        .assert_contains(&format!(
            "Your chosen provider mirror at {} does not have a {NULL} v3.2.2 package available for your current platform, {}.",
            served.base,
            current_platform()
        ));
    project.assert_unchanged(&before);
}

#[test]
fn a_zh_only_lock_from_a_registry_verifies_against_the_mirror_zip_and_gains_the_h1() {
    let served = Served::new(null_mirror());
    let package = served.package("3.2.2").clone();
    let zh = package.zh.clone().unwrap();
    // A lock written from a registry on another platform lists, for this
    // platform, only the zh: from the signed SHA256SUMS.
    let project = null_project();
    project.write(
        ".terraform.lock.hcl",
        &lock_file(&[lock_block(NULL, "3.2.2", "~> 3.2", &[&zh])]),
    );
    project.write_home(".terraformrc", &network_mirror_config(&served.base));

    let run = served.init(&project);
    run.assert_success()
        .assert_contains(
            "- Reusing previous version of hashicorp/null from the dependency lock file",
        )
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)")
        .assert_contains("Terraform has made some changes to the provider dependency selections")
        .assert_not_contains("Incomplete lock file information");
    assert_eq!(
        project.lock(),
        lock_file(&[lock_block(NULL, "3.2.2", "~> 3.2", &[&package.h1, &zh])])
    );
}

#[test]
fn a_mirror_zip_not_matching_the_lock_is_refused() {
    let served = Served::new(null_mirror());
    let project = null_project();
    let other = zh_hash(b"what the registry published");
    project.write(
        ".terraform.lock.hcl",
        &lock_file(&[lock_block(NULL, "3.2.2", "~> 3.2", &[&other])]),
    );
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let before = project.snapshot();

    served
        .init(&project)
        .assert_failure()
        .assert_contains(&format!(
            "Error while installing hashicorp/null v3.2.2: the current package for {NULL} 3.2.2 doesn't match any of the checksums previously recorded in the dependency lock file"
        ));
    project.assert_unchanged(&before);
}

#[test]
fn a_provider_hostname_with_a_port_is_a_path_below_the_mirror_base() {
    // "example.com:8443/…" alone would parse as a URL with the scheme
    // "example.com"; the mirror must still look below its base URL.
    let served = Served::new(
        NetworkMirror::new()
            .provider(ProviderSpec::new("acme", "widget", "1.0.0").hostname("example.com:8443")),
    );
    let project = Project::requiring(&[("widget", "example.com:8443/acme/widget", ">= 1.0")]);
    project.write_home(".terraformrc", &network_mirror_config(&served.base));

    let run = served.init(&project);
    run.assert_success()
        .assert_contains("- Installed example.com:8443/acme/widget v1.0.0 (verified checksum)");
    assert_eq!(
        served
            .server
            .count("/mirror/example.com:8443/acme/widget/index.json"),
        1
    );
    let package = served.tree.package("widget", "1.0.0", &current_platform());
    assert_eq!(
        project.lock(),
        lock_file(&[lock_block(
            "example.com:8443/acme/widget",
            "1.0.0",
            ">= 1.0.0",
            &[&package.h1]
        )])
    );
}

#[test]
fn a_refused_upgrade_leaves_the_previous_install_and_lock_alone() {
    let ca = TestCa::new();
    let server = TestServer::https(&ca);
    let served = Served::on(
        ca,
        server,
        NetworkMirror::new().provider(ProviderSpec::new("hashicorp", "null", "3.2.1")),
    );
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    served
        .init(&project)
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.1 (verified checksum)");
    let installed = project.snapshot();

    // The mirror gains 3.2.2, but lists a hash its zip does not have.
    let dir = served.root.path().join("mirror");
    null_mirror().write(&dir, &served.base);
    edit_json(
        &dir.join("registry.terraform.io/hashicorp/null/3.2.2.json"),
        |doc| {
            for archive in doc["archives"].as_object_mut().unwrap().values_mut() {
                archive["hashes"] = serde_json::json!([h1_hash(&[("x", b"y")])]);
            }
        },
    );
    served
        .upgrade(&project)
        .assert_failure()
        .assert_contains("- Installing hashicorp/null v3.2.2...")
        .assert_contains("provider package doesn't match the expected checksum");
    project.assert_unchanged(&installed);
}

const LOGIN: &str = "mirror-user";
const PASSWORD: &str = "b4sic-s3cret";

/// A mirror whose whole tree is behind Basic auth, as an nginx with
/// `auth_basic` serves it: `.netrc` credentials for its host open every
/// document and archive, under the host with its port (Terraform's match)
/// or the bare host (curl's); without them the mirror refuses.
#[test]
fn a_mirror_behind_basic_auth_is_opened_by_netrc_credentials() {
    for machine in ["127.0.0.1:PORT", "127.0.0.1"] {
        let served = Served::new(null_mirror());
        served.server.require_basic("", LOGIN, PASSWORD);
        let project = null_project();
        project.write_home(".terraformrc", &network_mirror_config(&served.base));

        let before = project.snapshot();
        served
            .init(&project)
            .assert_failure()
            .assert_contains(&format!(
                "host {0} rejected the given authentication credentials (none were sent: add a credentials block for {0} to the CLI configuration, or, for a mirror behind HTTP Basic auth, a \"machine {0}\" entry with login and password to .netrc)",
                served.server.host()
            ));
        project.assert_unchanged(&before);

        let machine = machine.replace("PORT", &served.server.port().to_string());
        project.write_home(
            ".netrc",
            &format!("machine other.example login x password y\nmachine {machine}\n  login {LOGIN}\n  password {PASSWORD}\n"),
        );
        served.server.clear_log();
        let run = served.init(&project);
        assert_installed_from_mirror(&project, &served, &run, "verified checksum");
        run.assert_not_contains(PASSWORD);
        let requests = served.server.requests();
        assert_eq!(requests.len(), 3, "{machine}: {requests:?}");
        for request in requests {
            assert_eq!(
                request.header("authorization"),
                Some(basic_auth(LOGIN, PASSWORD).as_str()),
                "{machine}: {}",
                request.path
            );
        }
    }
}

/// A token from the CLI configuration is the mirror's own credential for
/// its documents and wins over `.netrc` there; the archive, which never
/// gets the token, gets the `.netrc` credentials.
#[test]
fn a_configured_token_beats_netrc_on_the_documents() {
    let served = Served::new(null_mirror());
    served.server.require_bearer(".json", TOKEN);
    served.server.require_basic(".zip", LOGIN, PASSWORD);
    let project = null_project();
    let host = served.server.host();
    project.write_home(
        ".terraformrc",
        &format!(
            "credentials \"{host}\" {{\n  token = \"{TOKEN}\"\n}}\n\n{}",
            network_mirror_config(&served.base)
        ),
    );
    project.write_home(
        ".netrc",
        &format!("machine {host} login {LOGIN} password {PASSWORD}\n"),
    );
    let run = served.init(&project);
    assert_installed_from_mirror(&project, &served, &run, "verified checksum");
    let archive = &served.server.requests_to(&served.zip_path("3.2.2"))[0];
    assert_eq!(
        archive.header("authorization"),
        Some(basic_auth(LOGIN, PASSWORD).as_str())
    );
}

/// Userinfo in an archive URL is that URL's own credential and wins over
/// `.netrc`, as in Terraform (go-getter leaves such a URL alone).
#[test]
fn userinfo_in_the_archive_url_wins_over_netrc() {
    let served = Served::new(null_mirror());
    served.server.require_basic(".zip", "url-user", "url-pass");
    let doc = served
        .root
        .path()
        .join(served.doc_path("3.2.2.json").trim_start_matches('/'));
    let zip = served.zip_path("3.2.2");
    let with_userinfo = format!("https://url-user:url-pass@{}{zip}", served.server.host());
    edit_json(&doc, |doc| {
        doc["archives"][current_platform()]["url"] = serde_json::Value::String(with_userinfo)
    });
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    project.write_home(
        ".netrc",
        &format!("default login {LOGIN} password {PASSWORD}\n"),
    );

    let run = served.init(&project);
    assert_installed_from_mirror(&project, &served, &run, "verified checksum");
    run.assert_not_contains("url-pass");
    let archive = &served.server.requests_to(&zip)[0];
    assert_eq!(
        archive.header("authorization"),
        Some(basic_auth("url-user", "url-pass").as_str())
    );
}

/// An archive that redirects to another host (here the same server as
/// `localhost`, a different origin) gets there without the credentials,
/// even with a `default` entry that would match any host.
#[test]
fn netrc_credentials_do_not_follow_a_redirect_to_another_host() {
    let served = Served::new(null_mirror());
    let zip = served.zip_path("3.2.2");
    let bytes = std::fs::read(served.root.path().join(zip.trim_start_matches('/'))).unwrap();
    served.server.route(
        "/elsewhere/null.zip",
        Response::bytes("application/zip", bytes),
    );
    served.server.fault(
        &zip,
        Fault::Redirect {
            status: 302,
            location: format!(
                "https://{}/elsewhere/null.zip",
                served.server.localhost_host()
            ),
        },
    );
    let project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    project.write_home(
        ".netrc",
        &format!("default login {LOGIN} password {PASSWORD}\n"),
    );

    let run = served.init(&project);
    run.assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)");
    let first = &served.server.requests_to(&zip)[0];
    assert_eq!(
        first.header("authorization"),
        Some(basic_auth(LOGIN, PASSWORD).as_str())
    );
    let redirected = served.server.requests_to("/elsewhere/null.zip");
    assert_eq!(redirected.len(), 1);
    assert_eq!(redirected[0].header("authorization"), None);
}

/// A `.netrc` that does not parse is reported by file and line, and the
/// run goes on without its credentials.
#[test]
fn a_malformed_netrc_is_a_warning_naming_file_and_line() {
    let served = Served::new(null_mirror());
    let mut project = null_project();
    project.write_home(".terraformrc", &network_mirror_config(&served.base));
    let netrc = project.write_home(
        "creds/netrc",
        &format!(
            "machine {}\n  login {LOGIN}\n  passwd {PASSWORD}\n",
            served.server.host()
        ),
    );
    project.env("NETRC", &netrc);

    let run = served.init(&project);
    run.assert_success()
        .assert_contains("Warning: Invalid .netrc file")
        .assert_contains(&format!(
            "{}, line 3: expected machine, default, login, password, account or macdef (the word found is not shown, since it may be a secret)",
            netrc.display()
        ))
        .assert_not_contains(PASSWORD);
    let archive = &served.server.requests_to(&served.zip_path("3.2.2"))[0];
    assert_eq!(archive.header("authorization"), None);
}

/// A mirror configured with userinfo (`https://user:pass@host/…`) sends it
/// with its relative archive URLs too, as Terraform's resolution keeps it,
/// and before `.netrc`; the password is never shown.
#[test]
fn userinfo_in_the_mirror_url_reaches_its_archives() {
    let served = Served::new(null_mirror());
    served.server.require_basic("", "url-user", "url-pass");
    let project = null_project();
    let base = served
        .base
        .replacen("https://", "https://url-user:url-pass@", 1);
    project.write_home(".terraformrc", &network_mirror_config(&base));
    project.write_home(
        ".netrc",
        &format!("default login {LOGIN} password {PASSWORD}\n"),
    );

    let run = served.init(&project);
    assert_installed_from_mirror(&project, &served, &run, "verified checksum");
    std::fs::remove_dir_all(project.data()).unwrap();
    std::fs::remove_file(project.lock_path()).unwrap();
    let json = served.run(&project, &["-json"]);
    json.assert_success()
        .assert_contains(&format!("url-user:xxxxx@{}", served.server.host()));
    for run in [&run, &json] {
        run.assert_not_contains("url-pass");
    }
    for request in served.server.requests() {
        assert_eq!(
            request.header("authorization"),
            Some(basic_auth("url-user", "url-pass").as_str()),
            "{}",
            request.path
        );
    }
}
