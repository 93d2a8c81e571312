//! What goes into the inbox and what comes out of it.

use super::Claimed;
use crate::signature::Verified;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Processing,
    Retry,
    Processed,
    DeadLetter,
    Ignored,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Pending,
        Status::Processing,
        Status::Retry,
        Status::Processed,
        Status::DeadLetter,
        Status::Ignored,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Processing => "processing",
            Status::Retry => "retry",
            Status::Processed => "processed",
            Status::DeadLetter => "dead_letter",
            Status::Ignored => "ignored",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown status {s:?} (one of pending, processing, retry, processed, dead_letter, ignored)"))
    }
}

/// How an event reached the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// A signed request to the receiver.
    Webhook,
    /// Listed by the provider's API during catch-up (`spec.catchUp`), with the integration's
    /// API credential; no signature.
    CatchUp,
}

impl Arrival {
    pub fn as_str(self) -> &'static str {
        match self {
            Arrival::Webhook => "webhook",
            Arrival::CatchUp => "catch_up",
        }
    }
}

/// An event ready to store: a verified request ([`NewEvent::new`], which takes a [`Verified`])
/// or an event the provider's own API listed ([`NewEvent::caught_up`]). It owns its data (the
/// body is a shared `Bytes`) so it can wait in the group-commit queue.
#[derive(Debug)]
pub struct NewEvent {
    pub(super) key_id: String,
    /// The provider's timestamp: the signed one, or a listed event's creation time.
    pub(super) signed_at: Option<DateTime<Utc>>,
    pub(super) arrival: Arrival,
    /// `secret/key` of the API credential of a caught-up event (never its value).
    pub(super) credential: Option<String>,
    pub(super) integration: String,
    pub(super) scheme: &'static str,
    pub(super) event_id: String,
    pub(super) event_type: Option<String>,
    pub(super) headers: super::StoredHeaders,
    pub(super) content_type: Option<String>,
    pub(super) body: bytes::Bytes,
    pub(super) body_sha256: [u8; 32],
    pub(super) status: Status,
    /// Set with status `dead_letter` when the receiver dead-letters the event itself.
    pub(super) last_error: Option<String>,
    pub(super) received_at: DateTime<Utc>,
    pub(super) nonce_expires_at: DateTime<Utc>,
    /// Whether the signature digest must be remembered: only when the event id is not covered by
    /// the signature. A signed id already turns every re-sent capture into a duplicate.
    pub(super) needs_nonce: bool,
    /// The signature digest, computed only when it is needed.
    pub(super) digest: [u8; 32],
    /// Set when the event is stored leased to this process's workers ([`super::Handoff`]).
    pub(super) lease_until: Option<DateTime<Utc>>,
}

fn initial(ignored: bool) -> Status {
    if ignored {
        Status::Ignored
    } else {
        Status::Pending
    }
}

