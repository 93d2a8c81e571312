//! What a worker pool reports when it stops: the claims it still held after the grace period and
//! what became of them. Its last log line says the same, so an operator can tell a clean stop from
//! one whose events wait for their lease.

/// What a stopping pool did with the claims it still held after the grace period (deliveries cut
/// off, handed-over events never started): given back at once, or left to their lease.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stopped {
    /// Claims held when the pool stopped.
    pub held: u64,
    /// Of those, the ones given back. The others were ended or re-claimed elsewhere meanwhile
    /// (their lease had expired), or the release failed.
    pub released: u64,
    /// Why releasing failed: those events return when their lease expires.
    pub failed: Option<String>,
}

impl Stopped {
    /// `held` claims, and what releasing them returned.
    pub(super) fn after_release(held: u64, released: crate::inbox::Result<u64>) -> Self {
        match released {
            Ok(released) => Self {
                held,
                released,
                failed: None,
            },
            Err(e) => Self {
                held,
                released: 0,
                failed: Some(e.to_string()),
            },
        }
    }

    pub(super) fn log(&self) {
        let (held, released) = (self.held, self.released);
        match &self.failed {
            Some(error) => tracing::warn!(
                held,
                error = %error,
                "could not release claims; they return after their lease"
            ),
            None if held > 0 => {
                tracing::info!(
                    held,
                    released,
                    "worker stopped; claims still held were released"
                )
            }
            None => tracing::info!("worker stopped; no claim was still held"),
        }
    }
}
