//! The proxy of each request, chosen from the environment exactly as Go's
//! `net/http.ProxyFromEnvironment` (`golang.org/x/net/http/httpproxy`)
//! chooses it, so that tfinstall goes through a proxy where Terraform does
//! and only there:
//! - `HTTPS_PROXY` (else `https_proxy`) for https URLs, `HTTP_PROXY` (else
//!   `http_proxy`) for http URLs; an empty value counts as unset. Under CGI
//!   (`REQUEST_METHOD` set) `HTTP_PROXY` is never used, since a request's
//!   `Proxy:` header reaches a CGI program as that variable (Go fails the
//!   request instead; tfinstall, a client only, goes direct).
//! - a value whose scheme is not `http`, `https` or `socks5` (such as
//!   `proxy.corp:3128`) is read as `http://VALUE`. A `socks5` proxy gets
//!   host names to resolve, as Go's SOCKS client sends them.
//! - `localhost` and loopback addresses (`127.0.0.0/8`, `::1`) never go
//!   through a proxy.
//! - `NO_PROXY` (else `no_proxy`): comma-separated, case-insensitive
//!   entries; `*` alone turns proxies off; `1.2.3.4` or `::1` matches that
//!   address, `1.2.3.0/24` every address in it, `[::1]:443` or
//!   `1.2.3.4:443` that address on that port; `example.com` matches it and
//!   every name below it, `.example.com` and `*.example.com` only the names
//!   below it, each optionally with `:PORT`. A name entry is also compared
//!   as text with an address (Go does), so `0.0.1` matches `10.0.0.1`.
//!
//! reqwest's own environment proxy differs (it proxies loopback, matches
//! ports nowhere), hence this, handed to reqwest as a `Proxy::custom`.
//! Hosts arrive as the `url` crate normalizes them: lower case, IDNA
//! names in their ASCII form, IPv4 addresses in dotted decimal.

use std::net::IpAddr;

use url::{Host, Url};

/// The proxy settings of the environment, parsed once per client.
#[derive(Debug, Default)]
pub struct ProxyEnv {
    http: Option<Url>,
    https: Option<Url>,
    no_proxy: NoProxy,
    cgi: bool,
}

impl ProxyEnv {
    pub fn from_process() -> ProxyEnv {
        ProxyEnv::from_lookup(|name| std::env::var(name).ok())
    }

    /// The settings from the variables `var` gives.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> ProxyEnv {
        let first_set = |names: [&str; 2]| {
            names
                .into_iter()
                .find_map(|name| var(name).filter(|value| !value.is_empty()))
        };
        ProxyEnv {
            http: first_set(["HTTP_PROXY", "http_proxy"]).and_then(|v| proxy_url(&v)),
            https: first_set(["HTTPS_PROXY", "https_proxy"]).and_then(|v| proxy_url(&v)),
            no_proxy: NoProxy::parse(&first_set(["NO_PROXY", "no_proxy"]).unwrap_or_default()),
            cgi: var("REQUEST_METHOD").is_some_and(|value| !value.is_empty()),
        }
    }

    /// Whether any request can go through a proxy.
    pub fn any(&self) -> bool {
        self.https.is_some() || (self.http.is_some() && !self.cgi)
    }

    /// The proxy a request to `url` goes through, if any.
    pub fn proxy_for(&self, url: &Url) -> Option<&Url> {
        let proxy = match url.scheme() {
            "https" => self.https.as_ref(),
            "http" if !self.cgi => self.http.as_ref(),
            _ => None,
        }?;
        let port = url
            .port_or_known_default()
            .map(|port| port.to_string())
            .unwrap_or_default();
        self.uses_proxy(url.host()?, &port).then_some(proxy)
    }

    fn uses_proxy(&self, host: Host<&str>, port: &str) -> bool {
        let (name, ip) = match host {
            Host::Domain(name) => (name.to_ascii_lowercase(), name.parse::<IpAddr>().ok()),
            Host::Ipv4(ip) => (ip.to_string(), Some(IpAddr::V4(ip))),
            Host::Ipv6(ip) => (ip.to_string(), Some(IpAddr::V6(ip))),
        };
        if name == "localhost" || ip.is_some_and(|ip| ip.to_canonical().is_loopback()) {
            return false;
        }
        !self.no_proxy.matches(&name, ip, port)
    }
}

