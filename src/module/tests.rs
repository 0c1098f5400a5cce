use std::path::Path;

use super::*;
use crate::diag::Severity;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/modules")
        .join(name)
}

fn load_dir(root: &Path) -> Result<(Requirements, Diagnostics), Diagnostics> {
    load_requirements(root, &root.join(".terraform"))
}

fn load_ok(root: &Path) -> (Requirements, Diagnostics) {
    match load_dir(root) {
        Ok(result) => result,
        Err(diags) => panic!("unexpected errors:\n{diags}"),
    }
}

fn load_err(root: &Path) -> Diagnostics {
    match load_dir(root) {
        Ok((reqs, _)) => panic!("expected errors, got {:?}", reqs.0.keys()),
        Err(diags) => diags,
    }
}

/// Writes a throw-away configuration; `files` are (relative path, text).
fn config(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(path, text).expect("write");
    }
    dir
}

fn addr(source: &str) -> ProviderAddr {
    ProviderAddr::parse(source).expect("valid source")
}

/// The expected merged constraints, built through the same API so the test
/// does not depend on how the list is rendered.
fn constraints(parts: &[&str]) -> String {
    let mut all = VersionConstraints::empty();
    for part in parts {
        all.extend(&VersionConstraints::parse_config(part).expect("valid constraint"));
    }
    all.to_string()
}

fn constraints_of(reqs: &Requirements, source: &str) -> String {
    match reqs.0.get(&addr(source)) {
        Some(req) => req.constraints.to_string(),
        None => panic!("{source} not required; have {:?}", reqs.0.keys()),
    }
}

fn find<'a>(diags: &'a Diagnostics, summary: &str) -> &'a Diagnostic {
    diags
        .iter()
        .find(|diag| diag.summary == summary)
        .unwrap_or_else(|| panic!("no {summary:?} in:\n{diags}"))
}

fn at(diag: &Diagnostic) -> (String, usize) {
    let pos = diag.subject.as_ref().expect("diagnostic has a position");
    (pos.file.display().to_string(), pos.line)
}

fn at_origin(origin: &RequirementOrigin) -> (String, usize) {
    let pos = origin.pos.as_ref().expect("origin has a position");
    (pos.file.display().to_string(), pos.line)
}

#[test]
fn basic_configuration_yields_every_kind_of_requirement() {
    let (reqs, diags) = load_ok(&fixture("basic"));

    let mut found: Vec<String> = reqs.0.keys().map(ToString::to_string).collect();
    found.sort();
    let mut expected = vec![
        "registry.terraform.io/hashicorp/aws",
        "registry.terraform.io/hashicorp/random",
        "terraform.example.com/examplecorp/ourcloud",
        "registry.terraform.io/hashicorp/null",
        "registry.terraform.io/hashicorp/tls",
        "terraform.io/builtin/terraform",
        "registry.terraform.io/hashicorp/http",
        "registry.terraform.io/hashicorp/dns",
        "registry.terraform.io/hashicorp/time",
        "registry.terraform.io/cloudflare/cloudflare",
        "registry.terraform.io/hashicorp/template",
    ];
    expected.sort();
    assert_eq!(found, expected);

    // Root, then children by name: module.network tightens the root's
    // constraint, the installed registry module adds its own.
    assert_eq!(
        constraints_of(&reqs, "hashicorp/aws"),
        constraints(&["~> 5.0", ">= 5.10.0", ">= 4.0"])
    );
    assert_eq!(
        constraints_of(&reqs, "hashicorp/null"),
        constraints(&["~> 3.2"])
    );
    assert_eq!(
        constraints_of(&reqs, "hashicorp/tls"),
        constraints(&[">= 4.0.0"])
    );
    assert_eq!(
        constraints_of(&reqs, "terraform.example.com/examplecorp/ourcloud"),
        constraints(&[">= 1.0"])
    );
    assert_eq!(
        constraints_of(&reqs, "cloudflare/cloudflare"),
        constraints(&["~> 4.0"])
    );
    assert_eq!(
        constraints_of(&reqs, "hashicorp/template"),
        constraints(&["~> 2.2"])
    );
    for unconstrained in [
        "hashicorp/random",
        "hashicorp/http",
        "hashicorp/dns",
        "hashicorp/time",
    ] {
        assert_eq!(constraints_of(&reqs, unconstrained), "", "{unconstrained}");
    }
    assert!(reqs.0.keys().any(ProviderAddr::is_builtin));

    // The only diagnostic: the deprecated version argument in the installed
    // module, located in its cache directory.
    assert_eq!(diags.0.len(), 1, "{diags}");
    let warning = &diags.0[0];
    assert_eq!(warning.severity, Severity::Warning);
    assert_eq!(
        warning.summary,
        "Version constraints inside provider configuration blocks are deprecated"
    );
    assert_eq!(
        at(warning),
        (".terraform/modules/vpc/providers.tf".into(), 2)
    );
}

