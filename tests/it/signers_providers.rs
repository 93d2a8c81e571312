//! The provider schemes of issue 15 against the providers' own libraries, over real HTTP.
//! tests/it/signers/providers.py signs with Twilio's `RequestValidator` and Slack's
//! `SignatureVerifier`; builds SendGrid, Paddle and Square requests from their documented formats
//! and has the SDK's verifier accept each first (those SDKs only verify); signs Discord with PyNaCl;
//! and builds Twitch, Zoom, Meta, Linear and GitLab requests, which have no Python helper, with
//! `hmac`. Each request goes through the receiver on 127.0.0.1:0: it is accepted and stored under
//! the provider's event id, a re-send is a duplicate, and a copy with one bit of the signature or
//! one byte of the body changed is 401 and writes nothing. Handshakes the SDKs sign are answered.
//! Without python3 or the packages the tests say why they are skipped, except in CI (`CI` set),
//! where that is a failure: tests/run.sh installs them.

use crate::common::loopback::Served;
use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hookgate::inbox::{Inbox, ListFilter};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::io::Write;
use std::process::{Command, Stdio};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/signers/providers.py");
/// Twilio and Square sign the URL they were configured with, not the one the request reached.
const PUBLIC_BASE: &str = "https://hooks.example.com/hooks/p/";

/// Whether `python3 -c "<import>"` works; otherwise skips (false), or fails under CI.
fn python_with(import: &str, packages: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", import])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip_or_fail(&format!(
            "python3 with {packages} is not available (pip install {packages}; tests/run.sh installs them)"
        ));
    }
    ok
}

/// Runs the signer on `jobs`; one answer per job.
fn sign(jobs: &[Value]) -> Vec<Value> {
    let mut child = Command::new("python3")
        .arg(SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let input = serde_json::to_vec(jobs).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{SCRIPT}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// How a signature header carries its bytes, so that exactly one of them can be changed.
#[derive(Clone, Copy)]
enum Sig {
    /// Hex after the last `=` (`sha256=`, `v0=`, Paddle's `h1=`), or all of it.
    Hex,
    Base64,
    /// GitLab's token, compared as a whole.
    Token,
}

/// One request for integration `p/{name}`, whose type is the name up to its first `-`.
struct Case {
    name: &'static str,
    /// The signer's job, without the body.
    job: Value,
    body: String,
    signature: (&'static str, Sig),
    /// Stored event id; `None` when it is the signature digest the signer reports.
    id: Option<&'static str>,
    ty: Option<&'static str>,
    /// For a handshake: the answer expected, from the signer's answer; nothing is stored.
    handshake: Option<fn(&Value) -> Value>,
}

fn case(name: &'static str, job: Value, body: impl Into<String>, sig: (&'static str, Sig)) -> Case {
    Case {
        name,
        job,
        body: body.into(),
        signature: sig,
        id: None,
        ty: None,
        handshake: None,
    }
}

impl Case {
    fn scheme(&self) -> &'static str {
        self.name.split('-').next().unwrap()
    }
    fn stored(mut self, id: Option<&'static str>, ty: Option<&'static str>) -> Self {
        (self.id, self.ty) = (id, ty);
        self
    }
    fn answered(mut self, with: fn(&Value) -> Value) -> Self {
        self.handshake = Some(with);
        self
    }
}

fn ts() -> String {
    t0().timestamp().to_string()
}

/// One integration per case name in namespace `p`; the key is the job's secret, or the public
/// key the signer made (Discord's hex, SendGrid's base64 DER).
fn manifests(cases: &[Case], answers: &[Value]) -> String {
    let mut secrets = String::from("  verify-token: meta-verify-token\n");
    let mut integrations = String::new();
    for (case, answer) in cases.iter().zip(answers) {
        if integrations.contains(&format!("name: {}, namespace", case.name)) {
            continue;
        }
        let key = answer["public_key"]
            .as_str()
            .or(case.job["secret"].as_str())
            .expect("a secret or a public key");
        secrets += &format!("  {}: \"{key}\"\n", case.name);
        let extra = match case.scheme() {
            "twilio" | "square" => format!(", publicUrl: \"{PUBLIC_BASE}{}\"", case.name),
            "meta" => ", verifyTokenRef: {name: keys, key: verify-token}".into(),
            _ => String::new(),
        };
        integrations += &format!(
            "---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\n\
             metadata: {{name: {}, namespace: p}}\nspec:\n  scheme: {{type: {}{extra}}}\n  \
             keys: [{{id: k1, secretRef: {{name: keys, key: {}}}}}]\n  \
             delivery: {{url: \"http://127.0.0.1:1/sink\"}}\n",
            case.name,
            case.scheme(),
            case.name
        );
    }
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: keys, namespace: p}}\nstringData:\n\
         {secrets}{integrations}"
    )
}

