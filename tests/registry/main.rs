//! `direct` installation from a provider registry, end to end: the built
//! binary against a real HTTPS registry on 127.0.0.1 (CA made at test time,
//! trusted through `SSL_CERT_FILE`) whose checksum lists are signed by an
//! OpenPGP key generated in the test.

#[path = "../support/mod.rs"]
mod support;

mod credentials;
mod credentials_helper;
mod discovery_memory;
mod failures;
mod happy;
mod harness;
mod memo;
mod netrc;
