//! Reading `-json` output as a machine would: one JSON object per line, each
//! checked against the published schema (`docs/json-output.schema.json`).

use std::path::Path;

use serde_json::Value;

pub fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json-output.schema.json"),
    )
    .unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::draft202012::new(&schema).expect("the published schema is valid")
}

/// Every stdout line parsed and checked against the schema.
pub fn validated_stream(stdout: &[u8]) -> Vec<Value> {
    let validator = schema();
    let text = String::from_utf8(stdout.to_vec()).unwrap();
    assert!(text.ends_with('\n'), "stream ends with a newline: {text}");
    text.lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("not a JSON line ({err}): {line}"));
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| format!("{e} at {}", e.instance_path()))
                .collect();
            assert!(
                errors.is_empty(),
                "{line}\n violates the schema: {errors:#?}"
            );
            value
        })
        .collect()
}
