//! tfinstall reads a `.tf` file exactly when Terraform does.
//!
//! First a module shaped like cloudposse/label/null 0.25.0 (written here,
//! not copied): an object `for` expression whose value runs over several
//! lines, which hcl-edit refuses and Terraform reads.
//!
//! Then the differential test.
//! Bodies are generated from a fixed seed: attributes, blocks and one-line
//! blocks whose expressions use every construct of HCL's native syntax
//! (`for` in both brackets, conditionals, templates with interpolations
//! and directives, heredocs, splats, parentheses, function calls, indexes,
//! operators), with newlines, comments and missing or stray tokens put
//! between their tokens at random, so that some are valid and some are
//! not. Terraform 1.0.3 judges all of them with one `terraform fmt` over a
//! directory; tfinstall reads them as one configuration whose root calls
//! each body as a local module. Any body they disagree on is written to
//! `testdata/hcl-differential/` (under Terraform's verdict) and fails the
//! test; those files are judged again on every run.
//!
//! `TFINSTALL_HCL_CASES` sets how many bodies (default 3000) and
//! `TFINSTALL_HCL_SEED` the seed.

mod support;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use support::Project;
use support::terraform::Terraform;

/// A labelling module: its names are built by an object `for` whose value
/// is a conditional continued over three lines.
const LABEL_MODULE: &str = r#"locals {
  case_names = ["namespace", "stage", "name"]
  case       = var.case
  formatted = { for k in local.case_names : k => local.case == "none" ? var.labels[k] :
    local.case == "title" ? title(lower(var.labels[k])) :
    local.case == "upper" ? upper(var.labels[k]) : lower(var.labels[k])
  }
  id = join("-", [for k in local.case_names : local.formatted[k]
    if length(local.formatted[k]) > 0
  ])
}

variable "labels" {
  type    = map(string)
  default = {}
}

variable "case" {
  type    = string
  default = "lower"
}

resource "random_id" "suffix" {
  for_each    = { for k, v in local.formatted : k => v
    if v != "" }
  byte_length = 4
}

output "id" {
  value = local.id
}
"#;

#[test]
fn a_module_with_a_multi_line_object_for_lists_its_providers() {
    let project = Project::new();
    project.write(
        "main.tf",
        "module \"label\" {\n  source = \"./modules/label\"\n  labels = { name = \"app\" }\n}\n\nprovider \"aws\" {\n  region = \"eu-west-1\"\n}\n",
    );
    project.write("modules/label/main.tf", LABEL_MODULE);
    project.write(
        "modules/label/versions.tf",
        "terraform {\n  required_providers {\n    random = {\n      source  = \"hashicorp/random\"\n      version = \">= 3.0\"\n    }\n  }\n}\n",
    );
    project
        .run(&["providers"])
        .assert_success()
        .assert_stdout_has("provider[registry.terraform.io/hashicorp/aws]")
        .assert_stdout_has("module.label")
        .assert_stdout_has("provider[registry.terraform.io/hashicorp/random] >= 3.0");
}

const DEFAULT_CASES: usize = 3000;
const DEFAULT_SEED: u64 = 0x5eed_4c47;

