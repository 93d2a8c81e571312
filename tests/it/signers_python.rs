//! The generic schemes checked against signers that share nothing with hookgate: a Discord-style
//! Ed25519 request signed by PyNaCl (libsodium), and `hmac-sha256` requests built by Python's
//! `hmac` module from the documented formats (`tests/it/signers/independent.py`). Each goes
//! through the whole HTTP path to the receiver on 127.0.0.1:0 and is accepted and stored; each
//! tampered copy is 401 and writes nothing. Without python3 (or PyNaCl) the tests say why they
//! are skipped, except in CI (`CI` set), where that is a failure: tests/run.sh installs PyNaCl.

use crate::common::loopback::Served;
use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hookgate::inbox::{Inbox, ListFilter};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::io::Write;
use std::process::{Command, Stdio};

type Headers = Vec<(String, String)>;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/signers/independent.py"
);

/// Whether `python3 -c "<import>"` works; otherwise skips (false), or fails under CI.
fn python_with(import: &str, package: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", import])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        crate::common::skip_or_fail(&format!(
            "python3 with {package} is not available (pip install {package}; tests/run.sh installs it)"
        ));
    }
    ok
}

/// Runs the independent signer on `jobs`; one answer per job.
fn sign(jobs: Value) -> Vec<Value> {
    let mut child = Command::new("python3")
        .arg(SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(jobs.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{SCRIPT}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn b64(body: &[u8]) -> String {
    STANDARD.encode(body)
}

/// `headers` as the receiver wants them, from a JSON object of the signer's answer.
fn header_list(headers: &Value) -> Vec<(String, String)> {
    headers
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

/// Flips one bit in the middle of a hex or base64 signature, keeping it well-formed.
fn flip(signature: &str, hex: bool) -> String {
    let mut raw = if hex {
        const_hex::decode(signature).unwrap()
    } else {
        STANDARD.decode(signature).unwrap()
    };
    let mid = raw.len() / 2;
    raw[mid] ^= 0x10;
    if hex {
        const_hex::encode(raw)
    } else {
        STANDARD.encode(raw)
    }
}

async fn stored_ids(h: &Harness, integration: &str) -> Vec<(String, String)> {
    let filter = ListFilter {
        integration: Some(integration.into()),
        ..Default::default()
    };
    let mut rows: Vec<_> = h
        .receiver
        .inbox()
        .list(&filter)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.event_id, r.key_id))
        .collect();
    rows.sort();
    rows
}

fn discord_manifests(public_key_hex: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: discord-app, namespace: t}}
stringData:
  public-key: {public_key_hex}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: discord, namespace: t}}
spec:
  scheme:
    type: ed25519
    signatureHeader: X-Signature-Ed25519
    timestampHeader: X-Signature-Timestamp
    eventIdHeader: ""
    keyIdHeader: ""
    signedPayload: "{{timestamp}}{{body}}"
    encoding: hex
  eventId: {{jsonPointer: /id}}
  eventType: {{jsonPointer: /type}}
  keys: [{{id: app, secretRef: {{name: discord-app, key: public-key}}}}]
  delivery: {{url: "http://127.0.0.1:1/sink"}}
