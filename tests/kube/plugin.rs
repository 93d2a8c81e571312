//! Every `kubectl hookgate` verb against the real API server, run as a user would run it (the
//! binary, a kubeconfig, `-n`), with the controller and receiver running.

use crate::fixtures::{PLUGIN, Release, Role, condition, get_json, ok, output, wait_for};
use crate::harness::ApiServer;
use std::process::Command;
use std::time::Duration;

fn plugin(server: &ApiServer, ns: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(PLUGIN);
    cmd.env("KUBECONFIG", server.admin_kubeconfig())
        .args(["-n", ns])
        .args(args);
    cmd
}

fn phases(server: &ApiServer, ns: &str, name: &str) -> Vec<(String, String)> {
    let wi = get_json(server, &["whi", name, "-n", ns]);
    wi["status"]["keys"]
        .as_array()
        .map(|keys| {
            keys.iter()
                .map(|k| {
                    (
                        k["id"].as_str().unwrap().to_string(),
                        k["phase"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_plugin_verb_works_against_the_api_server() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    let r = Release::install(server, "plug").await;
    let _controller = Role::controller(server, &r, "plug-0");
    let mut receiver = Role::receiver(server, &r);
    let t = r.tenant.as_str();
    server.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: provider-keys, namespace: {t}}}\nstringData: {{v1: whsec_plugin_one}}\n---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: provider, namespace: {t}}}\nspec:\n  scheme: {{type: stripe}}\n  rotation: {{overlap: 1h}}\n  keys: [{{id: v1, secretRef: {{name: provider-keys, key: v1}}}}]\n  delivery: {{url: \"http://127.0.0.1:9/hooks\", retry: {{schedule: [1s]}}}}\n---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: gen, namespace: {t}}}\nspec:\n  scheme: {{type: standard-webhooks}}\n  rotation: {{generate: true, overlap: 1h}}\n  delivery: {{url: \"http://127.0.0.1:9/hooks\"}}\n"
    ));
    wait_for("both Ready", Duration::from_secs(60), async || {
        ["provider", "gen"].iter().all(|n| {
            condition(&get_json(server, &["whi", n, "-n", t]), "Ready")
                .is_some_and(|c| c["status"] == "True")
        })
    })
    .await;

    // keys
    let table = ok(plugin(server, t, &["keys", "provider"]), None);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["ID", "PHASE", "SINCE", "RETIRES", "LAST", "USED"],
        "{table}"
    );
    assert!(
        table.lines().nth(1).unwrap().starts_with("v1") && table.contains("Active"),
        "{table}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(
        plugin(server, t, &["keys", "provider", "-o", "json"]),
        None,
    ))
    .unwrap();
    assert_eq!(json[0]["id"], "v1", "{json}");

    // add-key: stored in a Secret, appended, active; the previous key retires.
    let file = server.dir().join("plugin-v2.key");
    std::fs::write(&file, "whsec_plugin_two").unwrap();
    let out = ok(
        plugin(
            server,
            t,
            &[
                "add-key",
                "provider",
                "--id",
                "v2",
                "--from-file",
                file.to_str().unwrap(),
            ],
        ),
        None,
    );
    assert!(out.contains("stored key v2"), "{out}");
    let stored = ok(
        server.kubectl(&[
            "get",
            "secret",
            "provider-keys",
            "-n",
            t,
            "-o",
            "jsonpath={.data.v2}",
        ]),
        None,
    );
    assert_eq!(
        stored.trim(),
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            "whsec_plugin_two"
        )
    );
    wait_for(
        "v1 Retiring, v2 Active",
        Duration::from_secs(30),
        async || phases(server, t, "provider") == pairs(&[("v1", "Retiring"), ("v2", "Active")]),
    )
    .await;

    // send: signed with the newest key, read from the cluster, through the real receiver.
    receiver.wait_ready("receiver").await;
    let url = receiver.url();
    wait_for(
        "the receiver routes provider with v2",
        Duration::from_secs(30),
        async || {
            let (sent, stdout, _) = output(
                plugin(
                    server,
                    t,
                    &[
                        "send",
                        "provider",
                        "--url",
                        &url,
                        "--body",
                        r#"{"id":"evt_plugin_1","type":"invoice.paid"}"#,
                    ],
                ),
                None,
            );
            sent && stdout.starts_with("200")
        },
    )
    .await;

    // retire --at: sets retireAt.
    let out = ok(
        plugin(server, t, &["retire", "provider", "v1", "--at", "2h"]),
        None,
    );
    assert!(out.contains("v1"), "{out}");
    let retire_at = ok(
        server.kubectl(&[
            "get",
            "whi",
            "provider",
            "-n",
            t,
            "-o",
            "jsonpath={.spec.keys[0].retireAt}",
        ]),
        None,
    );
    let at: chrono::DateTime<chrono::Utc> = retire_at.trim().parse().unwrap();
    let ahead = at - chrono::Utc::now();
    assert!(
        ahead > chrono::Duration::minutes(118) && ahead <= chrono::Duration::hours(2),
        "{retire_at}"
    );

    // rotate on provider keys prints the steps and changes nothing.
    let before =
        get_json(server, &["whi", "provider", "-n", t])["metadata"]["resourceVersion"].clone();
    let out = ok(plugin(server, t, &["rotate", "provider"]), None);
    assert!(out.contains("add-key"), "{out}");
    assert_eq!(
        get_json(server, &["whi", "provider", "-n", t])["metadata"]["resourceVersion"],
        before
    );

    // rotate on generated keys: the controller adds a key; secret prints it.
    let first = phases(server, t, "gen");
    assert_eq!(first.len(), 1, "{first:?}");
    let out = ok(
        plugin(server, t, &["rotate", "gen", "--overlap", "30m"]),
        None,
    );
    assert!(
        out.starts_with(&format!(
            "WebhookIntegration {t}/gen: rotation requested (hookgate.dev/rotate="
        )),
        "{out}"
    );
    let overlap = ok(
        server.kubectl(&[
            "get",
            "whi",
            "gen",
            "-n",
            t,
            "-o",
            "jsonpath={.spec.rotation.overlap}",
        ]),
        None,
    );
    assert_eq!(overlap, "30m");
    wait_for(
        "a second generated key",
        Duration::from_secs(30),
        async || {
            let p = phases(server, t, "gen");
            p.len() == 2 && p[0] == (first[0].0.clone(), "Retiring".into()) && p[1].1 == "Active"
        },
    )
    .await;
    let active = phases(server, t, "gen")[1].0.clone();
    let printed = ok(plugin(server, t, &["secret", "gen"]), None);
    let stored = ok(
        server.kubectl(&[
            "get",
            "secret",
            "gen-signing-keys",
            "-n",
            t,
            "-o",
            &format!("jsonpath={{.data.{active}}}"),
        ]),
        None,
    );
    let stored =
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, stored.trim()).unwrap();
    assert_eq!(printed.trim(), String::from_utf8(stored).unwrap());
    let (refused, _, err) = output(plugin(server, t, &["secret", "provider"]), None);
    assert!(
        !refused && err.contains("error:"),
        "provider keys are not printed: {err}"
    );

    // dlq: the event sent above fails delivery (nothing listens on :9) after one retry.
    let mut worker = Role::worker(server, &r);
    let db = r.database_url.clone();
    wait_for("a dead letter", Duration::from_secs(60), async || {
        let (_, out, _) = output(
            plugin(
                server,
                t,
                &["dlq", "list", "--database-url", &db, "-o", "json"],
            ),
            None,
        );
        out.contains("evt_plugin_1")
    })
    .await;
    // The worker ran until now (it did not crash on the way to the dead letter), and it is gone
    // before the replay: a running worker would retry the replayed event under the checks below.
    let exited = worker.proc.0.try_wait().unwrap();
    assert!(exited.is_none(), "the worker exited by itself: {exited:?}");
    worker.proc.0.kill().expect("stop the worker");
    let status = worker.proc.0.wait().expect("reap the worker");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{status}"
    );
    let listed = ok(
        plugin(
            server,
            t,
            &[
                "dlq",
                "list",
                "--integration",
                "provider",
                "--database-url",
                &db,
                "-o",
                "json",
            ],
        ),
        None,
    );
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    let out = ok(
        plugin(
            server,
            t,
            &[
                "dlq",
                "replay",
                "--integration",
                "provider",
                "--database-url",
                &db,
            ],
        ),
        None,
    );
    assert!(out.starts_with("replayed 1 event: "), "{out}");
    let listed = ok(
        plugin(
            server,
            t,
            &["dlq", "list", "--database-url", &db, "-o", "json"],
        ),
        None,
    );
    assert_eq!(listed.trim(), "[]", "replayed");
    r.drop_database().await;
}