#[test]
fn tfinstall_accepts_exactly_the_bodies_terraform_accepts() {
    let cases: usize = env_number("TFINSTALL_HCL_CASES").unwrap_or(DEFAULT_CASES as u64) as usize;
    let seed = env_number("TFINSTALL_HCL_SEED").unwrap_or(DEFAULT_SEED);
    let mut generator = Generator::new(seed);
    let mut bodies: Vec<String> = (0..cases).map(|_| generator.body()).collect();
    let regressions = regression_cases();
    bodies.extend(regressions.iter().map(|(_, body, _)| body.clone()));

    let work = tempfile::tempdir().expect("tempdir");
    let theirs = terraform_refuses(work.path(), &bodies);
    let ours = tfinstall_refuses(work.path(), &bodies);

    let accepted = bodies.len() - theirs.len();
    eprintln!(
        "{} bodies ({} generated from seed {seed:#x}, {} regression cases): Terraform accepts {accepted}, refuses {}",
        bodies.len(),
        cases,
        regressions.len(),
        theirs.len()
    );
    // A generator that makes only valid or only invalid bodies tests little.
    assert!(
        accepted > bodies.len() / 5 && theirs.len() > bodies.len() / 5,
        "the generated bodies should be a mix of valid and invalid"
    );

    for (i, (path, _, recorded)) in regressions.iter().enumerate() {
        let refused = theirs.contains(&(cases + i));
        assert_eq!(
            refused,
            !*recorded,
            "{} is filed under Terraform's verdict, which it no longer matches",
            path.display()
        );
    }

    let differing: Vec<usize> = theirs.symmetric_difference(&ours).copied().collect();
    let mut report = String::new();
    for &i in &differing {
        let verdict = if theirs.contains(&i) {
            "rejected"
        } else {
            "accepted"
        };
        if i < cases {
            let kept = keep_regression(&bodies[i], verdict);
            report.push_str(&format!(
                "Terraform {verdict}, tfinstall did not (kept as {}):\n{}\n---\n",
                kept.display(),
                bodies[i]
            ));
        } else {
            report.push_str(&format!(
                "Terraform {verdict}, tfinstall did not: {}\n",
                regressions[i - cases].0.display()
            ));
        }
    }
    assert!(
        differing.is_empty(),
        "{} disagreements with Terraform:\n{report}",
        differing.len()
    );
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name} must be a number, not {text:?}")))
}

fn regression_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/hcl-differential")
}

/// Every kept case: its path, its text and whether Terraform accepted it.
fn regression_cases() -> Vec<(PathBuf, String, bool)> {
    let mut cases = Vec::new();
    for (verdict, accepted) in [("accepted", true), ("rejected", false)] {
        let Ok(entries) = fs::read_dir(regression_dir().join(verdict)) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.map(|entry| entry.expect("entry").path()).collect();
        paths.sort();
        for path in paths {
            let text = fs::read_to_string(&path).expect("read regression case");
            cases.push((path, text, accepted));
        }
    }
    cases
}

/// Files a body tfinstall and Terraform disagreed on, named by its hash
/// so that a rerun keeps one copy.
fn keep_regression(body: &str, verdict: &str) -> PathBuf {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(body.as_bytes());
    let name: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    let dir = regression_dir().join(verdict);
    fs::create_dir_all(&dir).expect("create regression dir");
    let path = dir.join(format!("{name}.tf"));
    fs::write(&path, body).expect("write regression case");
    path
}

fn case_name(i: usize) -> String {
    format!("b{i:05}")
}

/// The bodies `terraform fmt` refuses, by index: `fmt` over a directory
/// holding each body as a file, its errors naming the files.
///
/// Terraform 1.0.3 crashes while printing the source snippet of some
/// errors (a slice out of range in `appendSourceSnippets`); its messages
/// come in file order, so everything up to the last file named is judged,
/// and `fmt` runs again over the rest. When it crashes before naming any
/// file, the first refused file is the one it was printing: the files are
/// read one by one through `fmt -` until it is found.
fn terraform_refuses(work: &Path, bodies: &[String]) -> BTreeSet<usize> {
    let dir = work.join("terraform");
    fs::create_dir_all(&dir).expect("mkdir");
    let file = |i: usize| dir.join(format!("{}.tf", case_name(i)));
    for (i, body) in bodies.iter().enumerate() {
        fs::write(file(i), body).expect("write body");
    }
    let home = work.join("home");
    fs::create_dir_all(&home).expect("mkdir home");
    let cli_config = work.join("terraformrc");
    fs::write(&cli_config, "").expect("write cli config");
    let terraform = |args: &[&str]| {
        let mut command = Terraform::V1_0_3.command(&home, &cli_config, None);
        command.current_dir(&dir).args(args);
        command
    };

    let mut refused = BTreeSet::new();
    let mut next = 0;
    while next < bodies.len() {
        let output = terraform(&["fmt", "-check", "-list=false", "-no-color", "."])
            .output()
            .expect("run terraform fmt");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        let named = files_named(&text, "");
        refused.extend(named.iter().copied());
        if !text.contains("TERRAFORM CRASH") {
            assert!(
                named.is_empty() == (output.status.code() != Some(2)),
                "terraform fmt failed without naming a file, or named one without failing:\n{text}"
            );
            break;
        }
        let judged = match named.last() {
            Some(&last) => last + 1,
            None => {
                let first_refused = (next..bodies.len())
                    .find(|&i| !fmt_stdin_accepts(terraform(&["fmt", "-"]), &bodies[i]))
                    .expect("terraform crashed on a file it accepts");
                refused.insert(first_refused);
                first_refused + 1
            }
        };
        for i in next..judged {
            fs::remove_file(file(i)).expect("remove judged body");
        }
        next = judged;
    }
    refused
}

