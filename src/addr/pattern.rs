//! Patterns over provider addresses: the `include`/`exclude` patterns of
//! `provider_installation` methods, which decide which installation method
//! may supply which providers, and the grammar the provider policy and
//! `serve -allow` name providers with. Only addresses are needed to match
//! them, so they sit with the addresses, below everything that uses them.

use crate::addr::{
    AddrError, Hostname, ProviderAddr, parse_provider_namespace, parse_provider_part,
};
use crate::go_quote::go_quote;

const WILDCARD: &str = "*";

/// One matching pattern: `ns/type` (on the default registry) or
/// `host/ns/type`, each segment either normalized or a wildcard (`None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderPattern {
    hostname: Option<Hostname>,
    namespace: Option<String>,
    type_name: Option<String>,
}

impl ProviderPattern {
    pub fn parse(given: &str) -> Result<Self, AddrError> {
        let parts: Vec<&str> = given.split('/').collect();
        let (hostname, namespace, type_name) = match parts[..] {
            [namespace, type_name] => (Some(Hostname::default_registry()), namespace, type_name),
            [host, namespace, type_name] => {
                let hostname = if host == WILDCARD {
                    None
                } else {
                    Some(Hostname::parse(host).map_err(|err| {
                        AddrError::message(format!(
                            "invalid hostname in provider matching pattern {}: {err}",
                            go_quote(given)
                        ))
                    })?)
                };
                (hostname, namespace, type_name)
            }
            _ => {
                return Err(AddrError::message(format!(
                    "invalid provider matching pattern {}: must have either two or three slash-separated segments",
                    go_quote(given)
                )));
            }
        };

        // Terraform checks the type before the namespace.
        let type_name = wildcard_or(type_name, parse_provider_part).map_err(|_| {
            AddrError::message(format!(
                "invalid provider type {} in provider matching pattern {}: must either be the wildcard * or a provider type name",
                go_quote(type_name),
                go_quote(given)
            ))
        })?;
        // Terraform quotes the type segment in this message, not the
        // namespace; kept so the text matches.
        let namespace = wildcard_or(namespace, parse_provider_namespace).map_err(|_| {
            AddrError::message(format!(
                "invalid registry namespace {} in provider matching pattern {}: must either be the wildcard * or a literal namespace",
                go_quote(parts[parts.len() - 1]),
                go_quote(given)
            ))
        })?;

        if hostname.is_none() && (namespace.is_some() || type_name.is_some()) {
            return Err(AddrError::message(format!(
                "invalid provider matching pattern {}: hostname can be a wildcard only if both namespace and provider type are also wildcards",
                go_quote(given)
            )));
        }
        if namespace.is_none() && type_name.is_some() {
            return Err(AddrError::message(format!(
                "invalid provider matching pattern {}: namespace can be a wildcard only if the provider type is also a wildcard",
                go_quote(given)
            )));
        }
        Ok(ProviderPattern {
            hostname,
            namespace,
            type_name,
        })
    }

    /// The hostname the pattern pins, `None` for a wildcard.
    pub fn hostname(&self) -> Option<&Hostname> {
        self.hostname.as_ref()
    }

    /// The namespace the pattern pins, `None` for a wildcard.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The type the pattern pins, `None` for a wildcard.
    pub fn type_name(&self) -> Option<&str> {
        self.type_name.as_deref()
    }

    pub fn matches(&self, addr: &ProviderAddr) -> bool {
        self.hostname.as_ref().is_none_or(|h| *h == addr.hostname)
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == addr.namespace)
            && self
                .type_name
                .as_ref()
                .is_none_or(|ty| *ty == addr.type_name)
    }
}

/// The exact pattern for one provider, as the implicit installation config
/// uses to keep providers found in local directories away from the registry.
impl From<&ProviderAddr> for ProviderPattern {
    fn from(addr: &ProviderAddr) -> Self {
        ProviderPattern {
            hostname: Some(addr.hostname.clone()),
            namespace: Some(addr.namespace.clone()),
            type_name: Some(addr.type_name.clone()),
        }
    }
}

fn wildcard_or(
    segment: &str,
    normalize: fn(&str) -> Result<String, AddrError>,
) -> Result<Option<String>, AddrError> {
    if segment == WILDCARD {
        Ok(None)
    } else {
        normalize(segment).map(Some)
    }
}

/// The include/exclude lists of one installation method.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderSelector {
    pub include: Vec<ProviderPattern>,
    pub exclude: Vec<ProviderPattern>,
}