"#
    )
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_discord_style_request_signed_by_pynacl_is_accepted_over_http(pool: PgPool) {
    if !python_with("import nacl.signing", "pynacl") {
        return;
    }
    let ts = t0().timestamp().to_string();
    let bodies: [&[u8]; 2] = [
        br#"{"id":"int-1","type":1}"#,
        "{\"id\":\"int-2\",\"type\":2,\"data\":{\"name\":\"\u{fc}n\u{ef}code \u{2713}\"}}"
            .as_bytes(),
    ];
    let jobs: Vec<Value> = bodies
        .iter()
        .map(|body| {
            json!({
                "kind": "discord",
                "seed_hex": const_hex::encode(b"hookgate test: pynacl seed 32 b!"),
                "timestamp": ts,
                "body_b64": b64(body),
            })
        })
        .collect();
    let signed = sign(json!(jobs));
    let public = signed[0]["public_key_hex"].as_str().unwrap();
    let h = harness_with(Inbox::Postgres(pool), &discord_manifests(public));
    let served = Served::start(&h.receiver).await;
    let path = "/hooks/t/discord";

    // Tampered copies first, so that the inbox is still empty for each of them.
    let headers = header_list(&signed[0]["headers"]);
    let signature = signed[0]["headers"]["X-Signature-Ed25519"]
        .as_str()
        .unwrap();
    let later = (t0().timestamp() + 1).to_string();
    let tampered: [(&str, Headers, &[u8]); 4] = [
        (
            "body changed after signing",
            headers.clone(),
            br#"{"id":"int-1","type":2}"#,
        ),
        (
            "one bit of the signature flipped",
            with_header(&headers, "X-Signature-Ed25519", &flip(signature, true)),
            bodies[0],
        ),
        (
            "timestamp changed after signing",
            with_header(&headers, "X-Signature-Timestamp", &later),
            bodies[0],
        ),
        (
            "the other request's signature",
            header_list(&signed[1]["headers"]),
            bodies[0],
        ),
    ];
    for (what, hdrs, body) in tampered {
        let got = served.post(path, &hdrs, body).await;
        assert_eq!(got, (401, error("invalid_signature")), "{what}");
        assert_eq!(h.receiver.inbox().counts().await.unwrap(), (0, 0), "{what}");
    }

    for (answer, body) in signed.iter().zip(bodies) {
        let got = served
            .post(path, &header_list(&answer["headers"]), body)
            .await;
        assert_eq!(got, (200, accepted()), "{}", String::from_utf8_lossy(body));
    }
    assert_eq!(
        stored_ids(&h, "t/discord").await,
        [
            ("int-1".into(), "app".into()),
            ("int-2".into(), "app".into())
        ]
    );
}

/// Four generic HMAC layouts, each signed by Python from the documented format: hex over the
/// bare body; base64 with a `sha256=` prefix; a template with the timestamp and the event id on
/// both sides of the body; and the scheme's defaults, key id included.
fn hmac_manifests() -> String {
    r#"
apiVersion: v1
kind: Secret
metadata: {name: generic, namespace: t}
stringData:
  secret: "python-hmac shared secret"
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: hex-body, namespace: t}
spec:
  scheme: {type: hmac-sha256, signatureHeader: X-Body-Signature, timestampHeader: "", eventIdHeader: "", keyIdHeader: "", signedPayload: "{body}", encoding: hex}
  keys: [{id: g1, secretRef: {name: generic, key: secret}}]
  delivery: {url: "http://127.0.0.1:1/sink"}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: b64-prefixed, namespace: t}
spec:
  scheme: {type: hmac-sha256, signatureHeader: X-Hmac, timestampHeader: "", eventIdHeader: "", keyIdHeader: "", signedPayload: "{body}", encoding: base64, signaturePrefix: "sha256="}
  keys: [{id: g1, secretRef: {name: generic, key: secret}}]
  delivery: {url: "http://127.0.0.1:1/sink"}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: templated, namespace: t}
spec:
  scheme: {type: hmac-sha256, signatureHeader: X-Sig, timestampHeader: X-Sent-At, eventIdHeader: X-Delivery, keyIdHeader: "", signedPayload: "v1:{timestamp}:{body}:{event_id}", encoding: hex}
  keys: [{id: g1, secretRef: {name: generic, key: secret}}]
  delivery: {url: "http://127.0.0.1:1/sink"}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: defaults, namespace: t}
spec:
  scheme: {type: hmac-sha256}
  keys: [{id: g1, secretRef: {name: generic, key: secret}}]
  delivery: {url: "http://127.0.0.1:1/sink"}
"#
    .to_string()
}

/// One generic layout as a client would send it.
struct Layout {
    integration: &'static str,
    signed_payload: &'static str,
    encoding: &'static str,
    prefix: &'static str,
    signature_header: &'static str,
    /// Other headers the sender adds, by name: timestamp, event id, key id.
    timestamp_header: Option<&'static str>,
    event_id_header: Option<&'static str>,
    key_id_header: Option<&'static str>,
}

