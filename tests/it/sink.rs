//! `hookgate sink --signing-secret`, the real binary on a free loopback port: a delivery signed
//! with the secret (Standard Webhooks, as workers sign) gets the configured 2xx, and every other
//! one (tampered body, flipped bit, another secret, unsigned, or signed too long ago) gets 401.
//! The line the sink prints for each says which.

use crate::common::procs::{BIN, Proc, free_port};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hookgate::signature::{Scheme, SignInput, SigningKey};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

type Headers = Vec<(String, String)>;

const SECRET: &str = "whsec_aG9va2dhdGUtZGVsaXZlcnktdGVzdC1vbmx5LWtleSE=";

/// Headers a worker would send for `body`, signed with `secret` (raw bytes) at `timestamp`.
fn signed(secret: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Headers {
    Scheme::StandardWebhooks
        .sign(
            &SigningKey::Hmac(secret.to_vec()),
            &SignInput {
                key_id: "delivery",
                timestamp,
                event_id: id,
                event_type: None,
                body,
            },
        )
        .unwrap()
}

/// The signature header's value with one bit of the HMAC flipped.
fn flipped(headers: &[(String, String)]) -> Headers {
    headers
        .iter()
        .map(|(k, v)| {
            if k != "webhook-signature" {
                return (k.clone(), v.clone());
            }
            let mut raw = STANDARD.decode(v.strip_prefix("v1,").unwrap()).unwrap();
            raw[7] ^= 0x04;
            (k.clone(), format!("v1,{}", STANDARD.encode(raw)))
        })
        .collect()
}

#[tokio::test]
async fn sink_with_a_signing_secret_answers_401_to_bad_signatures_and_2xx_to_good_ones() {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "sink",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--status",
            "202",
            "--signing-secret",
            SECRET,
        ])
        .env_remove("HOOKGATE_SINK_SECRET")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let sink = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the sink did not listen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let secret = STANDARD
        .decode(SECRET.trim_start_matches("whsec_"))
        .unwrap();
    let now = chrono::Utc::now().timestamp();
    let body = br#"{"type":"invoice.paid","id":"in_1"}"#;
    let good = signed(&secret, "msg_good", now, body);
    let unsigned: Vec<_> = good
        .iter()
        .filter(|(k, _)| k != "webhook-signature")
        .cloned()
        .collect();
    let cases: [(&str, Headers, &[u8], u16); 6] = [
        ("signed with the secret", good.clone(), body, 202),
        (
            "body changed after signing",
            good.clone(),
            br#"{"type":"invoice.paid","id":"in_2"}"#,
            401,
        ),
        (
            "one bit of the signature flipped",
            flipped(&good),
            body,
            401,
        ),
        (
            "signed with another secret",
            signed(b"another secret", "msg_good", now, body),
            body,
            401,
        ),
        ("unsigned", unsigned, body, 401),
        // Valid over its timestamp, but that is ten minutes old: a replay.
        (
            "signed ten minutes ago",
            signed(&secret, "msg_old", now - 600, body),
            body,
            401,
        ),
    ];
    let client = reqwest::Client::new();
    for (what, headers, body, status) in &cases {
        let mut req = client
            .post(format!("http://127.0.0.1:{port}/webhooks/test"))
            .body(body.to_vec());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let got = req.send().await.unwrap().status().as_u16();
        assert_eq!(got, *status, "{what}");
    }

    drop(sink);
    let mut printed = String::new();
    stdout.read_to_string(&mut printed).unwrap();
    let verdicts: Vec<&str> = printed
        .lines()
        .map(|l| l.rsplit_once("signature=").map_or("?", |(_, v)| v))
        .collect();
    assert_eq!(
        verdicts,
        [
            "valid", "INVALID", "INVALID", "INVALID", "INVALID", "INVALID"
        ],
        "{printed}"
    );
}
