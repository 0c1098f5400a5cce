//! Reading one argument of a CLI configuration body, with HCL 1's rules:
//! what both the top-level settings ([`super::decode`]) and the
//! `provider_installation` block ([`super::provider_installation`]) use.

use std::fmt;

use super::syntax::{Item, Pos, Value, ValueKind};

/// A value of the wrong shape, rendered the way HCL 1 positions its errors
/// ("At line:col: …") because Terraform's messages embed that text.
#[derive(Debug, PartialEq, Eq)]
pub struct ArgError {
    pub pos: Pos,
    pub message: String,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "At {}: {}", self.pos, self.message)
    }
}

pub fn body_of(value: &Value) -> Option<&[Item]> {
    match &value.kind {
        ValueKind::Object(items) => Some(items),
        _ => None,
    }
}

/// The last argument called `name`, ignoring ASCII case as HCL 1 does.
pub fn find_arg<'a>(body: &'a [Item], name: &str) -> Option<&'a Item> {
    body.iter()
        .rev()
        .find(|item| item.name.eq_ignore_ascii_case(name))
}

/// A string argument; JSON's `null` reads as the empty string, as HCL 1
/// decodes it (`"plugin_cache_dir": null` means no cache).
pub fn string_arg(item: &Item) -> Result<String, ArgError> {
    if item.value.kind == ValueKind::Null {
        return Ok(String::new());
    }
    item.value
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ArgError {
            pos: item.pos,
            message: format!("{:?} must be a string", item.name),
        })
}

pub fn string_list_arg(item: &Item) -> Result<Vec<String>, ArgError> {
    let error = || ArgError {
        pos: item.pos,
        message: format!("{:?} must be a list of strings", item.name),
    };
    match &item.value.kind {
        ValueKind::List(elements) => elements
            .iter()
            .map(|e| e.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(error),
        _ => Err(error()),
    }
}

pub fn bool_arg(item: &Item) -> Result<bool, ArgError> {
    match item.value.kind {
        ValueKind::Bool(on) => Ok(on),
        _ => Err(ArgError {
            pos: item.pos,
            message: format!("{:?} must be true or false", item.name),
        }),
    }
}
