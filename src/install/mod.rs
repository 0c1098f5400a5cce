//! Turning requirements into installed packages, in the order the data
//! travels: [`select`] a version per provider, [`obtain`] and verify each
//! package once, [`place`] it in the working directory; [`installer`]
//! drives the three and [`events`] reports on them; [`admission`] is how
//! each of them asks the provider policy.

pub mod admission;
pub mod cache_use;
pub mod context;
pub mod events;
pub mod hash_memo;
pub mod installer;
pub mod layout;
pub mod link;
pub mod obtain;
pub mod place;
pub mod select;
pub mod staging;