/// The value with one bit of its signature bytes flipped, still well-formed.
fn flip(value: &str, sig: Sig) -> String {
    let xor_mid = |mut raw: Vec<u8>| {
        let mid = raw.len() / 2;
        raw[mid] ^= 0x10;
        raw
    };
    match sig {
        Sig::Hex => {
            let at = value.rfind('=').map_or(0, |i| i + 1);
            let (prefix, hex) = value.split_at(at);
            format!(
                "{prefix}{}",
                const_hex::encode(xor_mid(const_hex::decode(hex).unwrap()))
            )
        }
        Sig::Base64 => STANDARD.encode(xor_mid(STANDARD.decode(value).unwrap())),
        Sig::Token => format!("{}x", &value[..value.len() - 1]),
    }
}

/// The body with one byte changed: every body carries a U+2713 (E2 9C 93), raw or
/// percent-encoded, and U+2714 differs from it in the last byte only.
fn one_byte_changed(body: &str) -> String {
    let changed = body
        .replacen('\u{2713}', "\u{2714}", 1)
        .replacen("%E2%9C%93", "%E2%9C%94", 1);
    assert_ne!(changed, body, "the body has a check mark to change");
    changed
}

async fn stored(h: &Harness, name: &str) -> Vec<(String, Option<String>)> {
    let filter = ListFilter {
        integration: Some(format!("p/{name}")),
        ..Default::default()
    };
    let rows = h.receiver.inbox().list(&filter).await.unwrap();
    rows.into_iter()
        .map(|r| (r.event_id, r.event_type))
        .collect()
}

async fn check(h: &Harness, served: &Served, case: &Case, answer: &Value) {
    let headers: Vec<(String, String)> = answer["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let path = match answer["query"].as_str().filter(|q| !q.is_empty()) {
        Some(q) => format!("/hooks/p/{}?{q}", case.name),
        None => format!("/hooks/p/{}", case.name),
    };
    let (header, sig) = case.signature;
    let what = |w: &str| format!("{}: {w}", case.name);
    let signature = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(header))
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("{}", what("the signer sent no signature header")));

    let before = h.receiver.inbox().counts().await.unwrap();
    let mut tampered = vec![(
        "one bit of the signature flipped",
        with_header(&headers, header, &flip(signature, sig)),
        case.body.clone(),
    )];
    // GitLab signs nothing: a changed body with the right token is GitLab's request, by design.
    if !matches!(sig, Sig::Token) {
        tampered.push((
            "one byte of the body changed",
            headers.clone(),
            one_byte_changed(&case.body),
        ));
    }
    for (w, hdrs, body) in tampered {
        let got = served.post(&path, &hdrs, body).await;
        assert_eq!(got, (401, error("invalid_signature")), "{}", what(w));
        let now = h.receiver.inbox().counts().await.unwrap();
        assert_eq!(now, before, "{}", what(w));
    }

    let got = served.post(&path, &headers, case.body.clone()).await;
    if let Some(expected) = case.handshake {
        assert_eq!(got, (200, expected(answer)), "{}", what("handshake"));
        let now = h.receiver.inbox().counts().await.unwrap();
        assert_eq!(now, before, "{}", what("a handshake is not stored"));
        return;
    }
    assert_eq!(got, (200, accepted()), "{}", what("as signed"));
    let again = served.post(&path, &headers, case.body.clone()).await;
    assert_eq!(again, (200, duplicate()), "{}", what("re-sent"));
    let id = match case.id {
        Some(id) => id.to_string(),
        None => answer["event_id"]
            .as_str()
            .expect("a digest id")
            .to_string(),
    };
    let want = vec![(id, case.ty.map(str::to_string))];
    assert_eq!(stored(h, case.name).await, want, "{}", what("stored"));
}