/// The proxy URL as reqwest takes it: Go's `socks5` sends the host name to
/// the proxy, which reqwest calls `socks5h`.
pub fn for_reqwest(proxy: &Url) -> String {
    match proxy.as_str().strip_prefix("socks5:") {
        Some(rest) => format!("socks5h:{rest}"),
        None => proxy.to_string(),
    }
}

/// A proxy variable's value as a URL; `None` for one that is not one
/// either way (Go ignores it too).
fn proxy_url(value: &str) -> Option<Url> {
    match Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https" | "socks5") => Some(url),
        parsed => Url::parse(&format!("http://{value}")).ok().or(parsed.ok()),
    }
}

/// The `NO_PROXY` entries.
#[derive(Debug, Default)]
struct NoProxy {
    /// `*`: no request goes through a proxy.
    all: bool,
    addresses: Vec<AddressEntry>,
    names: Vec<NameEntry>,
}

#[derive(Debug)]
enum AddressEntry {
    /// `ADDRESS/BITS`; an IPv4 network also holds the IPv4-mapped IPv6
    /// addresses in it.
    Network { network: IpAddr, bits: u8 },
    /// `ADDRESS`, or `ADDRESS:PORT` (`[ADDRESS]:PORT` for IPv6).
    Address { ip: IpAddr, port: String },
}

#[derive(Debug)]
struct NameEntry {
    /// The name with a leading dot: a host ending in it matches.
    suffix: String,
    /// Empty for any port.
    port: String,
    /// Written without a leading dot (`example.com`), so the name itself
    /// matches too.
    itself_too: bool,
}

impl NoProxy {
    fn parse(list: &str) -> NoProxy {
        let mut no_proxy = NoProxy::default();
        for entry in list.split(',') {
            let entry = entry.trim().to_lowercase();
            if entry.is_empty() {
                continue;
            }
            if entry == "*" {
                return NoProxy {
                    all: true,
                    ..NoProxy::default()
                };
            }
            if let Some((network, bits)) = parse_cidr(&entry) {
                no_proxy
                    .addresses
                    .push(AddressEntry::Network { network, bits });
                continue;
            }
            let (host, port) = match split_host_port(&entry) {
                Some(("", _)) => continue,
                Some((host, port)) => (
                    host.strip_prefix('[')
                        .and_then(|h| h.strip_suffix(']'))
                        .unwrap_or(host),
                    port,
                ),
                None => (entry.as_str(), ""),
            };
            if let Ok(ip) = host.parse::<IpAddr>() {
                no_proxy.addresses.push(AddressEntry::Address {
                    ip: ip.to_canonical(),
                    port: port.to_owned(),
                });
                continue;
            }
            if host.is_empty() {
                continue;
            }
            // `*.example.com` is `.example.com`.
            let host = host
                .strip_prefix('*')
                .filter(|rest| rest.starts_with('.'))
                .unwrap_or(host);
            let (suffix, itself_too) = match host.starts_with('.') {
                true => (host.to_owned(), false),
                false => (format!(".{host}"), true),
            };
            let suffix = match suffix.is_ascii() {
                true => suffix,
                false => idna::domain_to_ascii(&suffix).unwrap_or(suffix),
            };
            no_proxy.names.push(NameEntry {
                suffix,
                port: port.to_owned(),
                itself_too,
            });
        }
        no_proxy
    }