#[test]
fn basic_configuration_records_where_requirements_come_from() {
    let (reqs, _) = load_ok(&fixture("basic"));
    let origins = |source: &str| reqs.0[&addr(source)].declared_in.clone();

    let aws = origins("hashicorp/aws");
    let modules: BTreeSet<&str> = aws.iter().map(|o| o.module_path.as_str()).collect();
    assert_eq!(
        modules,
        BTreeSet::from([
            "",
            "module.network",
            "module.network.module.subnets",
            "module.vpc",
            "module.vpc.module.endpoints"
        ])
    );
    let root_entry = &aws[0];
    assert!(matches!(
        &root_entry.kind,
        OriginKind::RequiredProviders { local_name, constraints: c }
            if local_name == "aws" && c.to_string() == constraints(&["~> 5.0"])
    ));
    let pos = root_entry.pos.as_ref().expect("position");
    assert_eq!(
        (pos.file.as_path(), pos.line),
        (Path::new("versions.tf"), 5)
    );
    let aliases: Vec<Option<&str>> = aws
        .iter()
        .filter_map(|o| match &o.kind {
            OriginKind::ProviderConfig { alias, .. } if o.module_path.is_empty() => {
                Some(alias.as_deref())
            }
            _ => None,
        })
        .collect();
    assert_eq!(aliases, [None, Some("west")]);
    let root_resources = aws
        .iter()
        .filter(|o| o.module_path.is_empty() && matches!(o.kind, OriginKind::Resource { .. }))
        .count();
    assert_eq!(
        root_resources, 0,
        "root resources add nothing once required_providers named aws"
    );

    let builtin = origins("terraform.io/builtin/terraform");
    assert!(matches!(
        &builtin[0].kind,
        OriginKind::Resource { address } if address == "data.terraform_remote_state.shared"
    ));
    let time = origins("hashicorp/time");
    assert!(matches!(&time[0].kind, OriginKind::Import { to } if to == "time_static.created"));
    let dns = origins("hashicorp/dns");
    assert!(matches!(
        &dns[0].kind,
        OriginKind::Resource { address } if address == "data.dns_a_record_set.www"
    ));
    let random = origins("hashicorp/random");
    assert_eq!(
        random.len(),
        1,
        "resources after the declaration add no origin: {random:?}"
    );

    let cloudflare = &origins("cloudflare/cloudflare")[0];
    assert_eq!(cloudflare.module_path, "module.network.module.subnets");
    let pos = cloudflare.pos.as_ref().expect("position");
    assert_eq!(pos.file, Path::new("modules/subnets/main.tf"));

    let endpoint = aws
        .iter()
        .find(|o| o.module_path == "module.vpc.module.endpoints")
        .expect("endpoint module origin");
    assert!(matches!(
        &endpoint.kind,
        OriginKind::Resource { address } if address == "aws_vpc_endpoint.s3"
    ));
    assert_eq!(
        endpoint.pos.as_ref().map(|p| p.file.clone()),
        Some(PathBuf::from(
            ".terraform/modules/vpc/modules/vpc-endpoints/main.tf"
        ))
    );
}

