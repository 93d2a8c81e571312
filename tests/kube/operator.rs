//! The operator as a platform team runs it, with exactly the chart's RBAC: the controller's
//! reconcile loop, key rotation on real time, the receiver's hot swap, the worker in cluster mode.

use crate::destination::Destination;
use crate::fixtures::{Release, Role, condition, get_json, ok, post, sign, wait_for, wait_ready};
use crate::harness::ApiServer;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn service_accounts_have_exactly_the_permissions_they_need() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    let r = Release::install(server, "rbac").await;
    let (own, tenant) = (r.namespace.as_str(), r.tenant.as_str());
    let other = server.namespace("rbac-other");
    // (role, verb, resource with -n, expected)
    let table: Vec<(&str, &str, String, bool)> = vec![
        ("receiver", "list", format!("secrets -n {own}"), true),
        ("receiver", "watch", format!("secrets -n {own}"), true),
        ("receiver", "get", format!("secrets -n {tenant}"), false),
        ("receiver", "get", format!("secrets -n {other}"), false),
        ("receiver", "list", "secrets -A".into(), false),
        ("receiver", "create", format!("secrets -n {own}"), false),
        ("receiver", "patch", format!("secrets -n {own}"), false),
        ("receiver", "delete", format!("secrets -n {own}"), false),
        (
            "receiver",
            "patch",
            format!("webhookintegrations.hookgate.dev -n {tenant}"),
            false,
        ),
        (
            "receiver",
            "create",
            format!("events.events.k8s.io -n {own}"),
            false,
        ),
        ("worker", "list", format!("secrets -n {own}"), true),
        ("worker", "get", format!("secrets -n {tenant}"), false),
        ("worker", "get", format!("secrets -n {other}"), false),
        ("worker", "update", format!("secrets -n {own}"), false),
        (
            "worker",
            "patch",
            format!("webhookintegrations.hookgate.dev/status -n {tenant}"),
            false,
        ),
        (
            "controller",
            "watch",
            format!("webhookintegrations.hookgate.dev -n {tenant}"),
            true,
        ),
        (
            "controller",
            "patch",
            format!("webhookintegrations.hookgate.dev/status -n {tenant}"),
            true,
        ),
        ("controller", "get", format!("secrets -n {tenant}"), true),
        ("controller", "create", format!("secrets -n {tenant}"), true),
        (
            "controller",
            "delete",
            format!("secrets -n {tenant}"),
            false,
        ),
        ("controller", "create", format!("secrets -n {own}"), true),
        ("controller", "delete", format!("secrets -n {own}"), true),
        ("controller", "list", format!("secrets -n {own}"), true),
        ("controller", "update", format!("secrets -n {own}"), false),
        (
            "controller",
            "update",
            format!("secrets -n {tenant}"),
            false,
        ),
        ("controller", "get", format!("secrets -n {other}"), false),
        (
            "controller",
            "list",
            format!("webhookintegrations.hookgate.dev -n {other}"),
            false,
        ),
        (
            "controller",
            "delete",
            format!("webhookintegrations.hookgate.dev -n {tenant}"),
            false,
        ),
        ("controller", "create", format!("pods -n {tenant}"), false),
        ("controller", "get", "nodes".into(), false),
        (
            "controller",
            "create",
            format!("leases.coordination.k8s.io -n {own}"),
            true,
        ),
        (
            "controller",
            "update",
            format!("leases.coordination.k8s.io/hookgate-controller -n {own}"),
            true,
        ),
        (
            "controller",
            "update",
            format!("leases.coordination.k8s.io/other -n {own}"),
            false,
        ),
        (
            "controller",
            "create",
            format!("leases.coordination.k8s.io -n {tenant}"),
            false,
        ),
    ];
    let mut wrong = Vec::new();
    for (role, verb, what, expected) in &table {
        let mut parts = what.split(' ');
        let resource = parts.next().unwrap();
        let rest: Vec<&str> = parts.collect();
        let user = format!("system:serviceaccount:{own}:{}", r.service_account(role));
        let mut args = vec!["auth", "can-i", verb, resource, "--as", &user];
        args.extend(rest);
        let (_, stdout, _) = crate::fixtures::output(server.kubectl(&args), None);
        if (stdout.trim() == "yes") != *expected {
            wrong.push(format!(
                "{role} {verb} {what}: expected {expected}, got {}",
                stdout.trim()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "RBAC differs from what the roles need:\n{}",
        wrong.join("\n")
    );
    r.drop_database().await;
}

fn integration(ns: &str, name: &str, secret: &str, extra: &str) -> String {
    format!(
        "apiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: {secret}, key: v1}}}}]\n  delivery: {{url: \"http://127.0.0.1:9/hooks\"}}\n{extra}"
    )
}

fn secret(ns: &str, name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\nstringData: {{v1: {value}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn controller_programs_routes_waits_for_secrets_and_cleans_up() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    let r = Release::install(server, "ctl").await;
    let _controller = Role::controller(server, &r, "ctl-0");
    let t = r.tenant.as_str();
    server.apply(&secret(t, "stripe-keys", "whsec_cluster_suite_one"));
    server.apply(&integration(t, "stripe", "stripe-keys", ""));

    let wi = wait_ready(server, t, "stripe", Duration::from_secs(60)).await;
    let generation = wi["metadata"]["generation"].as_i64().unwrap();
    for c in wi["status"]["conditions"].as_array().unwrap() {
        assert_eq!(c["observedGeneration"].as_i64(), Some(generation), "{c}");
    }
    assert!(
        wi["metadata"]["finalizers"]
            .to_string()
            .contains("hookgate.dev/route"),
        "{wi}"
    );
    let routes = r.routes(server);
    assert_eq!(routes.len(), 1, "one compiled route Secret: {routes:?}");
    let table = ok(server.kubectl(&["get", "whi", "stripe", "-n", t]), None);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..4],
        ["stripe", "True", &format!("/hooks/{t}/stripe"), "v1"],
        "{table}"
    );
    assert!(
        !serde_json::to_string(&wi["status"])
            .unwrap()
            .contains("whsec_cluster_suite_one")
    );

    // A missing Secret: SecretNotFound, and Ready as soon as it appears.
    server.apply(&integration(t, "late", "late-keys", ""));
    wait_for("late SecretNotFound", Duration::from_secs(60), async || {
        let wi = get_json(server, &["whi", "late", "-n", t]);
        condition(&wi, "Ready")
            .is_some_and(|c| c["status"] == "False" && c["reason"] == "SecretNotFound")
    })
    .await;
    server.apply(&secret(t, "late-keys", "whsec_cluster_suite_late"));
    wait_ready(server, t, "late", Duration::from_secs(60)).await;

    // Deletion runs the finalizer, which removes the compiled route.
    ok(
        server.kubectl(&["delete", "whi", "stripe", "-n", t, "--timeout=60s"]),
        None,
    );
    let routes = r.routes(server);
    assert_eq!(routes.len(), 1, "only late's route is left: {routes:?}");
    r.drop_database().await;
}

/// Counts writes to one object over a quiet minute: at most the 30 s traffic refresh.
#[tokio::test(flavor = "multi_thread")]
async fn a_ready_integration_is_not_rewritten_while_nothing_changes() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    let r = Release::install(server, "quiet").await;
    let _controller = Role::controller(server, &r, "quiet-0");
    let t = r.tenant.as_str();
    server.apply(&secret(t, "keys", "whsec_cluster_suite_quiet"));
    server.apply(&integration(t, "quiet", "keys", ""));
    wait_ready(server, t, "quiet", Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let version = |s: &ApiServer| {
        get_json(s, &["whi", "quiet", "-n", t])["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let start = version(server);
    let mut watch = std::process::Command::new(&server.tools.kubectl);
    watch
        .env("KUBECONFIG", server.admin_kubeconfig())
        .args([
            "get",
            "whi",
            "quiet",
            "-n",
            t,
            "--watch-only",
            "-o",
            "jsonpath={.metadata.resourceVersion}{\"\\n\"}",
        ])
        .args(["--request-timeout=0"]);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut child = watch.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    // A watch that ended early (a refused request, a crash) would count no writes and pass.
    let exited = child.try_wait().unwrap();
    assert!(
        exited.is_none(),
        "the kubectl watch ended early ({exited:?}): the quiet minute was not observed"
    );
    child.kill().expect("stop the kubectl watch");
    child.wait().expect("reap the kubectl watch");
    let writes: Vec<String> = rx.try_iter().collect();
    println!(
        "writes to a quiet integration in 60 s: {} (from resourceVersion {start})",
        writes.len()
    );
    assert!(
        writes.len() <= 2,
        "the controller rewrote a quiet integration {} times in 60 s: {writes:?}",
        writes.len()
    );
    r.drop_database().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rotation_on_real_time_with_real_traffic_hot_swaps_keys_and_delivers() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    let r = Release::install(server, "rot").await;
    let dest = Destination::start().await;
    let _controller = Role::controller(server, &r, "rot-0");
    let mut receiver = Role::receiver(server, &r);
    let _worker = Role::worker(server, &r);
    let t = r.tenant.as_str();
    server.apply(&format!(
        "apiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: pay, namespace: {t}}}\nspec:\n  scheme: {{type: standard-webhooks}}\n  rotation: {{generate: true, overlap: 45s}}\n  delivery: {{url: \"{}\"}}\n",
        dest.url
    ));
    wait_ready(server, t, "pay", Duration::from_secs(60)).await;
    let generated = get_json(server, &["secret", "pay-signing-keys", "-n", t]);
    let owner = &generated["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "WebhookIntegration", "{generated}");
    assert_eq!(owner["controller"], true, "{generated}");
    let client = server.client().await;
    let first = get_json(server, &["whi", "pay", "-n", t])["status"]["keys"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    receiver.wait_ready("receiver").await;
    let body = |n: u32| format!(r#"{{"id":"evt_rot_{n}","type":"invoice.paid","data":{{}}}}"#);
    let send = async |n: u32, key: Option<&str>| {
        post(
            &receiver.url(),
            &sign(&client, t, "pay", &body(n), key).await,
        )
        .await
    };
    wait_for(
        "the receiver routes pay",
        Duration::from_secs(30),
        async || send(0, None).await.0 == 200,
    )
    .await;
    let delivered = dest.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(
        delivered.len(),
        1,
        "the worker delivered the event from the compiled route"
    );
    // Each role names its database connections, for whoever runs the database.
    wait_for(
        "the controller's, receiver's and worker's connections, each named",
        Duration::from_secs(45),
        async || {
            let names = r.connection_names().await;
            [
                "hookgate controller",
                "hookgate receiver",
                "hookgate worker",
            ]
            .iter()
            .all(|n| names.contains(*n))
        },
    )
    .await;
    assert!(
        delivered[0].header("webhook-id").starts_with("msg_"),
        "{:?}",
        delivered[0].headers
    );

    // Rotate with the annotation: a new active key; the first one retires after the overlap.
    ok(
        server.kubectl(&[
            "annotate",
            "whi",
            "pay",
            "-n",
            t,
            "--overwrite",
            &format!("hookgate.dev/rotate={}", chrono::Utc::now().timestamp()),
        ]),
        None,
    );
    wait_for(
        "a second key, active, and the first retiring",
        Duration::from_secs(30),
        async || {
            let keys = get_json(server, &["whi", "pay", "-n", t])["status"]["keys"].clone();
            keys.as_array().is_some_and(|k| {
                k.len() == 2 && k[0]["phase"] == "Retiring" && k[1]["phase"] == "Active"
            })
        },
    )
    .await;
    let second = get_json(server, &["whi", "pay", "-n", t])["status"]["keys"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(first, second);
    let rotated = std::time::Instant::now();
    wait_for(
        "the receiver accepts the new key",
        Duration::from_secs(10),
        async || send(1, Some(&second)).await.0 == 200,
    )
    .await;
    println!(
        "new key accepted {:?} after the rotation was visible",
        rotated.elapsed()
    );
    // The retiring key still works, is recorded, and warns.
    assert_eq!(send(2, Some(&first)).await.0, 200);
    wait_for(
        "lastUsedAt and RetiringKeyInUse",
        Duration::from_secs(45),
        async || {
            let wi = get_json(server, &["whi", "pay", "-n", t]);
            wi["status"]["keys"][0]["lastUsedAt"].is_string()
                && condition(&wi, "RetiringKeyInUse").is_some_and(|c| c["status"] == "True")
        },
    )
    .await;
    let events = ok(
        server.kubectl(&[
            "get",
            "events.events.k8s.io",
            "-n",
            t,
            "-o",
            "jsonpath={.items[*].reason}",
        ]),
        None,
    );
    assert!(events.contains("RetiringKeyInUse"), "{events}");
    // After retireAt, the first key is Retired and refused.
    wait_for(
        "the first key Retired",
        Duration::from_secs(60),
        async || {
            get_json(server, &["whi", "pay", "-n", t])["status"]["keys"][0]["phase"] == "Retired"
        },
    )
    .await;
    wait_for(
        "the receiver refuses the retired key",
        Duration::from_secs(10),
        async || send(3, Some(&first)).await.0 == 401,
    )
    .await;
    assert_eq!(send(4, Some(&second)).await.0, 200);
    let delivered = dest.wait_for(4, Duration::from_secs(30)).await;
    assert_eq!(
        delivered.len(),
        4,
        "events 0, 1, 2 and 4 delivered once each"
    );
    for log in [receiver.logs(), _worker.logs(), _controller.logs()] {
        let secret = ok(
            server.kubectl(&[
                "get",
                "secret",
                "pay-signing-keys",
                "-n",
                t,
                "-o",
                "jsonpath={.data}",
            ]),
            None,
        );
        let values: serde_json::Value = serde_json::from_str(&secret).unwrap();
        for v in values.as_object().unwrap().values() {
            let raw = base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                v.as_str().unwrap(),
            )
            .unwrap();
            assert!(
                !log.contains(&String::from_utf8_lossy(&raw).to_string()),
                "a key appears in a log"
            );
        }
    }
    r.drop_database().await;
}
