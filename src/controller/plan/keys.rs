//! What status and events say about key phases, around the phase rules in
//! [`crate::controller::phases`].

use super::Note;
use crate::controller::phases::{KeysPlan, Phase, PhaseChange};
use crate::crd::KeyStatus;

pub(super) const NO_ACTIVE_KEY: &str = "every key is retired";

/// The previous key status the phase rules start from. Retirement recorded outside status (on
/// the compiled route) survives a lost or restored status: such a key is Retired whatever the
/// status says.
pub(super) fn previous(status: &[KeyStatus], retired: &[String]) -> Vec<KeyStatus> {
    let mut previous = status.to_vec();
    for id in retired {
        match previous.iter_mut().find(|k| &k.id == id) {
            Some(k) => k.phase = Phase::Retired.as_str().to_string(),
            None => previous.push(KeyStatus {
                id: id.clone(),
                phase: Phase::Retired.as_str().to_string(),
                since: None,
                retire_at: None,
                last_used_at: None,
            }),
        }
    }
    previous
}

/// One Normal event per key whose phase changed.
pub(super) fn phase_notes(changes: &[PhaseChange]) -> Vec<Note> {
    changes
        .iter()
        .filter(|c| c.from != Some(c.to))
        .map(|c| {
            let (reason, verb) = match c.to {
                Phase::Active => ("KeyActivated", "is now the active key"),
                Phase::Retiring => (
                    "KeyRetiring",
                    "is retiring: still accepted until its retire time",
                ),
                Phase::Retired => (
                    "KeyRetired",
                    "is retired: signatures made with it are rejected",
                ),
            };
            Note::normal(reason, format!("key {} {verb}", c.id))
        })
        .collect()
}

/// The RetiringKeyInUse message, when a retiring key still has senders.
pub(super) fn in_use(ids: &[String]) -> Option<String> {
    (!ids.is_empty()).then(|| {
        format!(
            "retiring key(s) {} still used within the last hour",
            ids.join(", ")
        )
    })
}

/// (key id, phase) of each key in `status`, for the `hookgate_key_phase` series. A phase that is
/// not one of the three (a hand-edited status kept by a refused plan) is left out, so the label
/// takes three values at most.
pub fn phase_series(status: &[KeyStatus]) -> Vec<(&str, &'static str)> {
    status
        .iter()
        .filter_map(|k| Some((k.id.as_str(), Phase::parse(&k.phase)?.as_str())))
        .collect()
}

/// Spec key ids that are retired: recorded on the compiled route so they stay retired.
pub(super) fn retired(keys: &KeysPlan) -> Vec<String> {
    keys.keys
        .iter()
        .filter(|k| k.phase == Phase::Retired)
        .map(|k| k.id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(id: &str, phase: &str) -> KeyStatus {
        KeyStatus {
            id: id.into(),
            phase: phase.into(),
            since: Some("2026-12-01T00:00:00Z".into()),
            ..Default::default()
        }
    }

    /// `a:Active b:Retired`
    fn show(keys: &[KeyStatus]) -> String {
        let key = |k: &KeyStatus| format!("{}:{}", k.id, k.phase);
        keys.iter().map(key).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn retirement_recorded_on_the_route_overrides_status() {
        let cases = [
            (vec![], "", ""),
            (vec![status("a", "Active")], "", "a:Active"),
            (vec![status("a", "Active")], "a", "a:Retired"),
            (vec![status("b", "Active")], "a", "b:Active a:Retired"),
        ];
        for (status, retired, want) in cases {
            let retired: Vec<String> = retired.split_terminator(',').map(String::from).collect();
            assert_eq!(show(&previous(&status, &retired)), want);
        }
        let lost = previous(&[], &["a".into()]);
        assert_eq!(
            (lost[0].since.as_ref(), lost[0].retire_at.as_ref()),
            (None, None)
        );
    }

    #[test]
    fn one_event_per_phase_change() {
        let change = |id: &str, from, to| PhaseChange {
            id: id.into(),
            from,
            to,
        };
        let changes = [
            change("a", None, Phase::Active),
            change("b", Some(Phase::Active), Phase::Retiring),
            change("c", Some(Phase::Retiring), Phase::Retired),
            change("d", Some(Phase::Retired), Phase::Retired),
        ];
        let notes: Vec<(bool, &str, String)> = phase_notes(&changes)
            .into_iter()
            .map(|n| (n.warning, n.reason, n.note))
            .collect();
        let want = [
            (false, "KeyActivated", "key a is now the active key"),
            (
                false,
                "KeyRetiring",
                "key b is retiring: still accepted until its retire time",
            ),
            (
                false,
                "KeyRetired",
                "key c is retired: signatures made with it are rejected",
            ),
        ];
        let want: Vec<_> = want.map(|(w, r, n)| (w, r, n.to_string())).into();
        assert_eq!(notes, want);
    }

    #[test]
    fn phase_series_name_each_key_once_with_a_known_phase() {
        let keys = [
            status("a", "Retiring"),
            status("b", "Active"),
            status("c", "Retired"),
            status("d", "Sunset"),
        ];
        let want = [("a", "Retiring"), ("b", "Active"), ("c", "Retired")];
        assert_eq!(phase_series(&keys), want);
        assert!(phase_series(&[]).is_empty());
    }

    #[test]
    fn retiring_keys_in_use_are_named() {
        assert_eq!(in_use(&[]), None);
        let ids = ["a".to_string(), "b".to_string()];
        let want = "retiring key(s) a, b still used within the last hour";
        assert_eq!(in_use(&ids).as_deref(), Some(want));
    }
}
