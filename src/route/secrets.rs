//! Secret values as the compiler reads them: one decoding for manifests and the API alike.

use std::collections::BTreeMap;

/// Secret data by (namespace, name), values already base64-decoded.
pub type Secrets = BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>;

/// A Secret's values as the API server would store them: `data`, with `stringData` merged over
/// it (a manifest may carry either; an object read from the API has only `data`).
pub fn secret_values(secret: k8s_openapi::api::core::v1::Secret) -> BTreeMap<String, Vec<u8>> {
    let mut values: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    for (k, v) in secret.string_data.unwrap_or_default() {
        values.insert(k, v.into_bytes());
    }
    values
}