/// Whether `terraform fmt -` reads `body` from its standard input.
fn fmt_stdin_accepts(mut command: std::process::Command, body: &str) -> bool {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run terraform fmt -");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(body.as_bytes()).expect("write body");
    drop(stdin);
    child.wait().expect("wait for terraform").success()
}

/// The bodies tfinstall refuses, by index: one configuration whose root
/// module calls each body's directory, read as `init` reads it.
fn tfinstall_refuses(work: &Path, bodies: &[String]) -> BTreeSet<usize> {
    let root = work.join("tfinstall");
    let mut calls = String::new();
    for (i, body) in bodies.iter().enumerate() {
        let name = case_name(i);
        let dir = root.join(&name);
        fs::create_dir_all(&dir).expect("mkdir");
        fs::write(dir.join("main.tf"), body).expect("write body");
        calls.push_str(&format!(
            "module \"{name}\" {{\n  source = \"./{name}\"\n}}\n"
        ));
    }
    fs::write(root.join("main.tf"), calls).expect("write root");
    let diags = match tfinstall::module::load_requirements(&root, &root.join(".terraform")) {
        Ok((_, diags)) => diags,
        Err(diags) => diags,
    };
    let mut shown = String::new();
    for diag in diags.iter() {
        let file = diag
            .subject
            .as_ref()
            .map(|pos| pos.file.display().to_string())
            .unwrap_or_default();
        shown.push_str(&format!("on {file} line 1:\n"));
        assert!(
            file.starts_with('b') && file.ends_with("/main.tf"),
            "a diagnostic not about one body: {diag}"
        );
    }
    files_named(&shown, "/main.tf")
}

/// The case indexes in `on bNNNNN<suffix> line` phrases of an output.
fn files_named(output: &str, suffix: &str) -> BTreeSet<usize> {
    let mut found = BTreeSet::new();
    for line in output.lines() {
        let Some(rest) = line.trim_start().strip_prefix("on ") else {
            continue;
        };
        let rest = rest.trim_start_matches("./");
        let Some(digits) = rest.strip_prefix('b') else {
            continue;
        };
        let number: String = digits.chars().take_while(char::is_ascii_digit).collect();
        let after = &digits[number.len()..];
        let expected = if suffix.is_empty() { ".tf" } else { suffix };
        if after.starts_with(&format!("{expected} line")) {
            found.insert(number.parse().expect("case number"));
        }
    }
    found
}

/// A piece of generated source: fixed text, or a place between two
/// tokens where whitespace, a newline or a comment may go.
#[derive(Clone)]
enum Piece {
    Text(String),
    Gap,
    /// A line end the construct needs (after an argument, inside a
    /// multi-line block, after a heredoc marker).
    Newline,
}

/// Tokens a mutation may drop in anywhere.
const STRAY: &[&str] = &[
    ",",
    ":",
    "?",
    "=>",
    "...",
    "=",
    "]",
    ")",
    "}",
    "[",
    "(",
    "{",
    "for",
    "in",
    "if",
    ".",
    "*",
    "\"",
    "${",
    "%{ endif }",
    "<<EOT\n",
    "EOT\n",
    "#",
    "\n",
];

/// Small deterministic generator (xorshift64*), so a seed names the same
/// bodies on every machine.
struct Generator {
    state: u64,
    depth: usize,
    names: usize,
}

