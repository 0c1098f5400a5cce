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
        Setup::with(ca, registry)
    }

    /// A project for a registry started some other way.
    fn with(ca: TestCa, registry: OciRegistry) -> Setup {
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

/// `init -platform` takes another platform's `zh:` from the OCI layer
/// digest and its `h1:` from the layer itself, hashed as it streams:
/// what `tofu init` on that platform would lock, with nothing stored.
#[test]
fn other_platforms_lock_the_layer_digest_and_the_packages_h1() {
    let mut setup = Setup::new();
    let platform = current_platform();
    let spec = setup.publish_null("3.2.2", &[&platform, "plan9_amd64"]);
    let login = setup.login_block();
    setup.oci_config(&login);

    let run = setup.project.init(&["-json", "-platform=plan9_amd64"]);
    run.assert_success();
    let found: Vec<serde_json::Value> = validated_stream(run.stdout.as_bytes())
        .into_iter()
        .filter(|m| m["type"] == "platform_hashes")
        .collect();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["platform"], "plan9_amd64");
    assert_eq!(
        found[0]["hashes"],
        serde_json::json!([
            { "hash": spec.h1("plan9_amd64"), "source": "package" },
            { "hash": zh_hash(&spec.package_zip("plan9_amd64")), "source": "oci_digest" },
        ])
    );
    assert_eq!(
        setup.project.lock(),
        lock_file(&[lock_block(
            NULL,
            "3.2.2",
            "~> 3.2",
            &[
                spec.h1(&platform),
                zh_hash(&spec.package_zip(&platform)),
                spec.h1("plan9_amd64"),
                zh_hash(&spec.package_zip("plan9_amd64")),
            ]
        )])
    );
}

#[test]
fn include_and_exclude_route_providers_between_the_oci_mirror_and_the_registry() {
    let hosted = HostedRegistry::new(|registry| {
        registry.provider(ProviderSpec::new("hashicorp", "random", "3.6.0"))
    });
    let registry = OciRegistry::start(&hosted.ca);
    let platform = current_platform();
    let null = ProviderSpec::new("hashicorp", "null", "3.2.2").platforms(&[&platform]);
    registry.publish(
        &hosted.ca,
        "tf/hashicorp/null",
        "3.2.2",
        &[(&platform, null.package_zip(&platform))],
    );
    let mut project = hosted.project;
    project.require(&[
        ("null", "hashicorp/null", "~> 3.2"),
        ("random", "hashicorp/random", "3.6.0"),
    ]);
    project.cli_config(&format!(
        "{}provider_installation {{\n  oci_mirror {{\n    repository_template = \"{host}/tf/${{namespace}}/${{type}}\"\n    include = [\"registry.terraform.io/hashicorp/null\"]\n  }}\n  direct {{\n    exclude = [\"registry.terraform.io/hashicorp/null\"]\n  }}\n}}\noci_credentials \"{host}\" {{\n  username = \"{USER}\"\n  password = \"{PASSWORD}\"\n}}\n",
        host_block(
            "registry.terraform.io",
            &hosted.server.url_for("/v1/providers/")
        ),
        host = registry.host,
    ));

    project
        .init(&[])
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)")
        .assert_contains("- Installed hashicorp/random v3.6.0 (self-signed");
    let lock = project.lock();
    assert!(
        lock.contains(&zh_hash(&null.package_zip(&platform))),
        "{lock}"
    );
    assert!(
        project
            .installed_dir("registry.terraform.io/hashicorp/random", "3.6.0")
            .is_dir()
    );
    // The registry was never asked for null, nor the OCI registry for random.
    assert_eq!(
        hosted
            .server
            .count(&Registry::versions_path("hashicorp", "null")),
        0
    );
    assert!(!registry.log().contains("/v2/tf/hashicorp/random/"));
}

