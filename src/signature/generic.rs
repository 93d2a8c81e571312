//! The configurable layout shared by the `hmac-sha256` and `ed25519` schemes: which headers carry the
//! signature, timestamp, event id and key id, and how the signed payload is assembled.

use super::{Encoding, Envelope, Rejection, header_str, parse_unix_seconds, signature_header};
use axum::http::HeaderMap;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Lit(Vec<u8>),
    Timestamp,
    EventId,
}

/// `signedPayload`, split around its single `{body}` so the body is never copied for HMAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    before: Vec<Part>,
    after: Vec<Part>,
}

impl Template {
    /// Accepts `{timestamp}`, `{event_id}` and exactly one `{body}`; anything else in braces is an
    /// error so a typo cannot silently become literal text.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut before = Vec::new();
        let mut after = Vec::new();
        let mut seen_body = false;
        let mut rest = s;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                push_lit(if seen_body { &mut after } else { &mut before }, rest);
                break;
            };
            push_lit(
                if seen_body { &mut after } else { &mut before },
                &rest[..open],
            );
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("unclosed '{{' in {s:?}"))?;
            let name = &rest[open + 1..open + close];
            let target = if seen_body { &mut after } else { &mut before };
            match name {
                "timestamp" => target.push(Part::Timestamp),
                "event_id" => target.push(Part::EventId),
                "body" if seen_body => return Err("{body} may appear only once".into()),
                "body" => seen_body = true,
                other => {
                    return Err(format!(
                        "unknown placeholder {{{other}}} (use {{timestamp}}, {{event_id}}, {{body}})"
                    ));
                }
            }
            rest = &rest[open + close + 1..];
        }
        if !seen_body {
            return Err("must contain {body}".into());
        }
        Ok(Self { before, after })
    }

    pub fn uses_timestamp(&self) -> bool {
        self.before
            .iter()
            .chain(&self.after)
            .any(|p| *p == Part::Timestamp)
    }
    pub fn uses_event_id(&self) -> bool {
        self.before
            .iter()
            .chain(&self.after)
            .any(|p| *p == Part::EventId)
    }

    /// The bytes before and after the body, with placeholders replaced by the raw header values.
    pub fn render(&self, timestamp: &[u8], event_id: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let r = |parts: &[Part]| {
            let mut out = Vec::new();
            for p in parts {
                out.extend_from_slice(match p {
                    Part::Lit(l) => l,
                    Part::Timestamp => timestamp,
                    Part::EventId => event_id,
                });
            }
            out
        };
        (r(&self.before), r(&self.after))
    }
}

fn push_lit(parts: &mut Vec<Part>, s: &str) {
    if !s.is_empty() {
        parts.push(Part::Lit(s.as_bytes().to_vec()));
    }
}

/// Header names are stored lower-case; `None` means the provider sends no such header.
#[derive(Debug, Clone)]
pub struct GenericScheme {
    pub signature_header: String,
    pub timestamp_header: Option<String>,
    pub event_id_header: Option<String>,
    pub key_id_header: Option<String>,
    pub template: Template,
    pub encoding: Encoding,
    pub signature_prefix: String,
}

impl GenericScheme {
    /// Reads everything but the signature's type: the envelope (with no candidates yet) and the
    /// decoded signature bytes, `None` when the signature header is absent.
    pub fn read(&self, headers: &HeaderMap) -> Result<(Envelope, Option<Vec<u8>>), Rejection> {
        let timestamp_raw = match &self.timestamp_header {
            Some(h) => {
                Some(header_str(headers, h)?.ok_or(Rejection::Malformed("missing_timestamp"))?)
            }
            None => None,
        };
        let timestamp = timestamp_raw.map(parse_unix_seconds).transpose()?;
        let event_id = match &self.event_id_header {
            Some(h) if self.template.uses_event_id() => {
                header_str(headers, h)?.ok_or(Rejection::Malformed("missing_event_id"))?
            }
            _ => "",
        };
        let key_id = match &self.key_id_header {
            Some(h) => Some(
                header_str(headers, h)?
                    .ok_or(Rejection::Malformed("missing_key_id"))?
                    .to_string(),
            ),
            None => None,
        };
        let signature = signature_header(
            headers,
            &self.signature_header,
            &self.signature_prefix,
            self.encoding,
        )?;
        let (prefix, suffix) = self
            .template
            .render(timestamp_raw.unwrap_or("").as_bytes(), event_id.as_bytes());
        let env = Envelope {
            timestamp,
            key_id,
            prefix,
            suffix,
            body: super::SignedBody::Raw,
            candidates: Vec::new(),
            body_timestamp: None,
            signed_id: (self.event_id_header.is_some() && self.template.uses_event_id())
                .then(|| event_id.to_string()),
        };
        Ok((env, signature))
    }

    /// Headers for a sender: the signature (already computed by the caller over `prefix ++ body ++
    /// suffix` from [`Self::payload`]) plus the timestamp, event id and key id headers.
    pub fn headers(
        &self,
        signature: &[u8],
        key_id: &str,
        timestamp: i64,
        event_id: &str,
    ) -> Vec<(String, String)> {
        let mut out = vec![(
            self.signature_header.clone(),
            format!(
                "{}{}",
                self.signature_prefix,
                self.encoding.encode(signature)
            ),
        )];
        if let Some(h) = &self.timestamp_header {
            out.push((h.clone(), timestamp.to_string()));
        }
        if let Some(h) = &self.event_id_header {
            out.push((h.clone(), event_id.to_string()));
        }
        if let Some(h) = &self.key_id_header {
            out.push((h.clone(), key_id.to_string()));
        }
        out
    }

    /// The exact bytes a sender signs.
    pub fn payload(&self, timestamp: i64, event_id: &str, body: &[u8]) -> Vec<u8> {
        let (before, after) = self
            .template
            .render(timestamp.to_string().as_bytes(), event_id.as_bytes());
        [&before[..], body, &after[..]].concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_renders_raw_values_around_the_body() {
        let t = Template::parse("{timestamp}.{event_id}.{body}").unwrap();
        assert_eq!(
            t.render(b"0017", b"evt 1"),
            (b"0017.evt 1.".to_vec(), Vec::new())
        );
        let t = Template::parse("v0:{timestamp}:{body}:end").unwrap();
        assert_eq!(t.render(b"5", b""), (b"v0:5:".to_vec(), b":end".to_vec()));
        assert!(t.uses_timestamp() && !t.uses_event_id());
    }

    #[test]
    fn template_errors_name_the_problem() {
        assert!(
            Template::parse("{timestamp}")
                .unwrap_err()
                .contains("{body}")
        );
        assert!(
            Template::parse("{body}{body}")
                .unwrap_err()
                .contains("once")
        );
        assert!(Template::parse("{ts}.{body}").unwrap_err().contains("{ts}"));
        assert!(Template::parse("{body").unwrap_err().contains("unclosed"));
    }
}