impl ProviderSelector {
    /// Parses both lists. The error already carries the summary and detail
    /// Terraform shows for the list at fault.
    pub fn parse(include: &[String], exclude: &[String]) -> Result<Self, AddrError> {
        let include = parse_patterns(include).map_err(|err| {
            AddrError::diagnostic(
                "Invalid provider source inclusion patterns",
                format!("CLI config specifies invalid provider inclusion patterns: {err}."),
            )
        })?;
        let exclude = parse_patterns(exclude).map_err(|err| {
            AddrError::diagnostic(
                "Invalid provider source exclusion patterns",
                format!("CLI config specifies invalid provider exclusion patterns: {err}."),
            )
        })?;
        Ok(ProviderSelector { include, exclude })
    }

    /// Exclusion wins; an empty include list includes everything.
    pub fn handles(&self, addr: &ProviderAddr) -> bool {
        if self.exclude.iter().any(|p| p.matches(addr)) {
            return false;
        }
        self.include.is_empty() || self.include.iter().any(|p| p.matches(addr))
    }
}

fn parse_patterns(patterns: &[String]) -> Result<Vec<ProviderPattern>, AddrError> {
    patterns.iter().map(|p| ProviderPattern::parse(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(include: &[&str], exclude: &[&str]) -> ProviderSelector {
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        ProviderSelector::parse(&owned(include), &owned(exclude)).unwrap()
    }

    struct SelectorCase<'a> {
        name: &'a str,
        include: &'a [&'a str],
        exclude: &'a [&'a str],
        provider: &'a ProviderAddr,
        want: bool,
    }

    /// multi_source_test.go TestMultiSourceSelector
    #[test]
    fn multi_source_selector_vectors() {
        let foo = ProviderAddr::new(Hostname::default_registry(), "hashicorp", "foo");
        let builtin_bar = ProviderAddr::parse("terraform.io/builtin/bar").unwrap();
        let cases = [
            SelectorCase {
                name: "default provider with no constraints",
                include: &[],
                exclude: &[],
                provider: &foo,
                want: true,
            },
            SelectorCase {
                name: "built-in provider with no constraints",
                include: &[],
                exclude: &[],
                provider: &builtin_bar,
                want: true,
            },
            SelectorCase {
                name: "default provider with include constraint that matches it exactly",
                include: &["hashicorp/foo"],
                exclude: &[],
                provider: &foo,
                want: true,
            },
            SelectorCase {
                name: "default provider with include constraint that matches it via type wildcard",
                include: &["hashicorp/*"],
                exclude: &[],
                provider: &foo,
                want: true,
            },
            SelectorCase {
                name: "default provider with include constraint that matches it via namespace wildcard",
                include: &["*/*"],
                exclude: &[],
                provider: &foo,
                want: true,
            },
            SelectorCase {
                name: "default provider with non-normalized include constraint that matches it via type wildcard",
                include: &["HashiCorp/*"],
                exclude: &[],
                provider: &foo,
                want: true,
            },
            SelectorCase {
                name: "built-in provider with exact include constraint that does not match it",
                include: &["hashicorp/foo"],
                exclude: &[],
                provider: &builtin_bar,
                want: false,
            },
            SelectorCase {
                name: "built-in provider with type-wild include constraint that does not match it",
                include: &["hashicorp/*"],
                exclude: &[],
                provider: &builtin_bar,
                want: false,
            },
            SelectorCase {
                name: "built-in provider with namespace-wild include constraint that does not match it",
                include: &["*/*"],
                exclude: &[],
                provider: &builtin_bar,
                want: false,
            },
            SelectorCase {
                name: "built-in provider with include constraint that matches it via type wildcard",
                include: &["terraform.io/builtin/*"],
                exclude: &[],
                provider: &builtin_bar,
                want: true,
            },
            SelectorCase {
                name: "default provider with exclude constraint that matches it exactly",
                include: &[],
                exclude: &["hashicorp/foo"],
                provider: &foo,
                want: false,
            },
            SelectorCase {
                name: "default provider with exclude constraint that matches it via type wildcard",
                include: &[],
                exclude: &["hashicorp/*"],
                provider: &foo,
                want: false,
            },
            SelectorCase {
                name: "default provider with exact exclude constraint that doesn't match it",
                include: &[],
                exclude: &["hashicorp/bar"],
                provider: &foo,
                want: true,
            },
            SelectorCase {
                name: "default provider with non-normalized exclude constraint that matches it via type wildcard",
                include: &[],
                exclude: &["HashiCorp/*"],
                provider: &foo,
                want: false,
            },
            SelectorCase {
                name: "default provider with exclude wildcard overriding include exact",
                include: &["hashicorp/foo"],
                exclude: &["hashicorp/*"],
                provider: &foo,
                want: false,
            },
            SelectorCase {
                name: "default provider with exclude wildcard overriding irrelevant include exact",
                include: &["hashicorp/bar"],
                exclude: &["hashicorp/*"],
                provider: &foo,
                want: false,
            },
            SelectorCase {
                name: "default provider with exclude exact overriding include wildcard",
                include: &["hashicorp/*"],
                exclude: &["hashicorp/foo"],
                provider: &foo,
                want: false,
            },
            SelectorCase {
                name: "default provider with irrelevant exclude exact overriding include wildcard",
                include: &["hashicorp/*"],
                exclude: &["hashicorp/bar"],
                provider: &foo,
                want: true,
            },
        ];
        for case in cases {
            assert_eq!(
                selector(case.include, case.exclude).handles(case.provider),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn patterns_normalize_each_segment() {
        let addr = ProviderAddr::parse("café.fr:8443/my_org/thing").unwrap();
        for pattern in [
            "*/*/*",
            "Café.FR:8443/*/*",
            "café.fr:8443/My_Org/*",
            "café.fr:8443/my_org/THING",
        ] {
            assert!(
                ProviderPattern::parse(pattern).unwrap().matches(&addr),
                "{pattern}"
            );
        }
        for pattern in ["*/*", "café.fr/*/*", "café.fr:8443/other/*"] {
            assert!(
                !ProviderPattern::parse(pattern).unwrap().matches(&addr),
                "{pattern}"
            );
        }
        assert!(
            ProviderPattern::parse("example.com:443/a/b")
                .unwrap()
                .matches(&ProviderAddr::parse("example.com/a/b").unwrap())
        );
    }

    #[test]
    fn exact_pattern_from_address() {
        let addr = ProviderAddr::parse("hashicorp/aws").unwrap();
        let pattern = ProviderPattern::from(&addr);
        assert!(pattern.matches(&addr));
        assert!(!pattern.matches(&ProviderAddr::parse("hashicorp/awscc").unwrap()));
    }

    #[test]
    fn pattern_error_texts() {
        let err = |p: &str| ProviderPattern::parse(p).unwrap_err().to_string();
        assert_eq!(
            err("aws"),
            "invalid provider matching pattern \"aws\": must have either two or three slash-separated segments"
        );
        assert_eq!(
            err("a/b/c/d"),
            "invalid provider matching pattern \"a/b/c/d\": must have either two or three slash-separated segments"
        );
        assert_eq!(
            err("example..com/a/b"),
            "invalid hostname in provider matching pattern \"example..com/a/b\": hostname contains empty label (two consecutive periods)"
        );
        assert_eq!(
            err("hashicorp/bad_type"),
            "invalid provider type \"bad_type\" in provider matching pattern \"hashicorp/bad_type\": must either be the wildcard * or a provider type name"
        );
        assert_eq!(
            err("bad!/aws"),
            "invalid registry namespace \"aws\" in provider matching pattern \"bad!/aws\": must either be the wildcard * or a literal namespace"
        );
        assert_eq!(
            err("*/a/*"),
            "invalid provider matching pattern \"*/a/*\": hostname can be a wildcard only if both namespace and provider type are also wildcards"
        );
        assert_eq!(
            err("*/*/b"),
            "invalid provider matching pattern \"*/*/b\": hostname can be a wildcard only if both namespace and provider type are also wildcards"
        );
        assert_eq!(
            err("*/aws"),
            "invalid provider matching pattern \"*/aws\": namespace can be a wildcard only if the provider type is also a wildcard"
        );
        assert_eq!(
            err("example.com/*/aws"),
            "invalid provider matching pattern \"example.com/*/aws\": namespace can be a wildcard only if the provider type is also a wildcard"
        );
    }

    #[test]
    fn selector_errors_name_the_list() {
        let include = ProviderSelector::parse(&["aws".to_string()], &[]).unwrap_err();
        assert_eq!(
            include.summary(),
            Some("Invalid provider source inclusion patterns")
        );
        assert_eq!(
            include.detail(),
            "CLI config specifies invalid provider inclusion patterns: invalid provider matching pattern \"aws\": must have either two or three slash-separated segments."
        );
        let exclude = ProviderSelector::parse(&[], &["*/x".to_string()]).unwrap_err();
        assert_eq!(
            exclude.summary(),
            Some("Invalid provider source exclusion patterns")
        );
        assert_eq!(
            exclude.detail(),
            "CLI config specifies invalid provider exclusion patterns: invalid provider matching pattern \"*/x\": namespace can be a wildcard only if the provider type is also a wildcard."
        );
    }
}
