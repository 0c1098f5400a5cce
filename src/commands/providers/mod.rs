//! `tfinstall providers`, `providers lock`, `providers mirror` and
//! `providers check`.

pub mod check;
pub mod lock;
pub mod mirror;
pub mod tree;
