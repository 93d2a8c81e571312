//! Each role names its PostgreSQL connections (`application_name`), so that whoever runs the
//! database can tell in `pg_stat_activity` which of hookgate's processes holds which of them.

use crate::common::procs::{
    connection_names, drop_database, free_port, fresh_database, start_ready,
};
use crate::common::*;
use hookgate::inbox::Inbox;
use std::collections::BTreeSet;

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[tokio::test]
async fn each_process_names_its_connections_after_its_role() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let yaml = hmac_integration(
        "n",
        "names",
        "db-names-test-secret",
        r#"url: "http://127.0.0.1:9/""#,
    );
    std::fs::write(dir.path().join("m.yaml"), yaml).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let args = ["standalone", "--no-workers", "--listen", &listen];
    let receiver = start_ready(dir.path(), "receiver", &args, &url, &[]).await;
    let worker = start_ready(dir.path(), "worker", &["worker"], &url, &[]).await;

    assert_eq!(
        connection_names(&admin_url, &url).await,
        set(&["hookgate standalone", "hookgate worker"])
    );
    drop((receiver, worker));
    drop_database(&admin_url, &url).await;
}

#[tokio::test]
async fn a_name_in_the_database_url_wins() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return;
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let named = format!("{url}{sep}application_name=payments-intake");
    let inbox = Inbox::connect_as(&named, "hookgate worker", Default::default())
        .await
        .unwrap();
    // A pooled connection stays open (`migrate` closes its own).
    inbox.ping().await.unwrap();
    assert_eq!(
        connection_names(&admin_url, &url).await,
        set(&["payments-intake"])
    );

    let plain = Inbox::connect_as(&url, "hookgate worker", Default::default())
        .await
        .unwrap();
    plain.ping().await.unwrap();
    assert_eq!(
        connection_names(&admin_url, &url).await,
        set(&["payments-intake", "hookgate worker"])
    );
    drop((inbox, plain));
    drop_database(&admin_url, &url).await;
}
