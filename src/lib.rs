//! tfinstall: a standalone Terraform provider installer.
//!
//! The modules follow the path data travels through: module configuration →
//! requirements → sources → version selection → fetch and verify → cache →
//! install → lock file.

pub mod diag;
pub mod module;
