//! The `ed25519` scheme against the test vectors of RFC 8032, section 7.1 (TEST 1, 2, 3 and
//! SHA(abc)): secret key, public key, message and signature as the RFC prints them. The verifier
//! accepts exactly those, and refuses single-bit changes of the signature, the message and the
//! public key; hookgate's own signer (`hookgate send`) produces exactly the RFC's signatures;
//! and each vector goes through the receiver over real HTTP.

use crate::common::loopback::Served;
use crate::common::*;
use axum::http::{HeaderMap, HeaderValue};
use hookgate::inbox::{Inbox, ListFilter};
use hookgate::signature::{
    Encoding, GenericScheme, Key, Rejection, Scheme, SignInput, SigningKey, Template, Unverified,
    Verifier,
};
use sqlx::PgPool;

struct Vector {
    name: &'static str,
    secret: &'static str,
    public: &'static str,
    message: &'static str,
    signature: &'static str,
}

const VECTORS: [Vector; 4] = [
    Vector {
        name: "test-1",
        secret: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
        public: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        message: "",
        signature: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155\
                    5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
    },
    Vector {
        name: "test-2",
        secret: "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
        public: "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
        message: "72",
        signature: "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da\
                    085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00",
    },
    Vector {
        name: "test-3",
        secret: "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
        public: "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
        message: "af82",
        signature: "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac\
                    18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a",
    },
    Vector {
        name: "test-sha-abc",
        secret: "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
        public: "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
        message: "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
                  2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
        signature: "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589\
                    09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704",
    },
];

/// The whole message is the body: no timestamp, event id or key id is signed.
fn scheme() -> Scheme {
    Scheme::Ed25519(GenericScheme {
        signature_header: "x-signature".into(),
        timestamp_header: None,
        event_id_header: None,
        key_id_header: None,
        template: Template::parse("{body}").unwrap(),
        encoding: Encoding::Hex,
        signature_prefix: String::new(),
    })
}

fn bytes(hex_text: &str) -> Vec<u8> {
    const_hex::decode(hex_text).unwrap()
}

/// A verifier holding `public`, parsed from its hex text the way a Secret value is.
fn verifier(public: &[u8]) -> Result<Verifier, String> {
    let material = scheme().parse_key(const_hex::encode(public).as_bytes())?;
    Ok(Verifier::new(
        scheme(),
        vec![Key {
            id: "rfc".into(),
            material,
            not_after: None,
        }],
    ))
}

fn verify(v: &Verifier, signature: &[u8], message: &[u8]) -> Result<(), Rejection> {
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-signature",
        HeaderValue::from_str(&const_hex::encode(signature)).unwrap(),
    );
    v.verify(
        Unverified {
            query: None,
            headers: &headers,
            body: message,
        },
        t0(),
    )
    .map(|_| ())
}

/// Copies of `b` with exactly one bit flipped: the first and the last bit, and one bit of every
/// fourth byte (a different one each time). Every bit would be thousands of Ed25519 checks in a
/// debug build; these reach both halves of a signature (R and S) and every part of a message.
fn one_bit_off(b: &[u8]) -> impl Iterator<Item = (usize, Vec<u8>)> + '_ {
    let ends = if b.is_empty() {
        vec![]
    } else {
        vec![0, b.len() * 8 - 1]
    };
    let spread = (0..b.len()).step_by(4).map(|byte| byte * 8 + byte % 8);
    let mut bits: Vec<usize> = ends.into_iter().chain(spread).collect();
    bits.sort_unstable();
    bits.dedup();
    bits.into_iter().map(move |bit| {
        let mut c = b.to_vec();
        c[bit / 8] ^= 1 << (bit % 8);
        (bit, c)
    })
}

const MISMATCH: Rejection = Rejection::InvalidSignature("signature_mismatch");

