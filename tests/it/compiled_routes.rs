//! Compiled route Secrets: what the controller writes is what a cluster receiver loads, through
//! the same loader and compile function as `hookgate standalone`.

use crate::common::*;
use axum::http::StatusCode;
use chrono::Duration;
use hookgate::controller::compiled;
use hookgate::inbox::Inbox;
use kube::ResourceExt;

fn secret_for(
    yaml_manifests: &hookgate::manifest::Manifests,
    integration: &str,
    not_after: &[Option<chrono::DateTime<chrono::Utc>>],
) -> k8s_openapi::api::core::v1::Secret {
    let wi = &yaml_manifests.find(integration).unwrap().integration;
    let text = compiled::render(wi, not_after, &yaml_manifests.secrets);
    compiled::secret("hookgate-system", wi, text, &[])
}

#[test]
fn compiled_secret_is_named_labelled_and_holds_only_referenced_values() {
    let m = load(&test_manifests());
    let s = secret_for(&m, "t/stripe", &[None]);
    assert_eq!(s.name_any(), "route.t.stripe");
    assert_eq!(s.namespace().as_deref(), Some("hookgate-system"));
    assert_eq!(s.labels()[compiled::ROUTE_LABEL], "t.stripe");
    let text =
        String::from_utf8(s.data.as_ref().unwrap()[compiled::MANIFESTS_KEY].0.clone()).unwrap();
    // Only the stripe key's value travels, base64 in `data`, not the other integrations' secrets.
    assert!(text.contains("stripe:"), "{text}");
    assert!(
        !text.contains("github:") && !text.contains("hmac:"),
        "{text}"
    );
    assert!(
        !text.contains("whsec_test_receiver_secret"),
        "values are base64 encoded: {text}"
    );
    let long = compiled::secret_name("n".repeat(63).as_str(), "x".repeat(253).as_str());
    assert!(long.len() <= 253 && long.starts_with("route."));
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn cluster_receiver_enforces_the_compiled_not_after(pool: sqlx::PgPool) {
    let m = load(&test_manifests());
    // The controller decided `mid` retires at t0 - 1 s (earlier than its spec retireAt).
    let not_after = [
        Some("2026-05-01T00:00:00Z".parse().unwrap()),
        Some(t0() - Duration::seconds(1)),
        None,
    ];
    let secrets = vec![
        secret_for(&m, "t/partner", &not_after),
        secret_for(&m, "t/stripe", &[None]),
    ];
    let table = compiled::table(&secrets);
    assert_eq!(table.len(), 2);
    let h = harness(Inbox::Postgres(pool));
    h.receiver.swap_routes(table);
    let body = r#"{"id":"x"}"#;
    let r = h
        .send(
            "t/partner",
            body,
            hookgate::cli::send::SendOptions {
                event_id: Some("a".into()),
                ..ed_opts(3, "new")
            },
        )
        .await;
    assert_eq!(r.json, accepted());
    let (path, headers) = h.sign(
        "t/partner",
        body,
        hookgate::cli::send::SendOptions {
            event_id: Some("b".into()),
            ..ed_opts(2, "mid")
        },
    );
    let r = h.post(&path, &headers, body).await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::UNAUTHORIZED, error("invalid_signature"))
    );
}

#[test]
fn a_broken_or_conflicting_route_secret_costs_only_that_route() {
    let m = load(&test_manifests());
    let good = secret_for(&m, "t/stripe", &[None]);
    let mut broken = secret_for(&m, "t/github", &[None]);
    broken.data.as_mut().unwrap().insert(
        compiled::MANIFESTS_KEY.into(),
        k8s_openapi::ByteString(b"kind: [".to_vec()),
    );
    let mut twin = good.clone();
    twin.metadata.name = Some("route.z.twin".into());
    let table = compiled::table(&[good, broken, twin]);
    assert_eq!(table.len(), 1);
    assert!(table.get("/hooks/t/stripe").is_some());
}