const LAYOUTS: [Layout; 4] = [
    Layout {
        integration: "hex-body",
        signed_payload: "{body}",
        encoding: "hex",
        prefix: "",
        signature_header: "X-Body-Signature",
        timestamp_header: None,
        event_id_header: None,
        key_id_header: None,
    },
    Layout {
        integration: "b64-prefixed",
        signed_payload: "{body}",
        encoding: "base64",
        prefix: "sha256=",
        signature_header: "X-Hmac",
        timestamp_header: None,
        event_id_header: None,
        key_id_header: None,
    },
    Layout {
        integration: "templated",
        signed_payload: "v1:{timestamp}:{body}:{event_id}",
        encoding: "hex",
        prefix: "",
        signature_header: "X-Sig",
        timestamp_header: Some("X-Sent-At"),
        event_id_header: Some("X-Delivery"),
        key_id_header: None,
    },
    // The defaults as docs/webhookintegration.md states them.
    Layout {
        integration: "defaults",
        signed_payload: "{timestamp}.{event_id}.{body}",
        encoding: "hex",
        prefix: "",
        signature_header: "X-Signature",
        timestamp_header: Some("X-Timestamp"),
        event_id_header: Some("X-Event-Id"),
        key_id_header: Some("X-Key-Id"),
    },
];

#[sqlx::test(migrations = "migrations/postgres")]
async fn generic_hmac_requests_built_by_python_hmac_are_accepted_over_http(pool: PgPool) {
    if !python_with("import hmac, hashlib", "python3") {
        return;
    }
    let h = harness_with(Inbox::Postgres(pool), &hmac_manifests());
    let served = Served::start(&h.receiver).await;
    let ts = t0().timestamp().to_string();
    let body = |i: usize| format!("{{\"id\":\"py-{i}\",\"note\":\"caf\u{e9} \u{2713}\"}}");
    let jobs: Vec<Value> = LAYOUTS
        .iter()
        .enumerate()
        .map(|(i, l)| {
            json!({
                "kind": "hmac",
                "secret": "python-hmac shared secret",
                "signed_payload": l.signed_payload,
                "timestamp": ts,
                "event_id": format!("py-{i}"),
                "body_b64": b64(body(i).as_bytes()),
                "encoding": l.encoding,
                "prefix": l.prefix,
            })
        })
        .collect();
    let signed = sign(json!(jobs));

    let mut expected = Vec::new();
    for (i, (l, answer)) in LAYOUTS.iter().zip(&signed).enumerate() {
        let signature = answer["signature"].as_str().unwrap();
        let mut headers = vec![(l.signature_header.to_string(), signature.to_string())];
        headers.extend(l.timestamp_header.map(|n| (n.to_string(), ts.clone())));
        headers.extend(
            l.event_id_header
                .map(|n| (n.to_string(), format!("py-{i}"))),
        );
        headers.extend(l.key_id_header.map(|n| (n.to_string(), "g1".to_string())));
        let path = format!("/hooks/t/{}", l.integration);
        let what = |w: &str| format!("{}: {w}", l.integration);

        let encoded = signature.strip_prefix(l.prefix).unwrap();
        let flipped = format!("{}{}", l.prefix, flip(encoded, l.encoding == "hex"));
        let before = h.receiver.inbox().counts().await.unwrap();
        let mut tampered = vec![
            (
                "body changed after signing",
                headers.clone(),
                body(i).replace("caf", "cab"),
            ),
            (
                "one bit of the signature flipped",
                with_header(&headers, l.signature_header, &flipped),
                body(i),
            ),
        ];
        if let Some(name) = l.timestamp_header {
            let later = (t0().timestamp() + 1).to_string();
            tampered.push((
                "timestamp changed after signing",
                with_header(&headers, name, &later),
                body(i),
            ));
        }
        for (w, hdrs, b) in tampered {
            let got = served.post(&path, &hdrs, b).await;
            assert_eq!(got, (401, error("invalid_signature")), "{}", what(w));
            assert_eq!(
                h.receiver.inbox().counts().await.unwrap(),
                before,
                "{}",
                what(w)
            );
        }
        let got = served.post(&path, &headers, body(i)).await;
        assert_eq!(got, (200, accepted()), "{}", what("as Python signed it"));
        expected.push((format!("t/{}", l.integration), format!("py-{i}")));
    }
    let mut stored: Vec<(String, String)> = h
        .receiver
        .inbox()
        .list(&ListFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.integration, r.event_id))
        .collect();
    stored.sort();
    expected.sort();
    assert_eq!(stored, expected);
}