#[test]
fn rfc8032_vectors_verify_and_single_bit_changes_do_not() {
    for v in &VECTORS {
        let (public, message, signature) = (bytes(v.public), bytes(v.message), bytes(v.signature));
        let secret: [u8; 32] = bytes(v.secret).try_into().unwrap();
        let private = ed25519_dalek::SigningKey::from_bytes(&secret);
        assert_eq!(
            private.verifying_key().to_bytes().to_vec(),
            public,
            "{}: the public key is the secret key's",
            v.name
        );
        let ok = verifier(&public).unwrap();
        assert_eq!(verify(&ok, &signature, &message), Ok(()), "{}", v.name);

        for (bit, sig) in one_bit_off(&signature) {
            assert_eq!(
                verify(&ok, &sig, &message),
                Err(MISMATCH),
                "{}: signature bit {bit} flipped",
                v.name
            );
        }
        for (bit, msg) in one_bit_off(&message) {
            assert_eq!(
                verify(&ok, &signature, &msg),
                Err(MISMATCH),
                "{}: message bit {bit} flipped",
                v.name
            );
        }
        let longer = [&message[..], b"\0"].concat();
        assert_eq!(
            verify(&ok, &signature, &longer),
            Err(MISMATCH),
            "{}: one byte more",
            v.name
        );
        for (bit, key) in one_bit_off(&public) {
            // Some flipped keys are not points on the curve at all and are refused when loaded.
            if let Ok(other) = verifier(&key) {
                assert_eq!(
                    verify(&other, &signature, &message),
                    Err(MISMATCH),
                    "{}: public key bit {bit} flipped",
                    v.name
                );
            }
        }
        for w in VECTORS.iter().filter(|w| w.name != v.name) {
            assert_eq!(
                verify(&verifier(&bytes(w.public)).unwrap(), &signature, &message),
                Err(MISMATCH),
                "{} under {}'s key",
                v.name,
                w.name
            );
        }

        // Ed25519 is deterministic, so a correct signer reproduces the RFC's bytes exactly.
        let headers = scheme()
            .sign(
                &SigningKey::Ed25519(private),
                &SignInput {
                    key_id: "rfc",
                    timestamp: 0,
                    event_id: "",
                    event_type: None,
                    body: &message,
                },
            )
            .unwrap();
        assert_eq!(
            headers,
            [("x-signature".to_string(), v.signature.to_string())],
            "{}: hookgate's signer",
            v.name
        );
    }
}

/// One route holding the four public keys, no key id header: each request is tried against
/// every key, and the one that verified is recorded.
fn manifests() -> String {
    let mut secret = String::from(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: rfc8032, namespace: t}\nstringData:\n",
    );
    let mut keys = String::new();
    for v in &VECTORS {
        secret += &format!("  {}: {}\n", v.name, v.public);
        keys += &format!(
            "    - {{id: {0}, secretRef: {{name: rfc8032, key: {0}}}}}\n",
            v.name
        );
    }
    format!(
        r#"{secret}---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: rfc8032, namespace: t}}
spec:
  scheme: {{type: ed25519, timestampHeader: "", eventIdHeader: "", keyIdHeader: "", signedPayload: "{{body}}", encoding: hex}}
  eventId: {{header: X-Vector}}
  keys:
{keys}  delivery: {{url: "http://127.0.0.1:1/sink"}}
"#
    )
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn rfc8032_vectors_are_accepted_over_http_and_a_flipped_bit_is_refused(pool: PgPool) {
    let h = harness_with(Inbox::Postgres(pool), &manifests());
    let served = Served::start(&h.receiver).await;
    let path = "/hooks/t/rfc8032";
    let request = |v: &Vector, signature: &[u8]| {
        vec![
            ("X-Signature".to_string(), const_hex::encode(signature)),
            ("X-Vector".to_string(), v.name.to_string()),
        ]
    };
    for v in &VECTORS {
        let (message, signature) = (bytes(v.message), bytes(v.signature));
        let before = h.receiver.inbox().counts().await.unwrap();
        let mut last_bit = signature.clone();
        *last_bit.last_mut().unwrap() ^= 0x80;
        let mut first_bit = signature.clone();
        first_bit[0] ^= 0x01;
        for (what, sig, body) in [
            ("first bit of R flipped", first_bit, message.clone()),
            ("last bit of S flipped", last_bit, message.clone()),
            (
                "message one byte longer",
                signature.clone(),
                [&message[..], b"\0"].concat(),
            ),
        ] {
            let got = served.post(path, &request(v, &sig), body).await;
            assert_eq!(got, (401, error("invalid_signature")), "{}: {what}", v.name);
            assert_eq!(
                h.receiver.inbox().counts().await.unwrap(),
                before,
                "{}: {what}",
                v.name
            );
        }
        let got = served.post(path, &request(v, &signature), message).await;
        assert_eq!(got, (200, accepted()), "{}", v.name);
    }
    let mut stored: Vec<(String, String)> = h
        .receiver
        .inbox()
        .list(&ListFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.event_id, r.key_id))
        .collect();
    stored.sort();
    let expected: Vec<(String, String)> = VECTORS
        .iter()
        .map(|v| (v.name.to_string(), v.name.to_string()))
        .collect();
    assert_eq!(stored, expected, "each vector verified by its own key");
}