#[test]
fn override_files_replace_entries_per_local_name() {
    let (reqs, diags) = load_ok(&fixture("override"));
    assert_eq!(
        constraints_of(&reqs, "hashicorp/aws"),
        constraints(&["~> 5.40", "~> 5.41"])
    );
    assert_eq!(constraints_of(&reqs, "hashicorp/random"), "");
    assert_eq!(
        constraints_of(&reqs, "registry.example.com/mycorp/corp"),
        constraints(&["1.2.3"])
    );
    assert!(
        !reqs.0.contains_key(&addr("hashicorp/mycorp")),
        "the override's provider argument applies"
    );
    assert_eq!(reqs.0.len(), 3);
    let warning = find(
        &diags,
        "Version constraints inside provider configuration blocks are deprecated",
    );
    assert_eq!(at(warning), ("dev_override.tf".into(), 3));
}

#[test]
fn json_configuration_is_read_like_native_syntax() {
    let (reqs, diags) = load_ok(&fixture("json"));
    assert!(diags.is_empty(), "{diags}");
    assert_eq!(
        constraints_of(&reqs, "hashicorp/google"),
        constraints(&["~> 5.0"])
    );
    assert_eq!(
        constraints_of(&reqs, "hashicorp/kubernetes"),
        constraints(&["~> 2.23"])
    );
    assert_eq!(
        constraints_of(&reqs, "hashicorp/helm"),
        constraints(&[">= 2.11.0"])
    );
    assert_eq!(
        constraints_of(&reqs, "hashicorp/dns"),
        constraints(&["~> 3.3"])
    );
    assert_eq!(reqs.0.len(), 4);

    let google = &reqs.0[&addr("hashicorp/google")].declared_in;
    assert!(google.iter().any(|o| matches!(
        &o.kind,
        OriginKind::ProviderConfig { alias: Some(alias), .. } if alias == "us"
    )));
    let dns = &reqs.0[&addr("hashicorp/dns")].declared_in[0];
    assert_eq!(dns.module_path, "module.dns");
    let pos = dns.pos.as_ref().expect("position");
    assert_eq!(
        (pos.file.as_path(), pos.line),
        (Path::new("dns/main.tf.json"), 3)
    );
}

#[test]
fn required_providers_errors_use_terraform_texts_and_positions() {
    let diags = load_err(&fixture("errors/required_providers"));

    let name = find(&diags, "Invalid provider local name");
    assert_eq!(
        name.detail,
        "Provider names must be normalized. Replace \"AWS\" with \"aws\" to fix this error."
    );
    assert_eq!(at(name), ("versions.tf".into(), 3));

    let object = find(&diags, "Invalid required_providers object");
    assert_eq!(
        object.detail,
        "required_providers objects can only contain \"version\", \"source\" and \"configuration_aliases\" attributes. To configure a provider, use a \"provider\" block."
    );
    assert_eq!(at(object), ("versions.tf".into(), 8));

    assert_eq!(
        at(find(&diags, "Invalid provider source string")),
        ("versions.tf".into(), 11)
    );
    assert_eq!(
        at(find(&diags, "Invalid version constraint")),
        ("versions.tf".into(), 13)
    );

    let duplicate = find(&diags, "Duplicate required providers configuration");
    assert_eq!(
        duplicate.detail,
        "A module may have only one required providers configuration. The required providers were previously configured at providers.tf:2,3-21."
    );
    assert_eq!(at(duplicate), ("versions.tf".into(), 2));
}

#[test]
fn unparsable_file_is_reported_with_its_position() {
    let diags = load_err(&fixture("errors/unparsable"));
    assert_eq!(diags.0.len(), 1, "{diags}");
    let (file, line) = at(&diags.0[0]);
    assert_eq!(diags.0[0].summary, "Invalid HCL syntax");
    assert_eq!(file, "main.tf");
    assert!(line >= 8, "line {line}");
}

