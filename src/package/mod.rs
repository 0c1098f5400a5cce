//! A provider package on disk, as the layers above all handle it: fetch and
//! the plugin cache as much as the installer. Its extraction (and the
//! limits that make it safe), its place in the `HOST/NS/TYPE/VERSION/OS_ARCH`
//! layout, and the stamps that let a hash stand for its files.

pub mod extract;
pub mod layout;
pub mod stamps;
