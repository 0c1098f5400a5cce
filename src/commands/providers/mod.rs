//! `tfinstall providers`, `providers lock` and `providers mirror`.

pub mod lock;
pub mod mirror;
pub mod tree;