#[test]
fn refused_credentials_name_the_registry_and_where_credentials_were_looked_for() {
    let mut setup = Setup::new();
    setup.publish_null("3.2.2", &[&current_platform()]);
    let host = setup.registry.host.clone();
    setup.oci_config(&format!(
        "oci_credentials \"{host}\" {{\n  username = \"{USER}\"\n  password = \"wrong\"\n}}\n"
    ));
    let run = setup.project.init_failing(&[]);
    run.assert_contains(&format!(
        "OCI registry {host} rejected the credentials for user \"{USER}\" from the oci_credentials \"{host}\" block"
    ))
    .assert_contains("Credentials were looked for in: oci_credentials blocks of the CLI configuration");

    // Without any credentials, the message says none were found and lists
    // the Docker-style files it read.
    setup.oci_config("");
    let run = setup.project.init_failing(&[]);
    run.assert_contains(&format!(
        "OCI registry {host} requires credentials, and none were found"
    ))
    .assert_contains(&format!(
        "{}",
        setup.project.home.join(".docker/config.json").display()
    ));
}

#[test]
fn docker_config_json_credentials_are_used() {
    use base64::Engine as _;
    let mut setup = Setup::new();
    setup.publish_null("3.2.2", &[&current_platform()]);
    setup.oci_config("");
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
    setup.project.write_home(
        ".docker/config.json",
        &format!(
            "{{\"auths\": {{\"https://{}\": {{\"auth\": \"{auth}\"}}}}}}",
            setup.registry.host
        ),
    );
    setup
        .project
        .init(&[])
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)");

    // $DOCKER_CONFIG is where `docker login` writes when it is set.
    std::fs::remove_dir_all(setup.project.data()).unwrap();
    std::fs::rename(
        setup.project.home.join(".docker"),
        setup.project.root.join("docker-config"),
    )
    .unwrap();
    let docker_config = setup.project.root.join("docker-config");
    setup.project.env("DOCKER_CONFIG", &docker_config);
    setup.project.init(&[]).assert_success();
}

#[test]
fn a_corrupted_blob_is_refused_and_the_previous_install_stays() {
    let mut setup = Setup::new();
    let platform = current_platform();
    setup.publish_null("3.2.1", &[&platform]);
    let login = setup.login_block();
    setup.oci_config(&login);
    setup.project.init(&[]).assert_success();

    let spec = setup.publish_null("3.2.2", &[&platform]);
    let zip = spec.package_zip(&platform);
    let blob = setup.registry.blob_file(&oci_registry::digest_of(&zip));
    let mut corrupted = zip.clone();
    let middle = corrupted.len() / 2;
    corrupted[middle] ^= 0xff;
    std::fs::write(&blob, &corrupted).unwrap();

    let run = setup.project.init_failing(&["-upgrade"]);
    run.assert_contains(&format!(
        "provider package does not match digest {}",
        oci_registry::digest_of(&zip)
    ));
    assert!(
        !setup.project.installed_dir(NULL, "3.2.2").exists(),
        "nothing of 3.2.2 may be installed"
    );
}

#[test]
fn a_missing_platform_names_the_platforms_the_mirror_has() {
    let mut setup = Setup::new();
    setup.publish_null("3.2.2", &["plan9_amd64", "solaris_sparc64"]);
    let login = setup.login_block();
    setup.oci_config(&login);
    let run = setup.project.init_failing(&[]);
    run.assert_contains("does not have a package available for your current platform")
        .assert_contains("Version 3.2.2 is available for plan9_amd64 and solaris_sparc64.");
}

#[test]
fn a_template_that_cannot_tell_providers_apart_is_an_error_naming_file_and_line() {
    let mut project = Project::requiring(&[("null", "hashicorp/null", "~> 3.2")]);
    let config = project.cli_config(
        "provider_installation {\n  oci_mirror {\n    repository_template = \"registry.example.com/tf/${namespace}\"\n    include = [\"registry.terraform.io/*/*\"]\n  }\n}\n",
    );
    let run = project.init_failing(&[]);
    run.assert_contains("Invalid oci_mirror repository template")
        .assert_contains(&format!(
            "Invalid oci_mirror block at {}:2:3: template must refer to the \"type\" symbol unless the \"include\" argument selects exactly one provider.",
            config.display()
        ));
}

