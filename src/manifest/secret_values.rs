//! A Secret's values in manifest errors: named by key, never shown. serde's messages quote the
//! value they refused, and manifest errors go to the terminal and the logs.

use crate::crd::validate::FieldError;

/// The two fields of a Secret that hold its values.
const VALUE_FIELDS: [&str; 2] = ["data", "stringData"];

/// Refuses a Secret whose values are not strings before serde reads it, and would quote one
/// (an unquoted `12345678` is a YAML number).
pub(super) fn shape(value: &serde_yaml::Value) -> Result<(), FieldError> {
    for field in VALUE_FIELDS {
        let values = match value.get(field) {
            None | Some(serde_yaml::Value::Null) => continue,
            Some(serde_yaml::Value::Mapping(values)) => values,
            Some(_) => return Err(FieldError::new(field, "must be a map of keys to values")),
        };
        for (key, v) in values {
            let key = match key {
                serde_yaml::Value::String(k) => k.clone(),
                _ => return Err(FieldError::new(field, "every key must be a string")),
            };
            if !v.is_string() {
                return Err(FieldError::new(
                    format!("{field}.{key}"),
                    "must be a string (quote the value; it is not shown here)",
                ));
            }
        }
    }
    Ok(())
}

/// Keeps the field of an error in a Secret's values but not serde's message, which may quote
/// part of the value (the base64 decoder names the offending byte).
pub(super) fn without_values(error: FieldError) -> FieldError {
    let in_values = VALUE_FIELDS
        .iter()
        .any(|f| error.field == *f || error.field.starts_with(&format!("{f}.")));
    if !in_values {
        return error;
    }
    let message = if error.field.starts_with("data.") {
        "must be base64 (the value is not shown here)"
    } else {
        "is not a valid value (it is not shown here)"
    };
    FieldError::new(error.field, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> serde_yaml::Value {
        serde_yaml::from_str(text).expect("YAML")
    }

    #[test]
    fn string_values_and_absent_fields_pass() {
        assert_eq!(shape(&yaml("kind: Secret")), Ok(()));
        assert_eq!(shape(&yaml("data: ~\nstringData: {}")), Ok(()));
        assert_eq!(
            shape(&yaml("data: {a: czM=}\nstringData: {b: '12', c: \"true\"}")),
            Ok(())
        );
    }

    #[test]
    fn a_value_that_is_not_a_string_is_named_by_key_and_not_shown() {
        for value in [
            "48151623",
            "4815.1623",
            "true",
            "[48151623]",
            "{k: 48151623}",
            "~",
        ] {
            for field in ["data", "stringData"] {
                let e = shape(&yaml(&format!("{field}: {{token: {value}}}"))).expect_err(value);
                assert_eq!(e.field, format!("{field}.token"));
                assert!(!e.to_string().contains("4815"), "{e}");
                assert!(!e.to_string().contains("true"), "{e}");
            }
        }
    }

    #[test]
    fn values_that_are_not_a_map_are_refused_without_showing_them() {
        let e = shape(&yaml("stringData: whsec_48151623")).expect_err("a string");
        assert_eq!(e.field, "stringData");
        assert!(!e.to_string().contains("4815"), "{e}");
        let e = shape(&yaml("data: {7: czM=}")).expect_err("a number as key");
        assert_eq!(e.field, "data");
    }

    #[test]
    fn serdes_message_is_dropped_only_in_the_values() {
        let leaky = |field: &str| FieldError::new(field, "invalid symbol 33 in `s3cr!t`");
        for (field, kept) in [
            ("data.token", false),
            ("stringData.token", false),
            ("data", false),
            ("stringData", false),
            ("metadata.name", true),
            ("dataset", true),
            ("type", true),
        ] {
            let e = without_values(leaky(field));
            assert_eq!(e.field, field);
            assert_eq!(e.message.contains("s3cr!t"), kept, "{field}: {e}");
        }
        assert!(
            without_values(leaky("data.token"))
                .message
                .contains("base64")
        );
    }
}
