//! Fixtures for the provider schemes of issue 15, shared by `providers`, `providers_handshakes`
//! and `hostile_inputs`: one integration per provider, requests signed with hookgate's own
//! `Scheme::sign` (cross-checks against the providers' SDKs live elsewhere), and a client that
//! keeps what crossed the wire (status, content type, raw body).

use crate::common::loopback::Served;
use crate::common::*;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hookgate::inbox::Inbox;
use hookgate::signature::{KeyMaterial, Scheme, SignInput, SigningKey};
use serde_json::Value;

pub(crate) type Headers = Vec<(String, String)>;

pub(crate) const TWILIO_URL: &str = "https://hooks.example.com/hooks/p/twilio";
pub(crate) const SQUARE_URL: &str = "https://hooks.example.com/hooks/p/square";
pub(crate) const VERIFY_TOKEN: &str = "meta-verify-token-1";
pub(crate) const PROVIDERS: [&str; 11] = [
    "slack", "discord", "twilio", "twitch", "zoom", "meta", "gitlab", "paddle", "square",
    "sendgrid", "linear",
];

pub(crate) fn discord_key(seed: u8) -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
}

pub(crate) fn sendgrid_key(seed: u8) -> p256::ecdsa::SigningKey {
    p256::ecdsa::SigningKey::from_slice(&[seed; 32]).expect("scalar in range")
}

/// One integration per provider in namespace `p`, each with key `k1`; Discord's key is the hex
/// public key its portal shows, SendGrid's the base64 DER SubjectPublicKeyInfo.
pub(crate) fn manifests() -> String {
    use p256::pkcs8::EncodePublicKey;
    let sendgrid = sendgrid_key(1).verifying_key().to_public_key_der().unwrap();
    let mut yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: keys, namespace: p}}\nstringData:\n  \
         discord: \"{}\"\n  sendgrid: \"{}\"\n  meta-verify: {VERIFY_TOKEN}\n",
        const_hex::encode(discord_key(1).verifying_key().to_bytes()),
        STANDARD.encode(sendgrid.as_bytes()),
    );
    for p in PROVIDERS
        .iter()
        .filter(|p| !["discord", "sendgrid"].contains(p))
    {
        yaml += &format!("  {p}: {p}-shared-secret\n");
    }
    for p in PROVIDERS {
        let extra = match p {
            "twilio" => format!(", publicUrl: \"{TWILIO_URL}\""),
            "square" => format!(", publicUrl: \"{SQUARE_URL}\""),
            "meta" => ", verifyTokenRef: {name: keys, key: meta-verify}".into(),
            _ => String::new(),
        };
        yaml += &format!(
            "---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\n\
             metadata: {{name: {p}, namespace: p}}\nspec:\n  scheme: {{type: {p}{extra}}}\n  \
             keys: [{{id: k1, secretRef: {{name: keys, key: {p}}}}}]\n  \
             delivery: {{url: \"http://127.0.0.1:1/sink\"}}\n"
        );
    }
    yaml
}

/// Who signs: the integration's key, or one it does not hold.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Signer {
    Right,
    Wrong,
}

/// A request to sign as provider `name` (integration `p/{name}`).
pub(crate) struct Req<'a> {
    pub name: &'a str,
    pub body: &'a str,
    pub at: i64,
    pub id: &'a str,
    pub ty: Option<&'a str>,
    pub signer: Signer,
}

impl<'a> Req<'a> {
    pub fn new(name: &'a str, body: &'a str) -> Self {
        Self {
            name,
            body,
            at: t0().timestamp(),
            id: "evt-1",
            ty: None,
            signer: Signer::Right,
        }
    }
}

/// The integration's scheme as compiled from the manifests.
pub(crate) fn scheme(h: &Harness, name: &str) -> Scheme {
    let table = h.manifests.route_table().unwrap();
    let route = table.get(&format!("/hooks/p/{name}")).expect("route");
    route.verifier.scheme().clone()
}

/// Path (with the query Twilio signs for JSON bodies) and headers, signed by `Scheme::sign`.
pub(crate) fn sign(h: &Harness, r: &Req) -> (String, Headers) {
    sign_as(h, r, &scheme(h, r.name))
}

/// [`sign`] with another scheme instance (e.g. one configured for another public URL).
pub(crate) fn sign_as(h: &Harness, r: &Req, scheme: &Scheme) -> (String, Headers) {
    let table = h.manifests.route_table().unwrap();
    let route = table.get(&format!("/hooks/p/{}", r.name)).expect("route");
    // The manifests hold the public keys of seed 1; seed 2 is a stranger's private key.
    let seed = if r.signer == Signer::Right { 1 } else { 2 };
    let key = match (&route.verifier.keys()[0].material, r.signer) {
        (KeyMaterial::Hmac(s), Signer::Right) => SigningKey::Hmac(s.clone()),
        (KeyMaterial::Hmac(_), Signer::Wrong) => SigningKey::Hmac(b"not-the-secret".to_vec()),
        (KeyMaterial::Ed25519(_), _) => SigningKey::Ed25519(discord_key(seed)),
        (KeyMaterial::EcdsaP256(_), _) => SigningKey::EcdsaP256(sendgrid_key(seed)),
    };
    let input = SignInput {
        key_id: "k1",
        timestamp: r.at,
        event_id: r.id,
        event_type: r.ty,
        body: r.body.as_bytes(),
    };
    let mut headers = scheme.sign(&key, &input).expect("signs");
    let form = r.name == "twilio" && !r.body.starts_with('{');
    let ct = if form {
        "application/x-www-form-urlencoded"
    } else {
        "application/json"
    };
    headers.push(("content-type".into(), ct.into()));
    let query = scheme.signed_query(r.body.as_bytes());
    let path = format!("/hooks/p/{}", r.name) + &query.map(|q| format!("?{q}")).unwrap_or_default();
    (path, headers)
}

/// An answer as it crossed the wire.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    pub allow: Option<String>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
    /// Status and JSON body, the shape most assertions compare.
    pub fn reply(&self) -> (u16, Value) {
        (self.status, self.json())
    }
}

async fn answer(res: reqwest::Response) -> Answer {
    let status = res.status().as_u16();
    let header = |name: &str| {
        res.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let (content_type, allow) = (header("content-type"), header("allow"));
    let body = res.bytes().await.unwrap().to_vec();
    Answer {
        status,
        content_type,
        allow,
        body,
    }
}

pub(crate) async fn post(s: &Served, path: &str, headers: &Headers, body: &str) -> Answer {
    let mut req = reqwest::Client::new()
        .post(s.url(path))
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(k, v);
    }
    answer(req.send().await.expect("the receiver answers")).await
}

pub(crate) async fn get(s: &Served, path_and_query: &str) -> Answer {
    let res = reqwest::Client::new().get(s.url(path_and_query)).send();
    answer(res.await.expect("the receiver answers")).await
}

/// The provider integrations on a pinned clock (t0), served on loopback.
pub(crate) async fn start(inbox: Inbox) -> (Harness, Served) {
    let h = harness_with(inbox, &manifests());
    let served = Served::start(&h.receiver).await;
    (h, served)
}