#[test]
fn providers_mirror_publishes_opentofus_layout_and_a_rerun_uploads_nothing() {
    let platform = current_platform();
    let platforms = [platform.as_str(), "windows_arm64"];
    let hosted = HostedRegistry::new(|registry| {
        registry
            .provider(ProviderSpec::new("hashicorp", "null", "3.2.2+ent.1").platforms(&platforms))
    });
    let registry = OciRegistry::start(&hosted.ca);
    let host = registry.host.clone();
    let mut project = hosted.project;
    project.require(&[("null", "hashicorp/null", "3.2.2+ent.1")]);
    let login = format!(
        "oci_credentials \"{host}\" {{\n  username = \"{USER}\"\n  password = \"{PASSWORD}\"\n}}\n"
    );
    let origin = host_block(
        "registry.terraform.io",
        &hosted.server.url_for("/v1/providers/"),
    );
    project.cli_config(&format!("{origin}{login}"));
    let target = format!("oci://{host}/tf-providers/${{namespace}}/${{type}}");
    let mirror = |project: &Project| {
        project.run(&[
            "providers",
            "mirror",
            &format!("-platform={platform}"),
            "-platform=windows_arm64",
            &target,
        ])
    };

    mirror(&project)
        .assert_success()
        .assert_contains(&format!(
            "- Published hashicorp/null v3.2.2+ent.1 to {host}/tf-providers/hashicorp/null:3.2.2_ent.1"
        ))
        .assert_contains("4 blobs uploaded, 0 already present; 3 manifests pushed, 0 already present.");
    assert_eq!(registry.blob_uploads(), 4, "{}", registry.log());
    assert_eq!(registry.manifest_puts(), 3);

    mirror(&project).assert_success().assert_contains(
        "0 blobs uploaded, 4 already present; 0 manifests pushed, 3 already present.",
    );
    assert_eq!(registry.blob_uploads(), 4, "a re-run uploaded again");
    assert_eq!(
        registry.manifest_puts(),
        3,
        "a re-run pushed manifests again"
    );

    // The layout, checked against OpenTofu's documentation by reading it
    // back over the Distribution API, not through tfinstall.
    let repo = "tf-providers/hashicorp/null";
    let json = |bytes: &[u8]| -> serde_json::Value { serde_json::from_slice(bytes).unwrap() };
    let (status, _, tags) = registry.get(&hosted.ca, &format!("{repo}/tags/list"), "*/*");
    assert_eq!(status, 200);
    assert_eq!(json(&tags)["tags"], serde_json::json!(["3.2.2_ent.1"]));
    let (status, content_type, index) = registry.get(
        &hosted.ca,
        &format!("{repo}/manifests/3.2.2_ent.1"),
        oci_registry::INDEX_MEDIA_TYPE,
    );
    assert_eq!(status, 200);
    assert_eq!(content_type, oci_registry::INDEX_MEDIA_TYPE);
    let index = json(&index);
    assert_eq!(index["schemaVersion"], 2);
    assert_eq!(index["mediaType"], oci_registry::INDEX_MEDIA_TYPE);
    assert_eq!(index["artifactType"], "application/vnd.opentofu.provider");
    let descriptors = index["manifests"].as_array().unwrap();
    let mut seen_platforms: Vec<String> = Vec::new();
    for descriptor in descriptors {
        assert_eq!(descriptor["mediaType"], oci_registry::MANIFEST_MEDIA_TYPE);
        assert_eq!(
            descriptor["artifactType"],
            "application/vnd.opentofu.provider-target"
        );
        let os = descriptor["platform"]["os"].as_str().unwrap();
        let arch = descriptor["platform"]["architecture"].as_str().unwrap();
        seen_platforms.push(format!("{os}_{arch}"));
        let digest = descriptor["digest"].as_str().unwrap();
        let (status, _, manifest_bytes) = registry.get(
            &hosted.ca,
            &format!("{repo}/manifests/{digest}"),
            oci_registry::MANIFEST_MEDIA_TYPE,
        );
        assert_eq!(status, 200);
        assert_eq!(oci_registry::digest_of(&manifest_bytes), digest);
        assert_eq!(descriptor["size"], manifest_bytes.len());
        let manifest = json(&manifest_bytes);
        assert_eq!(manifest["mediaType"], oci_registry::MANIFEST_MEDIA_TYPE);
        assert_eq!(
            manifest["artifactType"],
            "application/vnd.opentofu.provider-target"
        );
        assert_eq!(
            manifest["config"]["mediaType"],
            "application/vnd.oci.image.config.v1+json"
        );
        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0]["mediaType"], "archive/zip");
        // The origin's .zip, byte for byte.
        let origin_zip = std::fs::read(
            &hosted
                .tree
                .package("null", "3.2.2+ent.1", &format!("{os}_{arch}"))
                .path,
        )
        .unwrap();
        assert_eq!(layers[0]["digest"], oci_registry::digest_of(&origin_zip));
        let (status, _, blob) = registry.get(
            &hosted.ca,
            &format!("{repo}/blobs/{}", layers[0]["digest"].as_str().unwrap()),
            "*/*",
        );
        assert_eq!(status, 200);
        assert_eq!(blob, origin_zip);
    }
    seen_platforms.sort();
    let mut expected: Vec<String> = platforms.iter().map(|p| p.to_string()).collect();
    expected.sort();
    assert_eq!(seen_platforms, expected);

    // Round trip: a project that knows only the OCI registry installs what
    // was published, and locks the same h1: the origin's package has.
    let mut consumer = Project::requiring(&[("null", "hashicorp/null", "3.2.2+ent.1")]);
    consumer.trust(&hosted.ca);
    consumer.cli_config(&format!(
        "provider_installation {{\n  oci_mirror {{\n    repository_template = \"{host}/tf-providers/${{namespace}}/${{type}}\"\n    include = [\"registry.terraform.io/*/*\"]\n  }}\n}}\n{login}"
    ));
    consumer
        .init(&[])
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2+ent.1 (verified checksum)");
    let package = hosted.tree.package("null", "3.2.2+ent.1", &platform);
    assert!(consumer.lock().contains(&package.h1), "{}", consumer.lock());
}