/// Two namespaces' integrations claim one path: receivers route it to the one created first,
/// whatever their names sort as (before, the name sorting first won: `a` could take `z`'s path).
#[test]
fn a_path_claimed_twice_goes_to_the_first_claimant_not_the_first_name() {
    let yaml = |ns: &str, created: &str, uid: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: k, namespace: {ns}}}\nstringData: {{v1: whsec_{ns}}}\n---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: stripe, namespace: {ns}, creationTimestamp: \"{created}\", uid: {uid}}}\nspec:\n  path: /hooks/payments/stripe\n  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: k, key: v1}}}}]\n  delivery: {{url: \"http://{ns}.example/hooks\"}}\n"
        )
    };
    let owner = load(&yaml("zpayments", "2026-01-01T00:00:00Z", "u-owner"));
    let attacker = load(&yaml("aattacker", "2026-02-01T00:00:00Z", "u-attacker"));
    let owner_secret = secret_for(&owner, "zpayments/stripe", &[None]);
    let attacker_secret = secret_for(&attacker, "aattacker/stripe", &[None]);
    assert!(attacker_secret.name_any() < owner_secret.name_any());
    let annotations = owner_secret.annotations();
    assert_eq!(
        annotations[compiled::PATH_ANNOTATION],
        "/hooks/payments/stripe"
    );
    assert_eq!(
        annotations[compiled::CLAIMED_AT_ANNOTATION],
        "2026-01-01T00:00:00Z"
    );
    for secrets in [
        [owner_secret.clone(), attacker_secret.clone()],
        [attacker_secret.clone(), owner_secret.clone()],
    ] {
        let table = compiled::table(&secrets);
        assert_eq!(table.len(), 1);
        let route = table.get("/hooks/payments/stripe").unwrap();
        assert_eq!(route.integration, "zpayments/stripe");
    }
}

/// Label values and Secret names stay within Kubernetes' limits for the longest valid names.
#[test]
fn route_names_and_labels_fit_for_any_valid_namespace_and_name() {
    let ns = "n".repeat(63);
    let name = "w".repeat(253);
    let label = compiled::label_value(&ns, &name);
    assert!(
        label.len() <= 63 && label.chars().all(|c| c.is_ascii_alphanumeric()),
        "{label}"
    );
    assert_ne!(
        label,
        compiled::label_value(&ns, &"v".repeat(253)),
        "distinct integrations, distinct labels"
    );
    assert!(compiled::secret_name(&ns, &name).len() <= 253);
    assert_eq!(
        compiled::label_value("pay", "stripe"),
        "pay.stripe",
        "short ones stay readable"
    );
    let generated = hookgate::controller::generated::secret_name(&name);
    assert!(generated.len() <= 253, "{} characters", generated.len());
}

/// A request that started on the old table finishes on it, even if the table is swapped while
/// its body is still arriving; the next request sees the new table.
#[sqlx::test(migrations = "migrations/postgres")]
async fn route_swap_is_atomic_for_in_flight_requests(pool: sqlx::PgPool) {
    use tower::ServiceExt;
    let h = harness(Inbox::Postgres(pool));
    let body = stripe_body("evt_swap", "invoice.paid");
    let (path, headers) = h.sign("t/stripe", &body, opts());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let mut req = axum::http::Request::post(&path);
    for (k, v) in &headers {
        req = req.header(k, v);
    }
    let req = req.body(axum::body::Body::from_stream(stream)).unwrap();
    let in_flight = tokio::spawn(h.receiver.router().oneshot(req));
    let (first, rest) = body.as_bytes().split_at(10);
    tx.send(Ok(first.to_vec())).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;

    h.receiver
        .swap_routes(hookgate::route::RouteTable::default());
    tx.send(Ok(rest.to_vec())).await.unwrap();
    drop(tx);
    let res = in_flight.await.unwrap().unwrap();
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "finished on the table it started with"
    );
    let again = h.post(&path, &headers, body).await;
    assert_eq!(
        (again.status, again.json),
        (StatusCode::NOT_FOUND, error("unknown_route"))
    );
}
