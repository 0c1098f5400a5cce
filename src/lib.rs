//! tfinstall: a standalone Terraform provider installer.
//!
//! The modules follow the path data travels through: module configuration →
//! requirements → sources → version selection → fetch and verify → cache →
//! install → lock file.
//!
//! No code of the crate prints with `print!`/`println!`/`eprintln!`: with
//! SIGPIPE ignored (as Go leaves it for everything but standard output and
//! error) those panic when the reader is gone, so every print goes through
//! [`stdio`], which ends the process by SIGPIPE instead (issue 31).
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod addr;
pub mod cache;
pub mod cli;
pub mod cliconfig;
pub mod commands;
pub mod diag;
pub mod engine;
pub mod failpoint;
pub mod fetch;
pub mod fsutil;
pub mod go_json;
pub mod go_quote;
pub mod handoff;
pub mod http;
pub mod install;
pub mod lockfile;
pub mod memo;
pub mod module;
pub mod module_install;
pub mod module_package;
pub mod output;
pub mod package;
pub mod platform_hashes;
pub mod policy;
pub mod serve;
pub mod sha256;
pub mod source;
pub mod stdio;
pub mod ui;
pub mod units;
pub mod verify;
pub mod version;
pub mod workdir;
