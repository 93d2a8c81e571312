"""Signs webhook requests the way a provider's own code would, with libraries that share nothing
with hookgate: PyNaCl (libsodium) for Ed25519 and the standard library's hmac for HMAC-SHA256.
Each format is written out here from its documentation, not taken from hookgate.

Reads a JSON list of jobs on stdin and writes a JSON list of answers (same order) on stdout.
Bodies travel as base64 so that any bytes survive.

  {"kind": "discord", "seed_hex": "...", "timestamp": "1780315200", "body_b64": "..."}
      -> {"public_key_hex": "...", "headers": {"X-Signature-Ed25519": ..., "X-Signature-Timestamp": ...}}
  {"kind": "hmac", "secret": "...", "signed_payload": "{timestamp}.{event_id}.{body}",
   "timestamp": "...", "event_id": "...", "body_b64": "...", "encoding": "hex" | "base64",
   "prefix": "sha256="}
      -> {"signature": "<prefix><encoded HMAC-SHA256>"}
"""

import base64
import hashlib
import hmac
import json
import sys


def discord(job):
    # Imported here so that the HMAC jobs need nothing but the standard library.
    from nacl.signing import SigningKey

    key = SigningKey(bytes.fromhex(job["seed_hex"]))
    timestamp = job["timestamp"]
    body = base64.b64decode(job["body_b64"])
    # Discord: Ed25519 over the timestamp header's text followed by the raw body, hex-encoded.
    signed = key.sign(timestamp.encode() + body)
    return {
        "public_key_hex": key.verify_key.encode().hex(),
        "headers": {
            "X-Signature-Ed25519": signed.signature.hex(),
            "X-Signature-Timestamp": timestamp,
        },
    }


def render(template, timestamp, event_id, body):
    # The documented signedPayload: {timestamp} and {event_id} are the raw header texts, {body}
    # the raw body, everything else literal.
    before, after = template.split("{body}")

    def fill(text):
        return text.replace("{timestamp}", timestamp).replace("{event_id}", event_id).encode()

    return fill(before) + body + fill(after)


def hmac_job(job):
    body = base64.b64decode(job["body_b64"])
    payload = render(job["signed_payload"], job.get("timestamp", ""), job.get("event_id", ""), body)
    digest = hmac.new(job["secret"].encode(), payload, hashlib.sha256).digest()
    if job["encoding"] == "hex":
        encoded = digest.hex()
    else:
        encoded = base64.b64encode(digest).decode()
    return {"signature": job.get("prefix", "") + encoded}


def main():
    jobs = json.load(sys.stdin)
    kinds = {"discord": discord, "hmac": hmac_job}
    json.dump([kinds[job["kind"]](job) for job in jobs], sys.stdout)


if __name__ == "__main__":
    main()
