//! Each role names its PostgreSQL connections (`application_name`), so that whoever runs the
//! database can tell in `pg_stat_activity` which of hookgate's processes holds which of them.

use crate::common::procs::{drop_database, free_port, fresh_database, start_ready};
use crate::common::*;
use hookgate::inbox::Inbox;
use sqlx::{Connection, PgConnection};
use std::collections::BTreeSet;

const MANIFESTS: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: n}
stringData: {k: db-names-test-secret}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: names, namespace: n}
spec:
  scheme: {type: hmac-sha256, keyIdHeader: "", eventIdHeader: "", signedPayload: "{timestamp}.{body}"}
  keys: [{id: k, secretRef: {name: keys, key: k}}]
  delivery: {url: "http://127.0.0.1:9/"}
"#;

/// The `application_name` of every connection to `database` but the caller's.
async fn names(admin_url: &str, database: &str) -> BTreeSet<String> {
    let mut admin = PgConnection::connect(admin_url).await.unwrap();
    sqlx::query_scalar(
        "SELECT application_name FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(database)
    .fetch_all(&mut admin)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

#[tokio::test]
async fn each_process_names_its_connections_after_its_role() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return;
    };
    let database = reqwest::Url::parse(&url).unwrap().path()[1..].to_string();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.yaml"), MANIFESTS).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let args = ["standalone", "--no-workers", "--listen", &listen];
    let receiver = start_ready(dir.path(), "receiver", &args, &url, &[]).await;
    let worker = start_ready(dir.path(), "worker", &["worker"], &url, &[]).await;

    let expected = BTreeSet::from(["hookgate standalone".into(), "hookgate worker".into()]);
    assert_eq!(names(&admin_url, &database).await, expected);

    drop((receiver, worker));
    drop_database(&admin_url, &url).await;
}

#[tokio::test]
async fn a_name_in_the_database_url_wins() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return;
    };
    let database = reqwest::Url::parse(&url).unwrap().path()[1..].to_string();
    let sep = if url.contains('?') { '&' } else { '?' };
    let named = format!("{url}{sep}application_name=payments-intake");
    let inbox = Inbox::connect_as(&named, "hookgate worker", Default::default())
        .await
        .unwrap();
    // A pooled connection stays open (`migrate` closes its own).
    inbox.ping().await.unwrap();
    assert_eq!(
        names(&admin_url, &database).await,
        BTreeSet::from(["payments-intake".into()])
    );

    let plain = Inbox::connect_as(&url, "hookgate worker", Default::default())
        .await
        .unwrap();
    plain.ping().await.unwrap();
    assert_eq!(
        names(&admin_url, &database).await,
        BTreeSet::from(["payments-intake".into(), "hookgate worker".into()])
    );
    drop((inbox, plain));
    drop_database(&admin_url, &url).await;
}
