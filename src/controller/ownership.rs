//! Who owns a public path when integrations in different namespaces claim the same one.
//!
//! A path belongs to the integration that claimed it first: the earliest `creationTimestamp`,
//! then the smaller uid. The controller refuses later claimants (`PathConflict`), and receivers
//! and workers apply the same rule to the compiled routes they see, so that a route written in a
//! race, or by an older controller, can never take a path from its owner.

use chrono::{DateTime, Utc};
use std::cmp::Ordering;

/// One integration's claim on a path, as recorded on its compiled route Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// `namespace/name`
    pub integration: String,
    pub path: String,
    /// `None` for a route written before claims were recorded: it yields to every dated claim.
    pub claimed_at: Option<DateTime<Utc>>,
    pub uid: String,
}

impl Claim {
    /// Earlier claims sort first; ties are broken by uid, then by name (always total).
    pub fn precedence(&self, other: &Claim) -> Ordering {
        let dated = |c: &Claim| (c.claimed_at.is_none(), c.claimed_at);
        dated(self)
            .cmp(&dated(other))
            .then_with(|| self.uid.cmp(&other.uid))
            .then_with(|| self.integration.cmp(&other.integration))
    }
}

/// The claim that owns `mine.path`, when it is another integration's.
pub fn owner_other_than<'a>(mine: &Claim, claims: &'a [Claim]) -> Option<&'a Claim> {
    claims
        .iter()
        .filter(|c| c.path == mine.path && c.integration != mine.integration)
        .filter(|c| c.precedence(mine) == Ordering::Less)
        .min_by(|a, b| a.precedence(b))
}

/// Indices of `claims` that win their path, in precedence order; the rest lose.
pub fn winners(claims: &[Claim]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..claims.len()).collect();
    order.sort_by(|&a, &b| claims[a].precedence(&claims[b]));
    let mut taken: Vec<&str> = Vec::new();
    order
        .into_iter()
        .filter(|&i| {
            let free = !taken.contains(&claims[i].path.as_str());
            if free {
                taken.push(&claims[i].path);
            }
            free
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(integration: &str, path: &str, at: Option<&str>, uid: &str) -> Claim {
        Claim {
            integration: integration.into(),
            path: path.into(),
            claimed_at: at.map(|t| t.parse().unwrap()),
            uid: uid.into(),
        }
    }

    #[test]
    fn the_first_claim_owns_the_path_whatever_the_names() {
        let owner = claim("z/stripe", "/hooks/p", Some("2026-01-01T00:00:00Z"), "u2");
        let newcomer = claim("a/stripe", "/hooks/p", Some("2026-02-01T00:00:00Z"), "u1");
        let other_path = claim("b/x", "/hooks/q", Some("2025-01-01T00:00:00Z"), "u0");
        let all = [newcomer.clone(), owner.clone(), other_path.clone()];
        assert_eq!(owner_other_than(&newcomer, &all), Some(&owner));
        assert_eq!(
            owner_other_than(&owner, &all),
            None,
            "the owner is not in conflict"
        );
        assert_eq!(owner_other_than(&other_path, &all), None);
        let mut won: Vec<&str> = winners(&all)
            .iter()
            .map(|&i| all[i].integration.as_str())
            .collect();
        won.sort();
        assert_eq!(won, ["b/x", "z/stripe"]);
    }

    #[test]
    fn same_second_claims_are_ordered_by_uid_and_undated_ones_come_last() {
        let t = Some("2026-01-01T00:00:00Z");
        let a = claim("a/x", "/p", t, "bbb");
        let b = claim("b/x", "/p", t, "aaa");
        let legacy = claim("c/x", "/p", None, "000");
        let all = [a.clone(), legacy.clone(), b.clone()];
        assert_eq!(owner_other_than(&a, &all), Some(&b));
        assert_eq!(owner_other_than(&legacy, &all), Some(&b));
        assert_eq!(winners(&all), [2]);
    }

    #[test]
    fn deleting_the_owner_hands_the_path_to_the_next_claimant() {
        let first = claim("a/x", "/p", Some("2026-01-01T00:00:00Z"), "1");
        let second = claim("b/x", "/p", Some("2026-01-02T00:00:00Z"), "2");
        let third = claim("c/x", "/p", Some("2026-01-03T00:00:00Z"), "3");
        assert_eq!(
            owner_other_than(&second, &[first.clone(), third.clone()]),
            Some(&first)
        );
        assert_eq!(
            owner_other_than(&second, std::slice::from_ref(&third)),
            None
        );
        assert_eq!(
            owner_other_than(&third, std::slice::from_ref(&second)),
            Some(&second)
        );
    }
}
