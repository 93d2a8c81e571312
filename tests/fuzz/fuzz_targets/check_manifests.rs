//! The `manifests` target's body, shared with the CI smoke run: any text given to `hookgate
//! standalone -f` is loaded and compiled or refused, never a panic; a refusal names the file; and
//! a Secret's value never shows in it (manifest errors go to the terminal and the logs).

use hookgate::manifest::Manifests;
use serde::Deserialize;
use serde_yaml::Value;

/// The name the text is loaded under; every refusal must carry it.
pub const FILE: &str = "fuzz.yaml";

/// Values a smoke input puts into Secrets; none may show in a refusal unless it also stands
/// outside a Secret's values, where showing it is the point of the message.
pub const SECRET_MARKS: [&str; 2] = ["sekritvalue", "7391462055"];

pub fn load(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut m = Manifests::default();
    let Err(error) = m
        .add_text(FILE, &text)
        .and_then(|()| m.route_table().map(drop))
    else {
        return;
    };
    let shown = error.to_string();
    assert!(shown.contains(FILE), "a refusal without the file: {shown}");
    for mark in SECRET_MARKS {
        if shown.contains(mark) && only_in_secret_values(&text, mark) {
            panic!("a Secret's value shows in a refusal: {shown}");
        }
    }
}

/// Whether `mark` is in `text` only inside Secrets' `data` and `stringData` values. `false` when
/// any document is not YAML (or cannot be written back): nothing then tells a value from the rest.
fn only_in_secret_values(text: &str, mark: &str) -> bool {
    let mut rest = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let Ok(mut value) = Value::deserialize(doc) else {
            return false;
        };
        if value.get("kind").and_then(Value::as_str) == Some("Secret") {
            for field in ["data", "stringData"] {
                if let Some(Value::Mapping(values)) = value.get_mut(field) {
                    values.values_mut().for_each(|v| *v = Value::Null);
                } else if let Some(v) = value.get_mut(field) {
                    *v = Value::Null;
                }
            }
        }
        match serde_yaml::to_string(&value) {
            Ok(shown) => rest.push(shown),
            Err(_) => return false,
        }
    }
    text.contains(mark) && !rest.iter().any(|r| r.contains(mark))
}