#[test]
fn missing_child_modules_point_at_the_module_call() {
    let diags = load_err(&fixture("errors/modules"));
    let remote = find(&diags, "Module not installed");
    assert_eq!(at(remote), ("main.tf".into(), 2));
    assert!(remote.detail.contains("module.eks"), "{}", remote.detail);
    assert!(
        remote.detail.contains("terraform init"),
        "{}",
        remote.detail
    );
    assert!(remote.detail.contains("terraform get"), "{}", remote.detail);

    let local = find(&diags, "Failed to read module directory");
    assert_eq!(
        local.detail,
        "Module directory ../does-not-exist does not exist or cannot be read."
    );
    assert_eq!(at(local), ("main.tf".into(), 7));
}

#[test]
fn legacy_provider_addresses_are_rejected() {
    let diags = load_err(&fixture("errors/legacy"));
    let legacy = find(&diags, "Invalid legacy provider address");
    assert_eq!(
        legacy.detail,
        "This configuration or its associated state refers to the unqualified provider \"aws\".\n\nYou must complete the Terraform 0.13 upgrade process before upgrading to later versions."
    );
}

#[test]
fn local_names_map_resources_and_provider_meta_arguments() {
    let dir = config(&[(
        "main.tf",
        r#"
terraform {
  required_providers {
    awsalt = {
      source = "hashicorp/aws"
    }
    google-beta = {
      source  = "hashicorp/google-beta"
      version = ">= 5.0"
    }
  }
}

provider "awsalt" {
  region = "eu-west-1"
}

resource "awsalt_instance" "a" {}

resource "google_compute_instance" "b" {
  provider = google-beta
}

resource "google_compute_disk" "c" {
  provider = "google-beta"
}
"#,
    )]);
    let (reqs, diags) = load_ok(dir.path());
    let mut found: Vec<String> = reqs.0.keys().map(ToString::to_string).collect();
    found.sort();
    assert_eq!(
        found,
        [
            "registry.terraform.io/hashicorp/aws",
            "registry.terraform.io/hashicorp/google-beta"
        ]
    );
    let quoted = find(&diags, "Quoted references are deprecated");
    assert_eq!(quoted.severity, Severity::Warning);
    assert_eq!(at(quoted), ("main.tf".into(), 25));
}

#[test]
fn legacy_entries_accept_strings_and_numbers_but_not_null() {
    let dir = config(&[(
        "versions.tf",
        "terraform {\n  required_providers {\n    aws = 2\n    Google = \"~> 5.0\"\n  }\n}\n",
    )]);
    let (reqs, _) = load_ok(dir.path());
    assert_eq!(constraints_of(&reqs, "hashicorp/aws"), constraints(&["2"]));
    // The legacy form normalizes the name instead of rejecting it.
    assert_eq!(
        constraints_of(&reqs, "hashicorp/google"),
        constraints(&["~> 5.0"])
    );

    // A bare null has no primitive type in HCL, so Terraform takes the
    // object path and rejects it.
    let dir = config(&[(
        "versions.tf",
        "terraform {\n  required_providers {\n    aws = null\n  }\n}\n",
    )]);
    let diags = load_err(dir.path());
    let null = find(&diags, "Invalid required_providers object");
    assert_eq!(
        null.detail,
        "required_providers entries must be strings or objects."
    );
    assert_eq!(at(null), ("versions.tf".into(), 3));
}

#[test]
fn non_literal_versions_are_rejected() {
    let dir = config(&[(
        "versions.tf",
        "terraform {\n  required_providers {\n    aws = {\n      source  = \"hashicorp/aws\"\n      version = var.aws_version\n    }\n  }\n}\n",
    )]);
    let diags = load_err(dir.path());
    let version = find(&diags, "Invalid version constraint");
    assert_eq!(version.detail, "Version must be specified as a string.");
    assert_eq!(at(version), ("versions.tf".into(), 5));
}