#[test]
fn docker_credential_helpers_named_by_config_json_are_asked() {
    use std::os::unix::fs::PermissionsExt as _;
    let mut setup = Setup::new();
    setup.publish_null("3.2.2", &[&current_platform()]);
    setup.oci_config("");
    let host = setup.registry.host.clone();
    // A helper speaking the docker-credential-helpers protocol: the
    // registry on standard input, the login as JSON on standard output.
    let bin = setup.project.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let helper = bin.join("docker-credential-tfitest");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\nread -r server\nif [ \"$1\" = get ] && [ \"$server\" = \"{host}\" ]; then\n  printf '{{\"ServerURL\": \"%s\", \"Username\": \"{USER}\", \"Secret\": \"{PASSWORD}\"}}' \"$server\"\nelse\n  echo 'credentials not found in native keychain'\n  exit 1\nfi\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    setup.project.env(
        "PATH",
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );

    setup.project.write_home(
        ".docker/config.json",
        &format!("{{\"credHelpers\": {{\"{host}\": \"tfitest\"}}}}"),
    );
    setup
        .project
        .init(&[])
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)");

    std::fs::remove_dir_all(setup.project.data()).unwrap();
    setup
        .project
        .write_home(".docker/config.json", "{\"credsStore\": \"tfitest\"}");
    setup.project.init(&[]).assert_success();
}

