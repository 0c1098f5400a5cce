//! One file per subcommand: thin orchestration of the pipeline stages.

pub mod cache;
pub mod completions;
pub mod exec;
pub mod get;
pub mod init;
pub mod providers;