#[test]
fn import_into_declared_resource_may_not_pick_another_provider() {
    let dir = config(&[(
        "main.tf",
        "resource \"aws_instance\" \"web\" {}\n\nimport {\n  to       = aws_instance.web\n  id       = \"i-1\"\n  provider = aws.west\n}\n",
    )]);
    let diags = load_err(dir.path());
    let import = find(&diags, "Invalid import provider argument");
    assert_eq!(at(import), ("main.tf".into(), 6));
}

#[test]
fn imports_that_generate_configuration_add_requirements() {
    let dir = config(&[(
        "main.tf",
        "terraform {\n  required_providers {\n    corp = {\n      source = \"example.com/corp/cloud\"\n    }\n  }\n}\n\nimport {\n  to       = cloud_server.legacy\n  id       = \"srv-1\"\n  provider = corp\n}\n\nimport {\n  to = widget_thing.x\n  id = \"w-1\"\n}\n",
    )]);
    let (reqs, _) = load_ok(dir.path());
    let mut found: Vec<String> = reqs.0.keys().map(ToString::to_string).collect();
    found.sort();
    assert_eq!(
        found,
        [
            "example.com/corp/cloud",
            "registry.terraform.io/hashicorp/widget"
        ]
    );
    let widget = &reqs.0[&addr("hashicorp/widget")].declared_in[0];
    assert!(matches!(&widget.kind, OriginKind::Import { to } if to == "widget_thing.x"));
    assert_eq!(at_origin(widget), ("main.tf".into(), 15));
}

#[test]
fn overrides_must_have_something_to_override() {
    let dir = config(&[
        ("main.tf", "provider \"aws\" {}\n"),
        (
            "override.tf",
            "provider \"aws\" {\n  alias = \"typo\"\n}\n\nresource \"aws_instance\" \"ghost\" {}\n\nmodule \"nope\" {}\n\nimport {\n  to = aws_instance.x\n  id = \"i-1\"\n}\n",
        ),
    ]);
    let diags = load_err(dir.path());
    assert_eq!(
        find(&diags, "Missing base provider configuration for override").detail,
        "There is no aws provider configuration with the alias \"typo\". An override file can only override an aliased provider configuration that was already defined in a primary configuration file."
    );
    assert_eq!(
        at(find(&diags, "Missing resource to override")),
        ("override.tf".into(), 5)
    );
    find(&diags, "Missing module call to override");
    find(&diags, "Cannot override 'import' blocks");
}

#[test]
fn duplicate_provider_configurations_are_errors() {
    let dir = config(&[
        ("a.tf", "provider \"aws\" {\n  region = \"eu-west-1\"\n}\n"),
        ("b.tf", "provider \"aws\" {\n  region = \"us-east-1\"\n}\n"),
    ]);
    let diags = load_err(dir.path());
    let duplicate = find(&diags, "Duplicate provider configuration");
    assert!(
        duplicate.detail.contains("a.tf:1,1-15"),
        "{}",
        duplicate.detail
    );
    assert_eq!(at(duplicate), ("b.tf".into(), 1));
}

#[test]
fn module_that_calls_itself_is_stopped() {
    let dir = config(&[("main.tf", "module \"again\" {\n  source = \"./\"\n}\n")]);
    let diags = load_err(dir.path());
    assert_eq!(
        at(find(&diags, "Module calls itself")),
        ("main.tf".into(), 2)
    );
}

/// The same directory under another name: a child that is a symbolic link
/// back to the root.
#[cfg(unix)]
#[test]
fn a_module_reached_again_through_a_symlink_is_stopped() {
    let dir = config(&[
        ("main.tf", "module \"child\" {\n  source = \"./child\"\n}\n"),
        (
            "sub/main.tf",
            "module \"back\" {\n  source = \"../loop\"\n}\n",
        ),
    ]);
    std::os::unix::fs::symlink("sub", dir.path().join("child")).unwrap();
    std::os::unix::fs::symlink(".", dir.path().join("loop")).unwrap();
    let diags = load_err(dir.path());
    assert_eq!(
        at(find(&diags, "Module calls itself")),
        ("child/main.tf".into(), 2)
    );
}