#[test]
fn providers_mirror_publishes_from_another_oci_mirror() {
    let mut setup = Setup::new();
    let platform = current_platform();
    let spec = setup.publish_null("3.2.2", &[&platform]);
    let login = setup.login_block();
    setup.oci_config(&login);
    let host = setup.registry.host.clone();

    setup
        .project
        .run(&[
            "providers",
            "mirror",
            &format!("oci://{host}/copy/${{namespace}}/${{type}}"),
        ])
        .assert_success()
        .assert_contains(&format!(
            "- Published hashicorp/null v3.2.2 to {host}/copy/hashicorp/null:3.2.2"
        ))
        .assert_contains(
            "2 blobs uploaded, 0 already present; 2 manifests pushed, 0 already present.",
        );
    let (status, _, index) = setup.registry.get(
        &setup.ca,
        "copy/hashicorp/null/manifests/3.2.2",
        oci_registry::INDEX_MEDIA_TYPE,
    );
    assert_eq!(status, 200);
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    let manifest_digest = index["manifests"][0]["digest"].as_str().unwrap();
    let (_, _, manifest) = setup.registry.get(
        &setup.ca,
        &format!("copy/hashicorp/null/manifests/{manifest_digest}"),
        oci_registry::MANIFEST_MEDIA_TYPE,
    );
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(
        manifest["layers"][0]["digest"],
        oci_registry::digest_of(&spec.package_zip(&platform))
    );
}

/// Registries in front of a token service (Docker Hub, GHCR, Harbor, GitLab)
/// answer with a Bearer challenge: the login goes to the token endpoint,
/// which answers with a token for one repository and access.
#[test]
fn bearer_challenges_get_a_token_for_the_repository_and_access() {
    let ca = TestCa::new();
    let token_server = TestServer::https(&ca);
    let issuer = oci_registry::TokenIssuer::new(&["tf/hashicorp/null", "copy/hashicorp/null"]);
    token_server.route(
        "/token",
        // As Docker Hub's token service answers: both names, and expiry.
        Response::json(format!(
            "{{\"token\": \"{t}\", \"access_token\": \"{t}\", \"expires_in\": 300, \"issued_at\": \"2026-11-25T21:00:00.123456789Z\"}}",
            t = issuer.token()
        )),
    );
    let registry = OciRegistry::start_with_tokens(&ca, &issuer, &token_server.url_for("/token"));
    let mut setup = Setup::with(ca, registry);
    setup.publish_null("3.2.2", &[&current_platform()]);
    let login = setup.login_block();
    setup.oci_config(&login);
    let (host, project) = (&setup.registry.host, &setup.project);

    project
        .init(&[])
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)");
    let asked = token_server.requests_to("/token");
    assert!(!asked.is_empty());
    let basic = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
    };
    for request in &asked {
        let query = request.query.clone().unwrap_or_default();
        assert!(
            query.contains("service=tfinstall-test-registry")
                && query.contains("scope=repository%3Atf%2Fhashicorp%2Fnull%3Apull"),
            "{query}"
        );
        assert_eq!(
            request.header("authorization"),
            Some(format!("Basic {basic}").as_str())
        );
    }

    // Publishing asks for pull and push on the target repository.
    token_server.clear_log();
    project
        .run(&[
            "providers",
            "mirror",
            &format!("oci://{host}/copy/${{namespace}}/${{type}}"),
        ])
        .assert_success()
        .assert_contains("2 blobs uploaded, 0 already present");
    assert!(
        token_server.requests_to("/token").iter().any(|r| r
            .query
            .as_deref()
            .unwrap_or_default()
            .contains("scope=repository%3Acopy%2Fhashicorp%2Fnull%3Apull%2Cpush")),
        "{:?}",
        token_server
            .requests_to("/token")
            .iter()
            .map(|r| r.query.clone())
            .collect::<Vec<_>>()
    );
}

