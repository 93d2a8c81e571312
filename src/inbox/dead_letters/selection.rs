//! The rows a replay or purge acts on, as extra conditions of its statements: generated SQL with
//! numbered placeholders, a long list of ids split over several statements.

use super::{DEAD_AT, ReplaySelector};
use chrono::{DateTime, Utc};

/// Ids per statement when a selection is a list of ids (well under every bind-parameter limit).
const IDS_PER_STATEMENT: usize = 500;

/// A bind parameter of a generated statement.
#[derive(Debug, Clone, Copy)]
pub(super) enum Param<'a> {
    Id(i64),
    Text(&'a str),
    Time(Option<DateTime<Utc>>),
}

/// Binds `$params` in order onto the query `$q` (for whichever backend it was built).
macro_rules! bind_params {
    ($q:expr, $params:expr) => {{
        let mut q = $q;
        for p in $params {
            q = match *p {
                Param::Id(v) => q.bind(v),
                Param::Text(v) => q.bind(v),
                Param::Time(v) => q.bind(v),
            };
        }
        q
    }};
}

/// `("$first, $first+1, ...", params)` for each chunk of `ids`.
pub(super) fn id_chunks(ids: &[i64], first: usize) -> Vec<(String, Vec<Param<'static>>)> {
    ids.chunks(IDS_PER_STATEMENT)
        .map(|chunk| {
            let list = (0..chunk.len())
                .map(|i| format!("${}", first + i))
                .collect::<Vec<_>>()
                .join(", ");
            (list, chunk.iter().map(|&id| Param::Id(id)).collect())
        })
        .collect()
}

/// The extra `AND ...` condition(s) of a selection, with placeholders numbered from `first`: one
/// entry per statement to run (a long id list is split). An empty id list selects nothing.
pub(super) fn selection(sel: &ReplaySelector, first: usize) -> Vec<(String, Vec<Param<'_>>)> {
    match sel {
        ReplaySelector::Ids(ids) => {
            let mut ids = ids.clone();
            ids.sort_unstable();
            ids.dedup();
            id_chunks(&ids, first)
                .into_iter()
                .map(|(list, params)| (format!(" AND id IN ({list})"), params))
                .collect()
        }
        ReplaySelector::Integration { integration, since } => {
            let (i, s) = (first, first + 1);
            vec![(
                format!(
                    " AND integration = ${i} AND (CAST(${s} AS TEXT) IS NULL OR {DEAD_AT} >= ${s})"
                ),
                vec![Param::Text(integration), Param::Time(*since)],
            )]
        }
        ReplaySelector::All => vec![(String::new(), Vec::new())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_number_placeholders_from_the_given_position() {
        let sel = ReplaySelector::Integration {
            integration: "a/b".into(),
            since: None,
        };
        let parts = selection(&sel, 2);
        assert_eq!(parts.len(), 1);
        assert_eq!(
            parts[0].0,
            " AND integration = $2 AND (CAST($3 AS TEXT) IS NULL OR \
             COALESCE(dead_lettered_at, received_at) >= $3)"
        );
        let ids = ReplaySelector::Ids(vec![7, 3, 7]);
        let parts = selection(&ids, 1);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].0, " AND id IN ($1, $2)");
        assert!(matches!(parts[0].1[..], [Param::Id(3), Param::Id(7)]));
        assert!(selection(&ReplaySelector::Ids(vec![]), 1).is_empty());
        let all = selection(&ReplaySelector::All, 1);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].0, "");
        assert!(all[0].1.is_empty());
    }

    #[test]
    fn long_id_lists_are_split_into_statements() {
        let ids: Vec<i64> = (1..=1001).collect();
        let sel = ReplaySelector::Ids(ids);
        let parts = selection(&sel, 2);
        assert_eq!(
            parts.iter().map(|p| p.1.len()).collect::<Vec<_>>(),
            [500, 500, 1]
        );
        assert!(parts[1].0.starts_with(" AND id IN ($2, $3, "));
        assert!(parts[1].0.ends_with(", $501)"));
    }
}
