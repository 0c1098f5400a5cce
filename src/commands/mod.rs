//! One file per subcommand: thin orchestration of the pipeline stages.

pub mod init;
pub mod providers;