impl NewEvent {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        verified: Verified,
        integration: &str,
        scheme: &'static str,
        event_id: String,
        event_type: Option<String>,
        headers: super::StoredHeaders,
        content_type: Option<String>,
        body: bytes::Bytes,
        ignored: bool,
        received_at: DateTime<Utc>,
        nonce_retention: std::time::Duration,
        id_signed: bool,
    ) -> Self {
        use sha2::Digest;
        let needs_nonce = !id_signed && verified.signed_id() != Some(event_id.as_str());
        let digest = if needs_nonce {
            verified.signature_digest()
        } else {
            [0; 32]
        };
        Self {
            body_sha256: sha2::Sha256::digest(&body).into(),
            key_id: verified.key_id().to_string(),
            signed_at: verified
                .timestamp()
                .and_then(|t| DateTime::<Utc>::from_timestamp(t, 0)),
            arrival: Arrival::Webhook,
            credential: None,
            integration: integration.to_string(),
            scheme,
            event_id,
            event_type,
            headers,
            content_type,
            body,
            status: initial(ignored),
            last_error: None,
            received_at,
            nonce_expires_at: crate::time::after(received_at, nonce_retention),
            digest,
            needs_nonce,
            lease_until: None,
        }
    }

    /// An event listed by the provider's API during catch-up: stored under the same dedupe key a
    /// webhook would have, with no key id (no signature verified it) and `created` as its
    /// provider timestamp, so completion latency counts from when the provider created it.
    #[allow(clippy::too_many_arguments)]
    pub fn caught_up(
        integration: &str,
        scheme: &'static str,
        event_id: String,
        event_type: Option<String>,
        body: bytes::Bytes,
        created: Option<DateTime<Utc>>,
        credential: &str,
        ignored: bool,
        received_at: DateTime<Utc>,
    ) -> Self {
        use sha2::Digest;
        Self {
            body_sha256: sha2::Sha256::digest(&body).into(),
            // Key ids are 1 to 64 characters: the empty id can never be mistaken for a key's.
            key_id: String::new(),
            signed_at: created,
            arrival: Arrival::CatchUp,
            credential: Some(credential.to_string()),
            integration: integration.to_string(),
            scheme,
            event_id,
            event_type,
            headers: super::StoredHeaders::none(),
            content_type: Some("application/json".into()),
            body,
            status: initial(ignored),
            last_error: None,
            received_at,
            nonce_expires_at: received_at,
            digest: [0; 32],
            // No signature, so no nonce: the id alone dedupes.
            needs_nonce: false,
            lease_until: None,
        }
    }
}

impl NewEvent {
    /// Stored straight as a dead letter with `reason` (an unsupported event version): never
    /// claimed by a worker until someone replays it. An ignored event stays ignored.
    pub fn dead_lettered(mut self, reason: String) -> Self {
        if self.status == Status::Pending {
            self.status = Status::DeadLetter;
            self.last_error = Some(reason);
        }
        self
    }

    /// Stored as `processing`, leased to this process's workers until `until` (attempt 1), as a
    /// claim would have left it. Only an event to deliver is leased; any other is unchanged.
    pub fn leased(mut self, until: DateTime<Utc>) -> Self {
        if self.status == Status::Pending {
            self.status = Status::Processing;
            self.lease_until = Some(until);
        }
        self
    }

    /// The claim a leased event's row `id` stands for, as [`super::Inbox::claim`] would return it.
    pub fn claimed(&self, id: i64) -> Option<Claimed> {
        Some(Claimed {
            id,
            integration: self.integration.clone(),
            event_id: self.event_id.clone(),
            event_type: self.event_type.clone(),
            headers: self.headers.clone(),
            content_type: self.content_type.clone(),
            body: self.body.clone(),
            attempt: 1,
            lease_until: self.lease_until?,
            received_at: self.received_at,
            signed_at: self.signed_at,
            due_at: Some(self.received_at),
        })
    }

    pub fn body_len(&self) -> usize {
        self.body.len()
    }

    pub fn event_id(&self) -> &str {
        &self.event_id
    }
    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }
    pub fn key_id(&self) -> &str {
        &self.key_id
    }
    pub fn arrival(&self) -> Arrival {
        self.arrival
    }
}

/// The domain outcome of an insert. Unique-key collisions are outcomes, not errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    /// A new row was committed.
    Inserted { id: i64 },
    /// Same integration and event id, same body: a provider retry.
    Duplicate,
    /// Same integration and event id with a different body: answered as a duplicate, counted.
    Conflict,
    /// The signature was already seen within the nonce window: a re-sent capture.
    Replay,
}

#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub integration: Option<String>,
    pub status: Option<Status>,
    pub limit: i64,
}

/// One inbox row without its body or headers (read by column name).
#[derive(Debug, Clone, Serialize, PartialEq, sqlx::FromRow)]
pub struct EventSummary {
    pub id: i64,
    pub integration: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub status: String,
    pub scheme: String,
    pub key_id: String,
    pub attempts: i64,
    pub signed_at: Option<DateTime<Utc>>,
    pub received_at: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub processed_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub dedupe_conflicts: i64,
}
