//! Forgeries against Slack, Shopify and Standard Webhooks routes, sent over real HTTP to the
//! receiver on 127.0.0.1:0: a signature with one bit flipped, a valid signature over another body,
//! one made with another secret, and none at all. Each is 401 and leaves no row and no nonce
//! behind, checked in the database after the answer; the genuine request is then accepted, so the
//! refusals are the signatures' doing. On PostgreSQL and SQLite.

use crate::common::loopback::Served;
use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hookgate::cli::send::SendOptions;
use hookgate::inbox::Inbox;
use hookgate::signature::{Scheme, SignInput, SigningKey};

fn manifests() -> String {
    test_manifests()
        + r#"
---
apiVersion: v1
kind: Secret
metadata: {name: providers, namespace: t}
stringData:
  slack: 8f742231b10e8888abcd99yyyzzz85a5
  shopify: shpss_hookgate_test_secret
  sw: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: slack, namespace: t}
spec:
  scheme: {type: slack}
  keys: [{id: s1, secretRef: {name: providers, key: slack}}]
  delivery: {url: "http://127.0.0.1:1/sink"}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: shopify, namespace: t}
spec:
  scheme: {type: shopify}
  keys: [{id: p1, secretRef: {name: providers, key: shopify}}]
  delivery: {url: "http://127.0.0.1:1/sink"}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: sw, namespace: t}
spec:
  scheme: {type: standard-webhooks}
  keys: [{id: w1, secretRef: {name: providers, key: sw}}]
  delivery: {url: "http://127.0.0.1:1/sink"}
"#
}

/// One provider's format: where its signature sits and how it is encoded.
struct Provider {
    integration: &'static str,
    scheme: Scheme,
    header: &'static str,
    /// Text in front of the encoded signature.
    prefix: &'static str,
    hex: bool,
    event_id: &'static str,
    body: &'static str,
    other_body: &'static str,
}

fn slack() -> Provider {
    Provider {
        integration: "t/slack",
        scheme: Scheme::Slack,
        header: "x-slack-signature",
        prefix: "v0=",
        hex: true,
        event_id: "Ev01",
        body: r#"{"event_id":"Ev01","event":{"type":"message","text":"hi"}}"#,
        other_body: r#"{"event_id":"Ev01","event":{"type":"message","text":"pay me"}}"#,
    }
}

fn shopify() -> Provider {
    Provider {
        integration: "t/shopify",
        scheme: Scheme::Shopify,
        header: "x-shopify-hmac-sha256",
        prefix: "",
        hex: false,
        event_id: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        body: r#"{"id":820982911946154508,"total_price":"10.00"}"#,
        other_body: r#"{"id":820982911946154508,"total_price":"0.01"}"#,
    }
}

fn standard_webhooks() -> Provider {
    Provider {
        integration: "t/sw",
        scheme: Scheme::StandardWebhooks,
        header: "webhook-signature",
        prefix: "v1,",
        hex: false,
        event_id: "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
        body: r#"{"type":"invoice.paid","amount":10}"#,
        other_body: r#"{"type":"invoice.paid","amount":1000}"#,
    }
}

impl Provider {
    fn opts(&self) -> SendOptions {
        SendOptions {
            event_id: Some(self.event_id.into()),
            event_type: Some("orders/create".into()),
            ..opts()
        }
    }

    /// The signature header's value with one bit of the signature's last byte flipped, still
    /// well-formed, so only the comparison can refuse it.
    fn flipped(&self, value: &str) -> String {
        let encoded = value.strip_prefix(self.prefix).unwrap();
        let mut raw = if self.hex {
            const_hex::decode(encoded).unwrap()
        } else {
            STANDARD.decode(encoded).unwrap()
        };
        *raw.last_mut().unwrap() ^= 0x01;
        let encoded = if self.hex {
            const_hex::encode(raw)
        } else {
            STANDARD.encode(raw)
        };
        format!("{}{encoded}", self.prefix)
    }

    /// Headers for the same request signed, the way the provider would, with another secret.
    fn signed_with_another_secret(&self) -> Vec<(String, String)> {
        let secret = match self.scheme {
            // Standard Webhooks secrets are base64 (after `whsec_`).
            Scheme::StandardWebhooks => STANDARD.decode("bm90IHRoZSByaWdodCBzZWNyZXQ=").unwrap(),
            _ => b"not the right secret".to_vec(),
        };
        self.scheme
            .sign(
                &SigningKey::Hmac(secret),
                &SignInput {
                    key_id: "",
                    timestamp: t0().timestamp(),
                    event_id: self.event_id,
                    event_type: Some("orders/create"),
                    body: self.body.as_bytes(),
                },
            )
            .unwrap()
    }
}

async fn forgeries_write_nothing_then_the_genuine_request_is_accepted(inbox: Inbox, p: Provider) {
    let h = harness_with(inbox, &manifests());
    let served = Served::start(&h.receiver).await;
    let (path, headers) = h.sign(p.integration, p.body, p.opts());
    let signature = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(p.header))
        .unwrap_or_else(|| panic!("{} in {headers:?}", p.header))
        .1
        .clone();
    let forgeries = [
        (
            "one bit of the signature flipped",
            with_header(&headers, p.header, &p.flipped(&signature)),
            p.body,
        ),
        (
            "valid signature over another body",
            headers.clone(),
            p.other_body,
        ),
        (
            "signed with another secret",
            p.signed_with_another_secret(),
            p.body,
        ),
        ("no signature", without_header(&headers, p.header), p.body),
    ];
    for (what, hdrs, body) in forgeries {
        let got = served.post(&path, &hdrs, body).await;
        assert_eq!(
            got,
            (401, error("invalid_signature")),
            "{}: {what}",
            p.integration
        );
        assert_eq!(
            h.receiver.inbox().counts().await.unwrap(),
            (0, 0),
            "{}: {what} wrote an event or a nonce",
            p.integration
        );
    }
    let got = served.post(&path, &headers, p.body).await;
    assert_eq!(got, (200, accepted()), "{}: genuine", p.integration);
    let (events, _) = h.receiver.inbox().counts().await.unwrap();
    assert_eq!(
        events, 1,
        "{}: the genuine request is stored",
        p.integration
    );
}

async fn slack_forgeries_write_nothing(inbox: Inbox) {
    forgeries_write_nothing_then_the_genuine_request_is_accepted(inbox, slack()).await;
}

async fn shopify_forgeries_write_nothing(inbox: Inbox) {
    forgeries_write_nothing_then_the_genuine_request_is_accepted(inbox, shopify()).await;
}

async fn standard_webhooks_forgeries_write_nothing(inbox: Inbox) {
    forgeries_write_nothing_then_the_genuine_request_is_accepted(inbox, standard_webhooks()).await;
}

on_both_backends!(
    slack_forgeries_write_nothing,
    shopify_forgeries_write_nothing,
    standard_webhooks_forgeries_write_nothing,
);