/// Registries backed by object storage redirect blob downloads to signed
/// URLs on another host; the registry's credentials must not follow.
#[test]
fn credentials_do_not_follow_a_redirect_to_blob_storage() {
    let ca = TestCa::new();
    let storage = TestServer::https(&ca);
    let storage_url = format!("https://{}/", storage.localhost_host());
    let registry = OciRegistry::start_redirecting_blobs(&ca, &storage_url);
    storage.serve_dir(&registry.storage_root());
    let mut setup = Setup::with(ca, registry);
    let platform = current_platform();
    let spec = setup.publish_null("3.2.2", &[&platform]);
    let login = setup.login_block();
    setup.oci_config(&login);

    setup
        .project
        .init(&[])
        .assert_success()
        .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)");
    let blob_path = format!(
        "/docker/registry/v2/blobs/sha256/{}",
        &oci_registry::digest_of(&spec.package_zip(&platform))["sha256:".len()..][..2]
    );
    let fetched: Vec<_> = storage
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with(&blob_path) && r.method == "GET")
        .collect();
    assert_eq!(fetched.len(), 1, "{:?}", storage.requests());
    for request in storage.requests() {
        assert_eq!(
            request.header("authorization"),
            None,
            "{} {} carried the registry's credentials",
            request.method,
            request.path
        );
    }
}

/// Object storage behind the registry's redirect resets the connection
/// mid-blob (an RST: `SO_LINGER` 0, then close), over TLS and over plain
/// HTTP: a reset once is retried and the package installs; resets that
/// persist fail the run with exit status 1 and a message naming the
/// reset. The run never dies of the SIGPIPE a write to the reset socket
/// raises when SIGPIPE is not ignored (issue 31).
#[test]
fn a_connection_reset_mid_blob_is_retried_and_never_kills_the_run() {
    let platform = current_platform();
    // Large enough to be cut mid-body: a zip of incompressible bytes.
    let spec = ProviderSpec::new("hashicorp", "null", "3.2.2")
        .platforms(&[&platform])
        .payload(Payload::Random(256 * 1024));
    let zip = spec.package_zip(&platform);
    let digest = oci_registry::digest_of(&zip);
    let hex = &digest["sha256:".len()..];
    let blob = format!("/docker/registry/v2/blobs/sha256/{}/{hex}/data", &hex[..2]);
    let reset = Fault::ResetAfter(zip.len() / 2);
    for (plain_http, persistent) in [(false, false), (false, true), (true, false), (true, true)] {
        let ca = TestCa::new();
        // Over TLS, HTTP/1.1: a client of it sends a TLS alert on the reset
        // connection, the write that raised SIGPIPE.
        let storage = if plain_http {
            TestServer::http()
        } else {
            TestServer::https_http1_only(&ca)
        };
        let scheme = if plain_http { "http" } else { "https" };
        let storage_url = format!("{scheme}://{}/", storage.localhost_host());
        let registry = OciRegistry::start_redirecting_blobs(&ca, &storage_url);
        storage.serve_dir(&registry.storage_root());
        let mut setup = Setup::with(ca, registry);
        setup.registry.publish(
            &setup.ca,
            "tf/hashicorp/null",
            "3.2.2",
            &[(platform.as_str(), zip.clone())],
        );
        let login = setup.login_block();
        setup.oci_config(&login);
        let what = format!("plain HTTP: {plain_http}, persistent: {persistent}");
        if persistent {
            storage.fault(&blob, reset.clone());
            let run = setup
                .project
                .init_failing(&["-download-retry-delay=10ms", "-download-retries=1"]);
            assert!(
                run.stderr.to_lowercase().contains("connection reset"),
                "{what}: {}",
                run.stderr
            );
        } else {
            // The install asks with a HEAD first, then GETs the blob.
            storage.fault_sequence(&blob, [Fault::Pass, reset.clone()]);
            setup
                .project
                .init(&["-download-retry-delay=10ms"])
                .assert_success()
                .assert_contains("- Installed hashicorp/null v3.2.2 (verified checksum)");
        }
        let fetched = storage
            .requests()
            .iter()
            .filter(|r| r.path == blob && r.method == "GET")
            .count();
        assert_eq!(fetched, 2, "{what}");
    }
}