    fn matches(&self, name: &str, ip: Option<IpAddr>, port: &str) -> bool {
        if self.all {
            return true;
        }
        let by_address = ip.is_some_and(|ip| {
            let ip = ip.to_canonical();
            self.addresses.iter().any(|entry| match entry {
                AddressEntry::Network { network, bits } => in_network(ip, *network, *bits),
                AddressEntry::Address {
                    ip: entry_ip,
                    port: entry_port,
                } => *entry_ip == ip && (entry_port.is_empty() || entry_port == port),
            })
        });
        by_address
            || self.names.iter().any(|entry| {
                (name.ends_with(&entry.suffix) || (entry.itself_too && name == &entry.suffix[1..]))
                    && (entry.port.is_empty() || entry.port == port)
            })
    }
}

/// `ADDRESS/BITS` as Go's `net.ParseCIDR` reads it, the network masked; an
/// IPv4-mapped IPv6 network of 96 bits or more is the IPv4 network it maps.
fn parse_cidr(entry: &str) -> Option<(IpAddr, u8)> {
    let (address, bits) = entry.split_once('/')?;
    let ip: IpAddr = address.parse().ok()?;
    if bits.is_empty() || !bits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let bits: u8 = bits.parse().ok().filter(|&bits| bits <= max)?;
    let network = mask(ip, bits);
    Some(match network.to_canonical() {
        IpAddr::V4(v4) if network.is_ipv6() => (IpAddr::V4(v4), bits - 96),
        _ => (network, bits),
    })
}

fn mask(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & mask).into())
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

/// Whether `ip` (canonical) is in the network; an address of the other
/// family never is.
fn in_network(ip: IpAddr, network: IpAddr, bits: u8) -> bool {
    match (ip, network) {
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
            mask(ip, bits) == network
        }
        _ => false,
    }
}