impl Generator {
    fn new(seed: u64) -> Self {
        Generator {
            state: seed.max(1),
            depth: 0,
            names: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn body(&mut self) -> String {
        self.names = 0;
        let mut pieces = Vec::new();
        for _ in 0..1 + self.below(3) {
            self.item(&mut pieces, 0);
        }
        // Some bodies get no perturbation, some several.
        let perturbation = [0, 2, 4, 8][self.below(4)];
        for _ in 0..self.below(3) {
            if self.chance(perturbation * 4) {
                self.mutate(&mut pieces);
            }
        }
        self.render(&pieces, perturbation)
    }

    fn text(pieces: &mut Vec<Piece>, text: &str) {
        pieces.push(Piece::Text(text.to_string()));
    }

    /// A new argument name, now and then one already used (which HCL
    /// refuses in the same body).
    fn fresh_name(&mut self) -> String {
        if self.names > 0 && self.chance(1) {
            return "a1".to_string();
        }
        self.names += 1;
        format!("a{}", self.names)
    }

    fn item(&mut self, pieces: &mut Vec<Piece>, nesting: usize) {
        match self.below(if nesting < 2 { 6 } else { 4 }) {
            0..=3 => {
                let name = self.fresh_name();
                Self::text(pieces, &name);
                pieces.push(Piece::Gap);
                Self::text(pieces, "=");
                pieces.push(Piece::Gap);
                self.depth = 0;
                self.expr(pieces);
                pieces.push(Piece::Newline);
            }
            4 => {
                // One-line block.
                Self::text(pieces, "blk");
                pieces.push(Piece::Gap);
                Self::text(pieces, "{");
                pieces.push(Piece::Gap);
                let name = self.fresh_name();
                Self::text(pieces, &name);
                pieces.push(Piece::Gap);
                Self::text(pieces, "=");
                pieces.push(Piece::Gap);
                self.depth = 0;
                self.expr(pieces);
                pieces.push(Piece::Gap);
                Self::text(pieces, "}");
                pieces.push(Piece::Newline);
            }
            _ => {
                Self::text(pieces, "blk");
                for _ in 0..self.below(3) {
                    pieces.push(Piece::Gap);
                    let label = self.pick(&["\"x\"", "y", "\"a\\nb\"", "\"${z}\"", "\"\""]);
                    Self::text(pieces, label);
                }
                pieces.push(Piece::Gap);
                Self::text(pieces, "{");
                pieces.push(Piece::Newline);
                for _ in 0..self.below(3) {
                    self.item(pieces, nesting + 1);
                }
                Self::text(pieces, "}");
                pieces.push(Piece::Newline);
            }
        }
    }

    fn expr(&mut self, pieces: &mut Vec<Piece>) {
        self.depth += 1;
        let simple = self.depth > 3;
        let choice = if simple {
            self.below(4)
        } else {
            self.below(22)
        };
        match choice {
            0 => {
                let number = if self.chance(5) {
                    self.pick(&["1.2.3", "1..2"])
                } else {
                    self.pick(&["1", "0", "2.5", "1e3", "10", "1e+5", "007"])
                };
                Self::text(pieces, number);
            }
            1 => {
                let word = self.pick(&[
                    "true", "false", "null", "v", "local.x", "var.y", "_u", "ñu", "for",
                ]);
                Self::text(pieces, word);
            }
            2 => self.traversal(pieces),
            3 => {
                let string = if self.chance(5) {
                    self.pick(&["\"\\q\"", "\"\\u12\"", "\"\\ud800\""])
                } else {
                    self.pick(&[
                        "\"s\"",
                        "\"a\\tb\"",
                        "\"$${x}\"",
                        "\"%%{x}\"",
                        "\"\\u00e9\"",
                        "\"\"",
                        "\"$$ %% $\"",
                    ])
                };
                Self::text(pieces, string);
            }
            4 | 5 => self.template(pieces),
            6 => self.heredoc(pieces),
            7 | 8 => self.call(pieces),
            9 => {
                Self::text(pieces, "(");
                pieces.push(Piece::Gap);
                self.expr(pieces);
                pieces.push(Piece::Gap);
                Self::text(pieces, ")");
            }
            10 => {
                let op = self.pick(&["-", "!"]);
                Self::text(pieces, op);
                pieces.push(Piece::Gap);
                self.expr(pieces);
            }
            11 | 12 => {
                self.expr(pieces);
                pieces.push(Piece::Gap);
                let op = self.pick(&[
                    "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||",
                ]);
                Self::text(pieces, op);
                pieces.push(Piece::Gap);
                self.expr(pieces);
            }
            13 | 14 => {
                self.expr(pieces);
                pieces.push(Piece::Gap);
                Self::text(pieces, "?");
                pieces.push(Piece::Gap);
                self.expr(pieces);
                pieces.push(Piece::Gap);
                Self::text(pieces, ":");
                pieces.push(Piece::Gap);
                self.expr(pieces);
            }
            15 => self.tuple(pieces),
            16 => self.object(pieces),
            17 | 18 => self.for_expr(pieces, "[", "]"),
            19 | 20 => self.for_expr(pieces, "{", "}"),
            _ => {
                self.expr(pieces);
                pieces.push(Piece::Gap);
                Self::text(pieces, "[");
                pieces.push(Piece::Gap);
                self.expr(pieces);
                pieces.push(Piece::Gap);
                Self::text(pieces, "]");
            }
        }
        self.depth -= 1;
    }

    fn traversal(&mut self, pieces: &mut Vec<Piece>) {
        Self::text(pieces, if self.chance(3) { "x.0.1" } else { "x" });
        for _ in 0..1 + self.below(3) {
            pieces.push(Piece::Gap);
            let step = self.pick(&[
                ".a", "[0]", "[\"k\"]", ".0", "[*]", ".*", ".*.b", "[*].c", ".b", ".*.0", ".a-b",
            ]);
            Self::text(pieces, step);
        }
    }

    /// A quoted template; only inside its sequences may gaps go.
    fn template(&mut self, pieces: &mut Vec<Piece>) {
        Self::text(pieces, "\"a");
        match self.below(4) {
            0 | 1 => {
                let open = self.pick(&["${", "${~"]);
                Self::text(pieces, open);
                pieces.push(Piece::Gap);
                self.expr(pieces);
                pieces.push(Piece::Gap);
                let close = self.pick(&["}", "~}"]);
                Self::text(pieces, close);
            }
            2 => {
                Self::text(pieces, "%{");
                pieces.push(Piece::Gap);
                Self::text(pieces, "if");
                pieces.push(Piece::Gap);
                self.expr(pieces);
                pieces.push(Piece::Gap);
                Self::text(pieces, "}b");
                if self.chance(50) {
                    Self::text(pieces, "%{ else }c");
                }
                Self::text(pieces, "%{ endif }");
            }
            _ => {
                Self::text(pieces, "%{");
                pieces.push(Piece::Gap);
                Self::text(pieces, "for");
                pieces.push(Piece::Gap);
                Self::text(pieces, "i");
                pieces.push(Piece::Gap);
                Self::text(pieces, "in");
                pieces.push(Piece::Gap);
                self.expr(pieces);
                pieces.push(Piece::Gap);
                Self::text(pieces, "}${i}%{ endfor }");
            }
        }
        Self::text(pieces, "z\"");
    }

    fn heredoc(&mut self, pieces: &mut Vec<Piece>) {
        let flush = self.chance(50);
        Self::text(pieces, if flush { "<<-EOT" } else { "<<EOT" });
        pieces.push(Piece::Newline);
        Self::text(pieces, "  line ");
        if self.chance(70) {
            Self::text(pieces, "${");
            pieces.push(Piece::Gap);
            self.expr(pieces);
            pieces.push(Piece::Gap);
            Self::text(pieces, "}");
        }
        if self.chance(30) {
            Self::text(pieces, "\n  %{ if c }yes%{ endif }");
        }
        pieces.push(Piece::Newline);
        Self::text(pieces, if flush { "  EOT" } else { "EOT" });
        pieces.push(Piece::Newline);
    }

    fn call(&mut self, pieces: &mut Vec<Piece>) {
        let name = self.pick(&["f", "lower", "merge", "try"]);
        Self::text(pieces, name);
        pieces.push(Piece::Gap);
        Self::text(pieces, "(");
        let args = self.below(3);
        for i in 0..args {
            pieces.push(Piece::Gap);
            self.expr(pieces);
            pieces.push(Piece::Gap);
            if i + 1 < args {
                Self::text(pieces, ",");
            } else if self.chance(20) {
                Self::text(pieces, "...");
            } else if self.chance(20) {
                Self::text(pieces, ",");
            }
        }
        pieces.push(Piece::Gap);
        Self::text(pieces, ")");
    }

    fn tuple(&mut self, pieces: &mut Vec<Piece>) {
        Self::text(pieces, "[");
        let items = self.below(3);
        for i in 0..items {
            pieces.push(Piece::Gap);
            self.expr(pieces);
            pieces.push(Piece::Gap);
            if i + 1 < items || self.chance(30) {
                Self::text(pieces, ",");
            }
        }
        pieces.push(Piece::Gap);
        Self::text(pieces, "]");
    }

    fn object(&mut self, pieces: &mut Vec<Piece>) {
        Self::text(pieces, "{");
        let items = self.below(3);
        for i in 0..items {
            pieces.push(Piece::Gap);
            let key = self.pick(&["k", "\"k\"", "(k)", "k.x"]);
            Self::text(pieces, key);
            pieces.push(Piece::Gap);
            let assign = self.pick(&["=", ":"]);
            Self::text(pieces, assign);
            pieces.push(Piece::Gap);
            self.expr(pieces);
            if i + 1 < items || self.chance(30) {
                if self.chance(50) {
                    pieces.push(Piece::Gap);
                    Self::text(pieces, ",");
                } else {
                    pieces.push(Piece::Newline);
                }
            }
        }
        pieces.push(Piece::Gap);
        Self::text(pieces, "}");
    }

    fn for_expr(&mut self, pieces: &mut Vec<Piece>, open: &str, close: &str) {
        let object = open == "{";
        Self::text(pieces, open);
        pieces.push(Piece::Gap);
        Self::text(pieces, "for");
        pieces.push(Piece::Gap);
        if self.chance(50) {
            Self::text(pieces, "k");
            pieces.push(Piece::Gap);
            Self::text(pieces, ",");
            pieces.push(Piece::Gap);
        }
        Self::text(pieces, "v");
        pieces.push(Piece::Gap);
        Self::text(pieces, "in");
        pieces.push(Piece::Gap);
        self.expr(pieces);
        pieces.push(Piece::Gap);
        Self::text(pieces, ":");
        pieces.push(Piece::Gap);
        // Now and then the wrong shape for the bracket.
        let with_key = object != self.chance(5);
        if with_key {
            self.expr(pieces);
            pieces.push(Piece::Gap);
            Self::text(pieces, "=>");
            pieces.push(Piece::Gap);
        }
        self.expr(pieces);
        if object && self.chance(20) {
            pieces.push(Piece::Gap);
            Self::text(pieces, "...");
        }
        if self.chance(30) {
            pieces.push(Piece::Gap);
            Self::text(pieces, "if");
            pieces.push(Piece::Gap);
            self.expr(pieces);
        }
        pieces.push(Piece::Gap);
        Self::text(pieces, close);
    }

    /// Drops a piece, repeats one, or puts a stray token somewhere.
    fn mutate(&mut self, pieces: &mut Vec<Piece>) {
        if pieces.is_empty() {
            return;
        }
        let at = self.below(pieces.len());
        match self.below(3) {
            0 => {
                pieces.remove(at);
            }
            1 => {
                let piece = pieces[at].clone();
                pieces.insert(at, piece);
            }
            _ => {
                let stray = self.pick(STRAY);
                pieces.insert(at, Piece::Text(stray.to_string()));
                pieces.insert(at, Piece::Gap);
            }
        }
    }

    /// Writes the pieces out; each gap is a space, or with a chance of
    /// `percent`, nothing, a newline or a comment of either kind.
    fn render(&mut self, pieces: &[Piece], percent: usize) -> String {
        let mut out = String::new();
        for piece in pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Newline => {
                    if self.chance(percent) {
                        let comment = self.pick(&[" # note\n", " // note\n", " /* a\n b */\n"]);
                        out.push_str(comment);
                    } else {
                        out.push('\n');
                    }
                }
                Piece::Gap => {
                    let gap = if self.chance(percent) {
                        self.pick(&[
                            "",
                            "\n",
                            "\n\n",
                            " # note\n",
                            " // note\n",
                            " /* note */ ",
                            " /* a\nb */ ",
                            "\t",
                            "\r\n",
                        ])
                    } else {
                        " "
                    };
                    out.push_str(gap);
                }
            }
        }
        out
    }
}