async fn run(pool: PgPool, cases: Vec<Case>) {
    let jobs: Vec<Value> = cases
        .iter()
        .map(|c| {
            let mut job = c.job.clone();
            job["body_b64"] = STANDARD.encode(&c.body).into();
            job
        })
        .collect();
    let answers = sign(&jobs);
    let h = harness_with(Inbox::Postgres(pool), &manifests(&cases, &answers));
    let served = Served::start(&h.receiver).await;
    for (case, answer) in cases.iter().zip(&answers) {
        check(&h, &served, case, answer).await;
    }
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn requests_signed_by_twilio_and_slack_sdks_are_accepted_over_http(pool: PgPool) {
    if !python_with(
        "import twilio.request_validator, slack_sdk.signature",
        "twilio slack_sdk",
    ) {
        return;
    }
    let twilio = |name: &str, kind: &str, query: &str| {
        let url = format!("{PUBLIC_BASE}{name}");
        let id = format!("{name}-1");
        json!({"kind": kind, "secret": "twilio-token", "url": url, "query": query, "event_id": id})
    };
    let slack = json!({"kind": "slack", "secret": "8f742231b10e8888abcd99yyy", "timestamp": ts()});
    let sig = ("X-Twilio-Signature", Sig::Base64);
    let cases = vec![
        // A form post with a query string (both signed) and a repeated, non-ASCII parameter.
        case(
            "twilio-form",
            twilio("twilio-form", "twilio_form", "tenant=7"),
            "AccountSid=AC1&Body=caf%C3%A9+%E2%9C%93&Body=again&EventType=message.received",
            sig,
        )
        .stored(Some("twilio-form-1"), Some("message.received")),
        case(
            "twilio-json",
            twilio("twilio-json", "twilio_json", ""),
            r#"{"event":"com.twilio.messaging.inbound-message.received","note":"café ✓"}"#,
            sig,
        )
        .stored(Some("twilio-json-1"), None),
        case(
            "slack",
            slack.clone(),
            r#"{"type":"event_callback","event_id":"Ev08MF","event":{"type":"app_mention","text":"✓"}}"#,
            ("X-Slack-Signature", Sig::Hex),
        )
        .stored(Some("Ev08MF"), Some("app_mention")),
        case(
            "slack",
            slack,
            r#"{"type":"url_verification","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmd✓"}"#,
            ("X-Slack-Signature", Sig::Hex),
        )
        .answered(|_| json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmd✓"})),
    ];
    run(pool, cases).await;
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn requests_the_sendgrid_paddle_and_square_sdks_accept_are_accepted_over_http(pool: PgPool) {
    let import = "import sendgrid.helpers.eventwebhook, paddle_billing.Notifications, square";
    if !python_with(import, "sendgrid paddle-python-sdk squareup") {
        return;
    }
    let url = format!("{PUBLIC_BASE}square");
    let cases = vec![
        // SendGrid posts an array of events and ends it with CRLF.
        case(
            "sendgrid",
            json!({"kind": "sendgrid", "scalar_hex": "5d".repeat(32), "timestamp": ts()}),
            "[{\"email\":\"a@example.com\",\"event\":\"delivered\",\"note\":\"✓\"}]\r\n",
            ("X-Twilio-Email-Event-Webhook-Signature", Sig::Base64),
        ),
        case(
            "paddle",
            json!({"kind": "paddle", "secret": "pdl_ntf_01hv8x_test", "timestamp": ts()}),
            r#"{"event_id":"evt_01hv8x","event_type":"transaction.completed","data":{"note":"✓"}}"#,
            ("Paddle-Signature", Sig::Hex),
        )
        .stored(Some("evt_01hv8x"), Some("transaction.completed")),
        case(
            "square",
            json!({"kind": "square", "secret": "Ibxx_5AKakO-test", "url": url}),
            r#"{"type":"payment.updated","event_id":"sq-evt-1","data":{"note":"✓"}}"#,
            ("x-square-hmacsha256-signature", Sig::Base64),
        )
        .stored(Some("sq-evt-1"), Some("payment.updated")),
    ];
    run(pool, cases).await;
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn requests_built_from_the_documented_formats_are_accepted_over_http(pool: PgPool) {
    if !python_with("import nacl.signing", "pynacl") {
        return;
    }
    let hmac = |kind: &str, id: &str, ty: &str| {
        let secret = format!("{kind}-shared-secret");
        json!({"kind": kind, "secret": secret, "timestamp": ts(), "event_id": id, "event_type": ty})
    };
    let mut twitch = hmac("twitch", "tw-msg-1", "channel.follow");
    twitch["rfc3339"] = t0()
        .format("%Y-%m-%dT%H:%M:%S.123456789Z")
        .to_string()
        .into();
    let discord_seed = const_hex::encode(b"hookgate test: discord seed 32b!");
    let zoom_token = r#""plainToken":"qgg8vlvZRS6UYooatFL8Aw""#;
    let hex = Sig::Hex;
    let cases = vec![
        case(
            "discord",
            json!({"kind": "discord", "seed_hex": discord_seed, "timestamp": ts()}),
            r#"{"id":"int-9","type":2,"data":{"name":"ping ✓"}}"#,
            ("X-Signature-Ed25519", hex),
        )
        .stored(Some("int-9"), Some("2")),
        case(
            "twitch",
            twitch,
            r#"{"subscription":{"type":"channel.follow"},"event":{"user_name":"✓"}}"#,
            ("Twitch-Eventsub-Message-Signature", hex),
        )
        .stored(Some("tw-msg-1"), Some("channel.follow")),
        case(
            "zoom",
            hmac("zoom", "", ""),
            r#"{"event":"meeting.started","payload":{"object":{"topic":"✓"}}}"#,
            ("x-zm-signature", hex),
        )
        .stored(None, Some("meeting.started")),
        case(
            "zoom",
            hmac("zoom", "", ""),
            format!(r#"{{"event":"endpoint.url_validation","payload":{{{zoom_token}}},"x":"✓"}}"#),
            ("x-zm-signature", hex),
        )
        .answered(|a| json!({"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": a["encrypted_token"]})),
        case(
            "meta",
            hmac("meta", "", ""),
            r#"{"object":"whatsapp_business_account","entry":[{"id":"1","text":"✓"}]}"#,
            ("X-Hub-Signature-256", hex),
        )
        .stored(None, Some("whatsapp_business_account")),
        // Linear's signed timestamp is the body's, in milliseconds.
        case(
            "linear",
            hmac("linear", "lin-delivery-1", "Issue"),
            format!(
                r#"{{"action":"create","data":{{"title":"✓"}},"webhookTimestamp":{}}}"#,
                t0().timestamp_millis() + 250
            ),
            ("Linear-Signature", hex),
        )
        .stored(Some("lin-delivery-1"), Some("Issue")),
        case(
            "gitlab",
            hmac("gitlab", "gl-uuid-1", "Push Hook"),
            r#"{"object_kind":"push","note":"✓"}"#,
            ("X-Gitlab-Token", Sig::Token),
        )
        .stored(Some("gl-uuid-1"), Some("Push Hook")),
    ];
    run(pool, cases).await;
}
