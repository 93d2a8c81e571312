"""Signs webhooks with the providers' own Python libraries, for tests/it/signers_providers.rs.

Where a provider's SDK can sign (Twilio's RequestValidator, Slack's SignatureVerifier) it signs.
Where it can only verify (SendGrid's EventWebhook, Paddle's PaddleSignature, Square's
webhooks_helper) the request is built from the provider's documented format with the standard
library or `cryptography`, and the SDK must accept it before it is handed back: a request the SDK
refuses fails here, not in hookgate. Discord signs with PyNaCl (libsodium). Twitch, Zoom, Meta,
Linear and GitLab ship no Python helper; their requests are built with `hmac` from the documented
formats. Nothing here is taken from hookgate.

Reads a JSON list of jobs on stdin, writes a JSON list of answers (same order) on stdout. Bodies
travel as base64. Every answer has `headers`; some add `query` (to append to the path),
`public_key` (what the integration's Secret must hold), `event_id` (the id hookgate must store when
it is a digest of the signature) and `encrypted_token` (Zoom's handshake answer).
"""

import base64
import contextlib
import hashlib
import hmac
import json
import sys
from urllib.parse import parse_qsl


def body_of(job):
    return base64.b64decode(job["body_b64"])


def digest_id(signature_bytes):
    # hookgate's id for events without one: hex SHA-256 of the signature bytes that matched.
    return hashlib.sha256(signature_bytes).hexdigest()


def must(ok, what):
    # Not `assert`: the checks must hold under `python3 -O` too.
    if not ok:
        raise SystemExit("providers.py: " + what)


class Params(dict):
    """Form parameters with repeats, read through `getall` as RequestValidator reads Flask's."""

    def getall(self, name):
        return self[name]


def twilio_form(job):
    from twilio.request_validator import RequestValidator

    validator = RequestValidator(job["secret"])
    url = job["url"] + ("?" + job["query"] if job.get("query") else "")
    params = Params()
    for name, value in parse_qsl(body_of(job).decode(), keep_blank_values=True):
        params.setdefault(name, []).append(value)
    signature = validator.compute_signature(url, params)
    must(validator.validate(url, params, signature), "twilio: the SDK refuses its own signature")
    return {
        "headers": {"X-Twilio-Signature": signature, "I-Twilio-Idempotency-Token": job["event_id"]},
        "query": job.get("query", ""),
    }


def twilio_json(job):
    from twilio.request_validator import RequestValidator

    validator = RequestValidator(job["secret"])
    body = body_of(job).decode()
    # Twilio's JSON webhooks: the body's SHA-256 goes in the URL, and the URL alone is signed.
    query = "bodySHA256=" + validator.compute_hash(body)
    url = job["url"] + "?" + query
    signature = validator.compute_signature(url, {})
    must(validator.validate(url, body, signature), "twilio: the SDK refuses its own signature")
    return {
        "headers": {"X-Twilio-Signature": signature, "I-Twilio-Idempotency-Token": job["event_id"]},
        "query": query,
    }


def slack(job):
    from slack_sdk.signature import Clock, SignatureVerifier

    class Fixed(Clock):
        def now(self):
            return float(job["timestamp"])

    verifier = SignatureVerifier(job["secret"], clock=Fixed())
    body = body_of(job)
    signature = verifier.generate_signature(timestamp=job["timestamp"], body=body)
    must(verifier.is_valid(body, job["timestamp"], signature), "slack: the SDK refuses its own")
    return {
        "headers": {"X-Slack-Signature": signature, "X-Slack-Request-Timestamp": job["timestamp"]}
    }


def sendgrid(job):
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    from sendgrid.helpers.eventwebhook import EventWebhook

    private = ec.derive_private_key(int(job["scalar_hex"], 16), ec.SECP256R1())
    public_der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    public_b64 = base64.b64encode(public_der).decode()
    body = body_of(job)
    # SendGrid: ECDSA P-256/SHA-256 over the timestamp header's text then the raw body; DER, base64.
    der = private.sign(job["timestamp"].encode() + body, ec.ECDSA(hashes.SHA256()))
    signature = base64.b64encode(der).decode()
    accepted = EventWebhook(public_b64).verify_signature(body.decode(), signature, job["timestamp"])
    must(accepted, "sendgrid: EventWebhook refuses the signature")
    # The nonce hookgate keeps is the low-s form r || s (so a flipped copy is a replay too).
    r, s = decode_dss_signature(der)
    n = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
    s = min(s, n - s)
    return {
        "public_key": public_b64,
        "headers": {
            "X-Twilio-Email-Event-Webhook-Signature": signature,
            "X-Twilio-Email-Event-Webhook-Timestamp": job["timestamp"],
        },
        "event_id": digest_id(r.to_bytes(32, "big") + s.to_bytes(32, "big")),
    }