/// Go's `net.SplitHostPort`: `host:port` split at the last colon, or
/// `[host]:port` with the brackets removed; `None` where Go returns an
/// error (no port, a colon in an unbracketed host, stray brackets).
fn split_host_port(entry: &str) -> Option<(&str, &str)> {
    let last_colon = entry.rfind(':')?;
    let (host, rest_from) = if entry.starts_with('[') {
        let close = entry.find(']')?;
        if close + 1 != last_colon {
            return None;
        }
        (&entry[1..close], close + 1)
    } else {
        let host = &entry[..last_colon];
        if host.contains(':') {
            return None;
        }
        (host, 0)
    };
    let opening_from = usize::from(entry.starts_with('['));
    if entry[opening_from..].contains('[') || entry[rest_from..].contains(']') {
        return None;
    }
    Some((host, &entry[last_colon + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROXY: &str = "http://proxy.corp:3128/";

    /// `url`'s proxy with `HTTPS_PROXY` and `HTTP_PROXY` set to [`PROXY`]
    /// and `NO_PROXY` to `no_proxy`.
    fn proxied(no_proxy: &str, url: &str) -> bool {
        let env = ProxyEnv::from_lookup(|name| match name {
            "HTTPS_PROXY" | "HTTP_PROXY" => Some(PROXY.to_owned()),
            "NO_PROXY" => Some(no_proxy.to_owned()),
            _ => None,
        });
        match env.proxy_for(&Url::parse(url).unwrap()) {
            Some(proxy) => {
                assert_eq!(proxy.as_str(), PROXY);
                true
            }
            None => false,
        }
    }

    /// (NO_PROXY, request URL, goes through the proxy), as Go decides.
    const NO_PROXY_TABLE: &[(&str, &str, bool)] = &[
        // No entries: everything but loopback is proxied.
        ("", "https://registry.example.com/v1/", true),
        ("", "http://registry.example.com/v1/", true),
        ("", "https://10.1.2.3/", true),
        ("", "https://0.0.0.0:8443/", true),
        ("", "https://[2001:db8::1]/", true),
        ("", "https://localhost:8443/", false),
        ("", "https://127.0.0.1:8443/", false),
        ("", "https://127.9.9.9/", false),
        ("", "https://[::1]:8443/", false),
        ("", "https://[::ffff:127.0.0.1]/", false),
        ("", "https://localhost.example.com/", true),
        // `*` alone, anywhere in the list.
        ("*", "https://registry.example.com/", false),
        ("a.example,*", "https://10.1.2.3/", false),
        ("*.", "https://registry.example.com/", true),
        // A name: itself and every name below it.
        ("example.com", "https://example.com/", false),
        ("example.com", "https://registry.example.com/", false),
        ("example.com", "https://notexample.com/", true),
        ("EXAMPLE.com", "https://Registry.Example.COM/", false),
        (
            " other.org , example.com ",
            "https://registry.example.com/",
            false,
        ),
        // A leading dot or `*.`: only the names below it.
        (".example.com", "https://example.com/", true),
        (".example.com", "https://registry.example.com/", false),
        ("*.example.com", "https://example.com/", true),
        ("*.example.com", "https://a.b.example.com/", false),
        // A name with a port: that port only, the scheme's default counting.
        (
            "example.com:8443",
            "https://registry.example.com:8443/",
            false,
        ),
        ("example.com:8443", "https://registry.example.com/", true),
        ("example.com:443", "https://registry.example.com/", false),
        ("example.com:80", "http://registry.example.com/", false),
        ("example.com:443", "http://registry.example.com/", true),
        (".example.com:443", "https://registry.example.com/", false),
        // Addresses.
        ("10.1.2.3", "https://10.1.2.3/", false),
        ("10.1.2.3", "https://10.1.2.4/", true),
        ("10.1.2.3:8443", "https://10.1.2.3:8443/", false),
        ("10.1.2.3:8443", "https://10.1.2.3/", true),
        ("2001:db8::1", "https://[2001:db8::1]/", false),
        ("[2001:db8::1]:443", "https://[2001:db8::1]/", false),
        ("[2001:db8::1]:8443", "https://[2001:db8::1]/", true),
        ("::ffff:10.1.2.3", "https://10.1.2.3/", false),
        ("10.1.2.3", "https://[::ffff:10.1.2.3]/", false),
        // Networks.
        ("10.0.0.0/8", "https://10.1.2.3/", false),
        ("10.0.0.0/8", "https://11.1.2.3/", true),
        ("10.1.2.3/8", "https://10.200.0.1/", false),
        ("0.0.0.0/0", "https://192.0.2.1/", false),
        ("2001:db8::/32", "https://[2001:db8:1::5]/", false),
        ("2001:db8::/32", "https://[2001:db9::5]/", true),
        ("::ffff:10.0.0.0/104", "https://10.9.9.9/", false),
        ("10.0.0.0/8", "https://[::ffff:10.1.2.3]/", false),
        ("10.0.0.0/8", "https://[2001:db8::1]/", true),
        // A network never matches a name, nor a name entry an address
        // unless as text (Go compares the text).
        ("10.0.0.0/8", "https://ten.example.com/", true),
        ("0.0.1", "https://10.0.0.1/", false),
        ("example.com", "https://10.1.2.3/", true),
        // Malformed entries are skipped.
        ("10.0.0.0/33", "https://10.1.2.3/", true),
        (":443", "https://registry.example.com/", true),
        ("[::1]", "https://registry.example.com/", true),
        ("example.com:", "https://registry.example.com/", false),
        (",,", "https://registry.example.com/", true),
        // Loopback is never proxied, whatever NO_PROXY says.
        ("example.com", "https://localhost/", false),
    ];

    #[test]
    fn no_proxy_matches_as_go_does() {
        for &(no_proxy, url, expected) in NO_PROXY_TABLE {
            assert_eq!(
                proxied(no_proxy, url),
                expected,
                "NO_PROXY={no_proxy:?} {url}"
            );
        }
    }

    #[test]
    fn the_scheme_picks_the_variable_and_upper_case_wins() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            ProxyEnv::from_lookup(move |name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            })
        };
        let for_url = |env: &ProxyEnv, url: &str| {
            env.proxy_for(&Url::parse(url).unwrap())
                .map(|proxy| proxy.to_string())
        };
        let https = "https://registry.example.com/";
        let http = "http://registry.example.com/";

        let only_http = env(&[("HTTP_PROXY", "http://h:1")]);
        assert_eq!(for_url(&only_http, https), None);
        assert_eq!(for_url(&only_http, http).as_deref(), Some("http://h:1/"));

        let both_cases = env(&[
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:1"),
        ]);
        assert_eq!(
            for_url(&both_cases, https).as_deref(),
            Some("http://upper:1/")
        );
        let empty_upper = env(&[("HTTPS_PROXY", ""), ("https_proxy", "http://lower:1")]);
        assert_eq!(
            for_url(&empty_upper, https).as_deref(),
            Some("http://lower:1/")
        );
        let lower_no_proxy = env(&[("HTTPS_PROXY", "http://p:1"), ("no_proxy", "example.com")]);
        assert_eq!(for_url(&lower_no_proxy, https), None);
        let upper_no_proxy_wins = env(&[
            ("HTTPS_PROXY", "http://p:1"),
            ("NO_PROXY", "other.org"),
            ("no_proxy", "example.com"),
        ]);
        assert!(for_url(&upper_no_proxy_wins, https).is_some());

        // CGI: HTTP_PROXY may come from a request's header.
        let cgi = env(&[
            ("HTTP_PROXY", "http://h:1"),
            ("HTTPS_PROXY", "http://s:1"),
            ("REQUEST_METHOD", "GET"),
        ]);
        assert_eq!(for_url(&cgi, http), None);
        assert_eq!(for_url(&cgi, https).as_deref(), Some("http://s:1/"));
        assert!(!env(&[("HTTP_PROXY", "http://h:1"), ("REQUEST_METHOD", "GET")]).any());
        assert!(!env(&[]).any());
    }

    #[test]
    fn a_proxy_without_a_scheme_is_http() {
        for (value, expected) in [
            ("proxy.corp:3128", "http://proxy.corp:3128/"),
            ("127.0.0.1:3128", "http://127.0.0.1:3128/"),
            ("proxy.corp", "http://proxy.corp/"),
            (
                "user:secret@proxy.corp:3128",
                "http://user:secret@proxy.corp:3128/",
            ),
            ("https://proxy.corp:3128", "https://proxy.corp:3128/"),
            ("socks5://proxy.corp:1080", "socks5://proxy.corp:1080"),
        ] {
            assert_eq!(
                proxy_url(value).map(|url| url.to_string()).as_deref(),
                Some(expected),
                "{value}"
            );
        }
    }

    #[test]
    fn reqwest_gets_socks5_with_remote_names() {
        let url = |s: &str| Url::parse(s).unwrap();
        assert_eq!(
            for_reqwest(&url("socks5://p.corp:1080")),
            "socks5h://p.corp:1080"
        );
        assert_eq!(
            for_reqwest(&url("http://p.corp:3128")),
            "http://p.corp:3128/"
        );
    }

    #[test]
    fn host_and_port_split_as_go_splits_them() {
        assert_eq!(split_host_port("a.com:80"), Some(("a.com", "80")));
        assert_eq!(split_host_port("a.com:"), Some(("a.com", "")));
        assert_eq!(split_host_port("[::1]:80"), Some(("::1", "80")));
        assert_eq!(split_host_port("a.com"), None);
        assert_eq!(split_host_port("::1"), None);
        assert_eq!(split_host_port("[::1]"), None);
        assert_eq!(split_host_port("[::1]x:80"), None);
        assert_eq!(split_host_port("a[b]:80"), None);
    }
}
