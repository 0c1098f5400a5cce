//! JSON documents read the way Terraform reads them.
//!
//! Terraform decodes every registry, mirror and discovery document with Go's
//! `encoding/json`, and registries are written against that decoder, not
//! against the JSON specification: a Go server encodes an empty list as
//! `null`, servers in other languages capitalise keys or add keys of their
//! own. A registry that Terraform accepts must never be refused here, so Go's
//! rules apply to every document type through this one serde
//! [`Deserializer`], never field by field:
//!
//! - a key that is absent or `null` leaves its field at the zero value (an
//!   empty string or list, `None`, `false`, `0`): every field is optional;
//! - keys that name no field are ignored;
//! - a key matches the field of that name, or failing that the first field
//!   whose name is equal under case folding (`Versions` fills `versions`);
//! - when an object holds one field twice, the later value wins; objects
//!   decoded into one struct merge, and a later `null` leaves a string, a
//!   number or a boolean as it was;
//! - only the first JSON value of a body is read, and invalid UTF-8 becomes
//!   U+FFFD instead of an error.
//!
//! Map keys (a mirror's version numbers, discovery's service names) are data,
//! not field names, and match exactly, as in Go.
//!
//! No crate does this: serde's derive offers `default` and aliases per field,
//! and serde_json neither folds case nor keeps duplicate keys in order.

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Unexpected,
    Visitor,
};

/// Why a document could not be read; says where in the document when the
/// JSON was well-formed but did not fit (`versions[0].version: …`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(String);

/// `bytes` as Go's `json.NewDecoder(body).Decode(&doc)` reads them into `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let text = String::from_utf8_lossy(bytes);
    let root = match serde_json::Deserializer::from_str(&text)
        .into_iter::<Json>()
        .next()
    {
        Some(Ok(root)) => root,
        Some(Err(err)) => return Err(DecodeError(err.to_string())),
        None => return Err(DecodeError("the document is empty".to_owned())),
    };
    serde_path_to_error::deserialize(Values::one(&root)).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        DecodeError(if path == "." {
            inner.0
        } else {
            format!("{path}: {}", inner.0)
        })
    })
}

/// A parsed document that, unlike `serde_json::Value`, keeps an object's
/// keys in document order and keeps repeated keys, both of which decide
/// what Go's decoder makes of them.
#[derive(Debug)]
enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

static NULL: Json = Json::Null;

impl Json {
    fn unexpected(&self) -> Unexpected<'_> {
        match self {
            Json::Null => Unexpected::Other("null"),
            Json::Bool(b) => Unexpected::Bool(*b),
            Json::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => Unexpected::Unsigned(u),
                (None, Some(i)) => Unexpected::Signed(i),
                _ => Unexpected::Float(n.as_f64().unwrap_or_default()),
            },
            Json::String(s) => Unexpected::Str(s),
            Json::Array(_) => Unexpected::Seq,
            Json::Object(_) => Unexpected::Map,
        }
    }
}

impl<'de> de::Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Json, E> {
        Ok(serde_json::Number::from_f64(n).map_or(Json::Null, Json::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Json, E> {
        Ok(Json::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry::<String, Json>()? {
            entries.push(entry);
        }
        Ok(Json::Object(entries))
    }
}

#[derive(Debug)]
struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Every value one field was given, in document order (one value for the
/// root and for list elements). Which of them count depends on the type the
/// field asks for, exactly as Go decodes each in turn into the same field.
struct Values<'de>(Vec<&'de Json>);

impl<'de> Values<'de> {
    fn one(value: &'de Json) -> Self {
        Values(vec![value])
    }

    /// What a list, map value, pointer or `any` ends up as: the last value,
    /// `null` included (Go sets those to nil).
    fn last(&self) -> &'de Json {
        self.0.last().copied().unwrap_or(&NULL)
    }

    /// What a string, number or boolean ends up as: `null` leaves them
    /// untouched in Go, so the last value that is not `null`.
    fn last_set(&self) -> Option<&'de Json> {
        self.0
            .iter()
            .rev()
            .find(|value| !matches!(value, Json::Null))
            .copied()
    }

    /// The entries of every object given, in order; `None` once a value is
    /// not an object (`reset_on_null`: a map is set to nil by `null`, a
    /// struct is left as it was).
    fn object_entries(&self, reset_on_null: bool) -> Result<Vec<(&'de str, &'de Json)>, &'de Json> {
        let mut entries = Vec::new();
        for value in &self.0 {
            match value {
                Json::Object(object) => {
                    entries.extend(object.iter().map(|(k, v)| (k.as_str(), v)));
                }
                Json::Null if reset_on_null => entries.clear(),
                Json::Null => {}
                other => return Err(other),
            }
        }
        Ok(entries)
    }

    fn visit_number<V: Visitor<'de>>(&self, visitor: V) -> Result<V::Value, Error> {
        match self.last_set() {
            None => visitor.visit_u64(0),
            Some(Json::Number(n)) => visit_number(n, visitor),
            Some(other) => Err(de::Error::invalid_type(other.unexpected(), &visitor)),
        }
    }
}