def discord(job):
    from nacl.signing import SigningKey

    key = SigningKey(bytes.fromhex(job["seed_hex"]))
    signed = key.sign(job["timestamp"].encode() + body_of(job))
    return {
        "public_key": key.verify_key.encode().hex(),
        "headers": {
            "X-Signature-Ed25519": signed.signature.hex(),
            "X-Signature-Timestamp": job["timestamp"],
        },
    }


def mac(secret, message):
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


def paddle(job):
    from paddle_billing.Notifications import PaddleSignature, Secret

    body = body_of(job)
    ts = job["timestamp"]
    header = "ts=%s;h1=%s" % (ts, mac(job["secret"], ts.encode() + b":" + body).hex())
    accepted = PaddleSignature().verify(header, body.decode(), Secret(job["secret"]))
    must(accepted, "paddle: the SDK refuses the signature")
    return {"headers": {"Paddle-Signature": header}}


def square(job):
    try:
        from square.utils.webhooks_helper import verify_signature
    except ImportError:  # squareup before 42 named it differently
        from square.utilities.webhooks_helper import is_valid_webhook_event_signature

        def verify_signature(request_body, signature_header, signature_key, notification_url):
            return is_valid_webhook_event_signature(
                request_body, signature_header, signature_key, notification_url
            )

    body = body_of(job)
    signature = base64.b64encode(mac(job["secret"], job["url"].encode() + body)).decode()
    accepted = verify_signature(
        request_body=body.decode(),
        signature_header=signature,
        signature_key=job["secret"],
        notification_url=job["url"],
    )
    must(accepted, "square: the SDK refuses the signature")
    return {"headers": {"x-square-hmacsha256-signature": signature}}


def twitch(job):
    body = body_of(job)
    message = (job["event_id"] + job["rfc3339"]).encode() + body
    return {
        "headers": {
            "Twitch-Eventsub-Message-Id": job["event_id"],
            "Twitch-Eventsub-Message-Timestamp": job["rfc3339"],
            "Twitch-Eventsub-Message-Signature": "sha256=" + mac(job["secret"], message).hex(),
            "Twitch-Eventsub-Message-Type": "notification",
            "Twitch-Eventsub-Subscription-Type": job["event_type"],
        }
    }


def zoom(job):
    body = body_of(job)
    tag = mac(job["secret"], b"v0:" + job["timestamp"].encode() + b":" + body)
    answer = {
        "headers": {
            "x-zm-signature": "v0=" + tag.hex(),
            "x-zm-request-timestamp": job["timestamp"],
        },
        "event_id": digest_id(tag),
    }
    plain = json.loads(body).get("payload", {}).get("plainToken")
    if plain is not None:
        answer["encrypted_token"] = mac(job["secret"], plain.encode()).hex()
    return answer


def meta(job):
    tag = mac(job["secret"], body_of(job))
    return {"headers": {"X-Hub-Signature-256": "sha256=" + tag.hex()}, "event_id": digest_id(tag)}


def linear(job):
    return {
        "headers": {
            "Linear-Signature": mac(job["secret"], body_of(job)).hex(),
            "Linear-Delivery": job["event_id"],
            "Linear-Event": job["event_type"],
        }
    }


def gitlab(job):
    # GitLab signs nothing: it sends the configured token as is.
    return {
        "headers": {
            "X-Gitlab-Token": job["secret"],
            "X-Gitlab-Event-UUID": job["event_id"],
            "X-Gitlab-Event": job["event_type"],
        }
    }


KINDS = {
    "twilio_form": twilio_form,
    "twilio_json": twilio_json,
    "slack": slack,
    "sendgrid": sendgrid,
    "discord": discord,
    "paddle": paddle,
    "square": square,
    "twitch": twitch,
    "zoom": zoom,
    "meta": meta,
    "linear": linear,
    "gitlab": gitlab,
}


def main():
    jobs = json.load(sys.stdin)
    # The SDKs may log; only the answers go to stdout.
    with contextlib.redirect_stdout(sys.stderr):
        answers = [KINDS[job["kind"]](job) for job in jobs]
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
