//! Turning selected versions into installed packages: staging, linking,
//! extraction and the installer that drives them.

pub mod extract;
pub mod hash_memo;
pub mod installer;
pub mod layout;
pub mod link;
pub mod staging;