fn visit_number<'de, V: Visitor<'de>>(
    n: &serde_json::Number,
    visitor: V,
) -> Result<V::Value, Error> {
    match (n.as_u64(), n.as_i64()) {
        (Some(u), _) => visitor.visit_u64(u),
        (None, Some(i)) => visitor.visit_i64(i),
        _ => visitor.visit_f64(n.as_f64().unwrap_or_default()),
    }
}

/// Go's `strings.EqualFold`, which matches under simple Unicode case
/// folding: `K` (Kelvin sign) is `k`, `ſ` is `s`.
fn fold_eq(a: &str, b: &str) -> bool {
    a.chars().count() == b.chars().count()
        && a.chars().zip(b.chars()).all(|(x, y)| {
            x == y || x.to_lowercase().eq(y.to_lowercase()) || x.to_uppercase().eq(y.to_uppercase())
        })
}

/// The struct field a key fills, as Go's decoder picks it: the field of
/// exactly that name, else the first whose name folds to the same.
fn field_for(key: &str, fields: &[&str]) -> Option<usize> {
    fields
        .iter()
        .position(|field| *field == key)
        .or_else(|| fields.iter().position(|field| fold_eq(field, key)))
}

impl<'de> Deserializer<'de> for Values<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.last() {
            Json::Null => visitor.visit_unit(),
            Json::Bool(b) => visitor.visit_bool(*b),
            Json::Number(n) => visit_number(n, visitor),
            Json::String(s) => visitor.visit_borrowed_str(s),
            Json::Array(items) => visitor.visit_seq(Items(items.iter())),
            Json::Object(entries) => visitor.visit_map(Entries::new(
                entries
                    .iter()
                    .map(|(k, v)| (k.as_str(), Values::one(v)))
                    .collect(),
            )),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.last() {
            Json::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.last_set() {
            None => visitor.visit_bool(false),
            Some(Json::Bool(b)) => visitor.visit_bool(*b),
            Some(other) => Err(de::Error::invalid_type(other.unexpected(), &visitor)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.last_set() {
            None => visitor.visit_borrowed_str(""),
            Some(Json::String(s)) => visitor.visit_borrowed_str(s),
            Some(other) => Err(de::Error::invalid_type(other.unexpected(), &visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.last() {
            Json::Null => visitor.visit_seq(Items([].iter())),
            Json::Array(items) => visitor.visit_seq(Items(items.iter())),
            other => Err(de::Error::invalid_type(other.unexpected(), &visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.object_entries(true) {
            Ok(entries) => visitor.visit_map(Entries::new(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, Values::one(v)))
                    .collect(),
            )),
            Err(other) => Err(de::Error::invalid_type(other.unexpected(), &visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let entries = self
            .object_entries(false)
            .map_err(|other| de::Error::invalid_type(other.unexpected(), &visitor))?;
        let mut values: Vec<Values> = fields.iter().map(|_| Values(Vec::new())).collect();
        for (key, value) in entries {
            if let Some(index) = field_for(key, fields) {
                values[index].0.push(value);
            }
        }
        visitor.visit_map(Entries::new(fields.iter().copied().zip(values).collect()))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.visit_number(visitor)
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit unit_struct tuple_struct enum identifier
    }
}

struct Items<'de>(std::slice::Iter<'de, Json>);

impl<'de> SeqAccess<'de> for Items<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|item| seed.deserialize(Values::one(item)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// Keys with the values that go with them, for maps and structs alike.
struct Entries<'de> {
    entries: std::vec::IntoIter<(&'de str, Values<'de>)>,
    value: Option<Values<'de>>,
}

impl<'de> Entries<'de> {
    fn new(entries: Vec<(&'de str, Values<'de>)>) -> Self {
        Entries {
            entries: entries.into_iter(),
            value: None,
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some(value);
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let value = self
            .value
            .take()
            .ok_or_else(|| Error("a value was asked for before its key".to_owned()))?;
        seed.deserialize(value)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Doc {
        versions: Vec<Entry>,
        warnings: Vec<String>,
        name: String,
        count: u32,
        flag: bool,
        maybe: Option<String>,
        nested: Nested,
        by_key: BTreeMap<String, Nested>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Entry {
        version: String,
        protocols: Vec<String>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Nested {
        a: String,
        b: String,
    }

    fn doc(json: &str) -> Doc {
        from_slice(json.as_bytes()).unwrap_or_else(|err| panic!("{json}: {err}"))
    }

    #[test]
    fn null_and_absent_are_the_zero_value() {
        let expected = Doc::default();
        assert_eq!(doc("{}"), expected);
        assert_eq!(doc("null"), expected);
        assert_eq!(
            doc(
                r#"{"versions": null, "warnings": null, "name": null, "count": null,
                    "flag": null, "maybe": null, "nested": null, "by_key": null}"#
            ),
            expected
        );
        assert_eq!(
            doc(r#"{"versions": [null, {"version": "1.0.0", "protocols": null}]}"#).versions,
            [
                Entry::default(),
                Entry {
                    version: "1.0.0".into(),
                    protocols: vec![]
                }
            ]
        );
    }

    #[test]
    fn unknown_keys_are_ignored_and_keys_fold_case() {
        let got = doc(
            r#"{"Versions": [{"VERSION": "1.0.0", "Protocols": ["5.0"], "extra": {"x": [1]}}],
                          "meta": null, "NAME": "n", "Count": 3, "fLaG": true}"#,
        );
        assert_eq!(got.versions[0].version, "1.0.0");
        assert_eq!(got.versions[0].protocols, ["5.0"]);
        assert_eq!((got.name.as_str(), got.count, got.flag), ("n", 3, true));
    }

    #[test]
    fn an_exact_key_beats_a_folded_one_and_the_later_value_wins() {
        assert_eq!(doc(r#"{"name": "exact", "NAME": "folded"}"#).name, "folded");
        assert_eq!(doc(r#"{"NAME": "folded", "name": "exact"}"#).name, "exact");
        // `null` leaves a string as it was but empties a list.
        assert_eq!(doc(r#"{"name": "kept", "name": null}"#).name, "kept");
        assert_eq!(
            doc(r#"{"warnings": ["w"], "warnings": null}"#).warnings,
            Vec::<String>::new()
        );
        // Objects decoded into one struct merge; a map is reset by null.
        assert_eq!(
            doc(r#"{"nested": {"a": "1"}, "nested": {"b": "2"}}"#).nested,
            Nested {
                a: "1".into(),
                b: "2".into()
            }
        );
        let got = doc(r#"{"by_key": {"x": {}}, "by_key": null, "by_key": {"y": {"A": "1"}}}"#);
        assert_eq!(got.by_key.keys().collect::<Vec<_>>(), ["y"]);
        assert_eq!(got.by_key["y"].a, "1");
    }

    #[test]
    fn map_keys_are_data_and_match_exactly() {
        let got = doc(r#"{"by_key": {"X": {}, "x": {"a": "lower"}}}"#);
        assert_eq!(got.by_key.len(), 2);
        assert_eq!(got.by_key["x"].a, "lower");
    }

    #[test]
    fn case_folding_is_unicode_aware_like_go() {
        assert!(fold_eq("versions", "VERSIONS"));
        assert!(fold_eq("k", "\u{212a}"));
        assert!(fold_eq("s", "\u{17f}"));
        assert!(!fold_eq("version", "versions"));
        assert_eq!(field_for("KEY_ID", &["key_id", "KEY_ID"]), Some(1));
        assert_eq!(field_for("Key_Id", &["key_id", "KEY_ID"]), Some(0));
    }

    #[test]
    fn only_the_first_value_is_read_and_bad_utf8_is_replaced() {
        assert_eq!(
            doc(r#"{"name": "first"} {"name": "second"} trailing"#).name,
            "first"
        );
        let got: Doc = from_slice(b"{\"name\": \"a\xffb\"}").unwrap();
        assert_eq!(got.name, "a\u{fffd}b");
    }

    #[test]
    fn errors_say_where_and_what() {
        let err = from_slice::<Doc>(br#"{"versions": [{"version": 1}]}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "versions[0].version: invalid type: integer `1`, expected a string"
        );
        let err = from_slice::<Doc>(br#"{"warnings": "none"}"#).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("warnings: invalid type: string"),
            "{err}"
        );
        let err = from_slice::<Doc>(b"<html>").unwrap_err();
        assert!(
            err.to_string()
                .contains("expected value at line 1 column 1"),
            "{err}"
        );
        assert_eq!(
            from_slice::<Doc>(b"  ").unwrap_err().to_string(),
            "the document is empty"
        );
    }

    #[test]
    fn untyped_values_take_any_shape() {
        #[derive(Deserialize)]
        struct Loose {
            platforms: serde_json::Value,
        }
        let got: Loose =
            from_slice(br#"{"Platforms": [{"os": "linux"}, "darwin_arm64"]}"#).unwrap();
        assert_eq!(got.platforms[1], "darwin_arm64");
        let got: Loose = from_slice(b"{}").unwrap();
        assert!(got.platforms.is_null());
    }
}
