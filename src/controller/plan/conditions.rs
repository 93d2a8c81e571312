//! Status conditions. A condition keeps its `lastTransitionTime` while its status holds, so that
//! time says when something changed, not when the controller last looked.

use super::{Note, Plan, RETRY_MISSING, keys};
use crate::crd::Condition;
use chrono::{DateTime, SecondsFormat, Utc};

pub(super) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// What every condition of one reconcile is stamped with.
pub(super) struct Conditions<'a> {
    prev: &'a [Condition],
    generation: Option<i64>,
    now: DateTime<Utc>,
}

impl<'a> Conditions<'a> {
    pub fn new(prev: &'a [Condition], generation: Option<i64>, now: DateTime<Utc>) -> Self {
        Self {
            prev,
            generation,
            now,
        }
    }

    pub fn get(&self, type_: &str, ok: bool, reason: &str, message: String) -> Condition {
        let status = if ok { "True" } else { "False" };
        let since = self
            .prev
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| rfc3339(self.now));
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: since,
            observed_generation: self.generation,
        }
    }

    /// Ready, KeysReady and RouteProgrammed once the route is programmed: Ready follows whether
    /// a key is active.
    pub fn programmed(&self, active: Option<&str>) -> Vec<Condition> {
        let (ready, keys) = match active {
            Some(id) => (
                self.get("Ready", true, "Ready", String::new()),
                self.get("KeysReady", true, "KeysReady", format!("active key {id}")),
            ),
            None => {
                let msg = keys::NO_ACTIVE_KEY.to_string();
                (
                    self.get("Ready", false, "NoActiveKey", msg.clone()),
                    self.get("KeysReady", false, "NoActiveKey", msg),
                )
            }
        };
        let route = self.get("RouteProgrammed", true, "RouteProgrammed", String::new());
        vec![ready, keys, route]
    }

    /// Ready, KeysReady and RouteProgrammed when the route is not programmed for `reason`;
    /// `keys_ok` when the keys themselves are not what is wrong.
    pub fn refused(&self, keys_ok: bool, reason: &str, message: &str) -> Vec<Condition> {
        let keys = match keys_ok {
            true => self.get("KeysReady", true, "KeysReady", String::new()),
            false => self.get("KeysReady", false, reason, message.into()),
        };
        vec![
            self.get("Ready", false, reason, message.into()),
            keys,
            self.get("RouteProgrammed", false, reason, message.into()),
        ]
    }
}

/// What status says when the API server refused to store the compiled route (too large,
/// invalid): any 4xx but a conflict, since the same request would be refused again. `None` for
/// failures a retry may resolve. The server's message names the object, never a Secret's values.
pub fn refused_route(error: &kube::Error) -> Option<String> {
    match error {
        kube::Error::Api(e) if (400..500).contains(&e.code) && e.code != 409 => {
            Some(format!("the compiled route was refused: {}", e.message))
        }
        _ => None,
    }
}

/// The route could not be written: Ready and RouteProgrammed turn False with the reason, and the
/// reconcile comes back soon.
pub fn route_refused(plan: &mut Plan, message: String) {
    for c in plan.status.conditions.iter_mut() {
        if c.type_ == "Ready" || c.type_ == "RouteProgrammed" {
            c.status = "False".into();
            c.reason = "RouteRejected".into();
            c.message = message.clone();
        }
    }
    plan.notes.push(Note::warning("RouteRejected", message));
    plan.requeue_after = plan.requeue_after.min(RETRY_MISSING);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn show(cs: &[Condition]) -> Vec<String> {
        let show = |c: &Condition| {
            let at = &c.last_transition_time[11..19];
            format!("{}={}:{}:{}@{at}", c.type_, c.status, c.reason, c.message)
        };
        cs.iter().map(show).collect()
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let before = Conditions::new(&[], Some(1), at("2026-12-01T10:00:00Z"));
        let prev = before.programmed(Some("v1"));
        let later = Conditions::new(&prev, Some(2), at("2026-12-01T11:00:00Z"));
        let cases = [
            (later.programmed(Some("v2")), "Ready=True:Ready:@10:00:00"),
            (
                later.programmed(None),
                "Ready=False:NoActiveKey:every key is retired@11:00:00",
            ),
            (
                later.refused(true, "PathConflict", "taken"),
                "Ready=False:PathConflict:taken@11:00:00",
            ),
        ];
        for (conditions, ready) in cases {
            assert_eq!(show(&conditions)[0], ready);
            assert!(conditions.iter().all(|c| c.observed_generation == Some(2)));
        }
    }

    #[test]
    fn the_three_conditions_of_each_outcome() {
        let c = Conditions::new(&[], None, at("2026-12-01T10:00:00Z"));
        let cases = [
            (
                c.programmed(Some("v1")),
                [
                    "Ready=True:Ready:@10:00:00",
                    "KeysReady=True:KeysReady:active key v1@10:00:00",
                    "RouteProgrammed=True:RouteProgrammed:@10:00:00",
                ],
            ),
            (
                c.refused(true, "PathConflict", "taken"),
                [
                    "Ready=False:PathConflict:taken@10:00:00",
                    "KeysReady=True:KeysReady:@10:00:00",
                    "RouteProgrammed=False:PathConflict:taken@10:00:00",
                ],
            ),
            (
                c.refused(false, "SecretNotFound", "gone"),
                [
                    "Ready=False:SecretNotFound:gone@10:00:00",
                    "KeysReady=False:SecretNotFound:gone@10:00:00",
                    "RouteProgrammed=False:SecretNotFound:gone@10:00:00",
                ],
            ),
        ];
        for (conditions, want) in cases {
            assert_eq!(show(&conditions), want);
        }
    }

    #[test]
    fn only_answers_a_retry_cannot_change_refuse_the_route() {
        let api = |code| {
            kube::Error::Api(
                kube::core::Status::failure("too large", "x")
                    .with_code(code)
                    .boxed(),
            )
        };
        let cases = [
            (api(422), Some("the compiled route was refused: too large")),
            (api(413), Some("the compiled route was refused: too large")),
            (api(400), Some("the compiled route was refused: too large")),
            (api(409), None),
            (api(500), None),
            (api(503), None),
            (kube::Error::LinesCodecMaxLineLengthExceeded, None),
        ];
        for (error, want) in cases {
            assert_eq!(refused_route(&error).as_deref(), want, "{error}");
        }
    }

    #[test]
    fn a_refused_route_turns_ready_false_and_comes_back_within_a_minute() {
        let c = Conditions::new(&[], None, at("2026-12-01T10:00:00Z"));
        let mut plan = Plan {
            status: Default::default(),
            manifests: None,
            remove_route: false,
            retired: Vec::new(),
            notes: Vec::new(),
            requeue_after: super::super::RESYNC,
        };
        plan.status.conditions = c.programmed(Some("v1"));
        route_refused(&mut plan, "too large".into());
        let want = [
            "Ready=False:RouteRejected:too large@10:00:00",
            "KeysReady=True:KeysReady:active key v1@10:00:00",
            "RouteProgrammed=False:RouteRejected:too large@10:00:00",
        ];
        assert_eq!(show(&plan.status.conditions), want);
        assert_eq!(
            plan.notes,
            [Note::warning("RouteRejected", "too large".into())]
        );
        assert_eq!(plan.requeue_after, RETRY_MISSING);
    }
}