#[test]
fn root_module_with_errors_is_not_descended_into() {
    let dir = config(&[
        (
            "main.tf",
            "module \"child\" {\n  source = \"./child\"\n}\n\nprovider \"Bad\" {}\n",
        ),
        ("child/main.tf", "this is not { valid\n"),
    ]);
    let diags = load_err(dir.path());
    assert_eq!(diags.0.len(), 1, "{diags}");
    assert_eq!(diags.0[0].summary, "Invalid provider local name");
}

#[test]
fn empty_and_missing_root_directories() {
    let dir = config(&[("README.md", "no configuration here")]);
    let (reqs, diags) = load_ok(dir.path());
    assert!(reqs.0.is_empty() && diags.is_empty());

    let diags = load_err(&dir.path().join("absent"));
    assert_eq!(
        find(&diags, "Failed to read module directory").detail,
        "Module directory . does not exist or cannot be read."
    );
}

#[test]
fn join_clean_names_directories_like_terraform() {
    assert_eq!(
        join_clean(Path::new(""), "./modules/app"),
        Path::new("modules/app")
    );
    assert_eq!(
        join_clean(Path::new("modules/app"), "../shared"),
        Path::new("modules/shared")
    );
    assert_eq!(
        join_clean(Path::new(""), "../sibling/./x/"),
        Path::new("../sibling/x")
    );
    assert_eq!(
        join_clean(Path::new("../a"), "../../b"),
        Path::new("../../b")
    );
    assert_eq!(
        clean_manifest_dir(".terraform/modules/vpc"),
        Path::new(".terraform/modules/vpc")
    );
}

#[test]
fn repeated_json_arguments_are_errors() {
    let dir = config(&[(
        "main.tf.json",
        "{\"terraform\": {\"required_providers\": {\n  \"aws\": \"~> 1.0\",\n  \"aws\": \"~> 2.0\"\n}}}\n",
    )]);
    let diags = load_err(dir.path());
    let duplicate = find(&diags, "Duplicate argument");
    assert_eq!(
        duplicate.detail,
        "The argument \"aws\" was already set at main.tf.json:2,3-8. Each argument may be set only once."
    );
    assert_eq!(at(duplicate), ("main.tf.json".into(), 3));
}

#[test]
fn child_module_errors_do_not_hide_grandchildren() {
    let dir = config(&[
        ("main.tf", "module \"child\" {\n  source = \"./child\"\n}\n"),
        (
            "child/main.tf",
            "provider \"Bad\" {}\n\nmodule \"grandchild\" {\n  source = \"./gc\"\n}\n",
        ),
        ("child/gc/main.tf", "provider \"Worse\" {}\n"),
    ]);
    let diags = load_err(dir.path());
    let files: Vec<(String, usize)> = diags.iter().map(at).collect();
    assert_eq!(
        files,
        [("child/main.tf".into(), 1), ("child/gc/main.tf".into(), 1)]
    );
}

#[test]
fn a_directory_is_empty_without_primary_or_override_files() {
    // What Terraform 1.11 also calls empty: tests, backups, hidden files,
    // and configuration only in subdirectories.
    let empty = config(&[
        ("main.tftest.hcl", "run \"plan\" {}\n"),
        ("main.tf~", ""),
        (".hidden.tf", ""),
        ("modules/net/main.tf", ""),
    ]);
    assert!(is_empty_dir(empty.path()));
    assert!(!is_empty_dir(config(&[("override.tf", "")]).path()));
    assert!(!is_empty_dir(config(&[("main.tf.json", "{}")]).path()));
    // Unreadable is not empty: loading the configuration says why.
    assert!(!is_empty_dir(&empty.path().join("missing")));
}
