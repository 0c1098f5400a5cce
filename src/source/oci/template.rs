//! `oci_mirror`'s `repository_template`: which OCI repository holds a
//! provider. OpenTofu evaluates it as an HCL template with three symbols;
//! only plain `${symbol}` interpolations make sense for a repository name,
//! so that is the syntax read here.

use std::fmt;

use crate::addr::ProviderAddr;
use crate::addr::pattern::ProviderPattern;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepositoryTemplate {
    pieces: Vec<Piece>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Symbol {
    Hostname,
    Namespace,
    Type,
}

impl Symbol {
    fn name(self) -> &'static str {
        match self {
            Symbol::Hostname => "hostname",
            Symbol::Namespace => "namespace",
            Symbol::Type => "type",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Symbol(Symbol),
}

impl RepositoryTemplate {
    /// Reads the template and checks it against the method's `include`
    /// patterns: a part of the provider address that the patterns do not pin
    /// to one value must be interpolated, or two providers would share one
    /// repository. The error is OpenTofu's wording, without the position,
    /// which the caller adds.
    pub fn parse(raw: &str, include: &[ProviderPattern]) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut rest = raw;
        while let Some(start) = rest.find("${") {
            if start > 0 {
                pieces.push(Piece::Literal(rest[..start].to_string()));
            }
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| "the template has a \"${\" without its closing \"}\"".to_string())?;
            let symbol = match after[..end].trim() {
                "hostname" => Symbol::Hostname,
                "namespace" => Symbol::Namespace,
                "type" => Symbol::Type,
                other => {
                    return Err(format!(
                        "the symbol {other:?} is not available for an OCI mirror repository address template. Only \"hostname\", \"namespace\", and \"type\" are available"
                    ));
                }
            };
            pieces.push(Piece::Symbol(symbol));
            rest = &after[end + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Literal(rest.to_string()));
        }
        let template = RepositoryTemplate { pieces };
        let pinned = |part: fn(&ProviderPattern) -> Option<String>| {
            let mut values: Vec<Option<String>> = include.iter().map(part).collect();
            values.dedup();
            matches!(values.as_slice(), [Some(_)])
        };
        let checks = [
            (
                Symbol::Hostname,
                pinned(|p| p.hostname().map(|h| h.as_ascii().to_string())),
                "selects exactly one registry hostname",
            ),
            (
                Symbol::Namespace,
                pinned(|p| p.namespace().map(str::to_string)),
                "selects exactly one provider namespace",
            ),
            (
                Symbol::Type,
                pinned(|p| p.type_name().map(str::to_string)),
                "selects exactly one provider",
            ),
        ];
        for (symbol, is_pinned, what) in checks {
            if !is_pinned && !template.pieces.contains(&Piece::Symbol(symbol)) {
                return Err(format!(
                    "template must refer to the {:?} symbol unless the \"include\" argument {what}",
                    symbol.name()
                ));
            }
        }
        // A template that makes no valid address for a typical provider makes
        // none for any: say so now rather than at the first install.
        let example = ProviderAddr::new(
            crate::addr::Hostname::default_registry(),
            "example",
            "example",
        );
        template.repository(&example)?;
        Ok(template)
    }

    /// The repository for `provider`.
    pub fn repository(&self, provider: &ProviderAddr) -> Result<RepositoryAddr, String> {
        let text: String = self
            .pieces
            .iter()
            .map(|piece| match piece {
                Piece::Literal(text) => text.as_str(),
                Piece::Symbol(Symbol::Hostname) => provider.hostname.as_ascii(),
                Piece::Symbol(Symbol::Namespace) => &provider.namespace,
                Piece::Symbol(Symbol::Type) => &provider.type_name,
            })
            .collect();
        RepositoryAddr::parse(&text).map_err(|err| {
            format!(
                "template must generate a valid OCI repository address, including a registry hostname followed by a slash and then a repository name ({text:?} for {provider}: {err})"
            )
        })
    }
}

/// A repository in a registry: `registry.example.com[:port]/some/name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RepositoryAddr {
    /// `host[:port]`, lower case.
    pub registry: String,
    pub name: String,
}

impl RepositoryAddr {
    /// The OCI Distribution grammar: the registry, then path components of
    /// lower-case letters and digits joined by `.`, `_`, `__` or dashes.
    pub fn parse(given: &str) -> Result<RepositoryAddr, String> {
        let (registry, name) = given
            .split_once('/')
            .ok_or("there is no slash between the registry and the repository name")?;
        let (host, port) = match registry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        };
        let host_ok = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        if !host_ok {
            return Err(format!("{registry:?} is not a registry hostname"));
        }
        if port.is_some_and(|p| p.parse::<u16>().is_err()) {
            return Err(format!("{registry:?} has an invalid port number"));
        }
        if let Some(component) = name.split('/').find(|c| !valid_component(c)) {
            return Err(format!(
                "{component:?} is not a valid repository name component (lower-case letters and digits, separated by \".\", \"_\", \"__\" or \"-\")"
            ));
        }
        Ok(RepositoryAddr {
            registry: registry.to_ascii_lowercase(),
            name: name.to_string(),
        })
    }
}

impl fmt::Display for RepositoryAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.name)
    }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn valid_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        let dashes = separator.bytes().all(|b| b == b'-');
        if !(matches!(separator, "." | "_" | "__") || dashes) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(list: &[&str]) -> Vec<ProviderPattern> {
        list.iter()
            .map(|p| ProviderPattern::parse(p).unwrap())
            .collect()
    }

    #[test]
    fn symbols_are_interpolated() {
        let template = RepositoryTemplate::parse(
            "reg.example:5000/mirror/${hostname}/${ namespace }/${type}",
            &[],
        )
        .unwrap();
        let repo = template
            .repository(&ProviderAddr::parse("hashicorp/null").unwrap())
            .unwrap();
        assert_eq!(repo.registry, "reg.example:5000");
        assert_eq!(repo.name, "mirror/registry.terraform.io/hashicorp/null");
    }

    #[test]
    fn parts_not_pinned_by_include_must_be_interpolated() {
        let err = RepositoryTemplate::parse("r.example/p/${type}", &patterns(&[])).unwrap_err();
        assert!(err.contains("\"hostname\""), "{err}");
        let err = RepositoryTemplate::parse(
            "r.example/p/${type}",
            &patterns(&["registry.opentofu.org/*/*"]),
        )
        .unwrap_err();
        assert!(err.contains("\"namespace\""), "{err}");
        RepositoryTemplate::parse(
            "r.example/p/${type}",
            &patterns(&["registry.opentofu.org/hashicorp/*"]),
        )
        .unwrap();
        RepositoryTemplate::parse("r.example/p/null", &patterns(&["hashicorp/null"])).unwrap();
        let err = RepositoryTemplate::parse(
            "r.example/p/${type}",
            &patterns(&["hashicorp/*", "other/*"]),
        )
        .unwrap_err();
        assert!(err.contains("\"namespace\""), "{err}");
    }

    #[test]
    fn unknown_symbols_and_bad_addresses_are_refused() {
        let err = RepositoryTemplate::parse("r.example/${name}", &[]).unwrap_err();
        assert!(err.contains("\"name\" is not available"), "{err}");
        let err = RepositoryTemplate::parse("${hostname}-${namespace}-${type}", &[]).unwrap_err();
        assert!(err.contains("valid OCI repository address"), "{err}");
        assert!(RepositoryAddr::parse("r.example/UPPER/x").is_err());
        assert!(RepositoryAddr::parse("r.example/a--b/c__d/e.f").is_ok());
        assert!(RepositoryAddr::parse("r.example/a___b").is_err());
    }
}
