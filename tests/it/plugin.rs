//! `kubectl hookgate` against a scripted mock API server (tower-test): each test lists the exact
//! API calls a command must make, in order, with what the server answers, and checks that no
//! other call follows.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use clap::Parser;
use hookgate::plugin::{PluginArgs, run};
use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use std::time::Duration;

use crate::common::mock_api;
use mock_api::{Handle, Seen};

const WI: &str = "/apis/hookgate.dev/v1alpha1/namespaces/pay/webhookintegrations/stripe";
const KEYS_SECRET: &str = "/api/v1/namespaces/pay/secrets/stripe-keys";
const SIGNING_SECRET: &str = "/api/v1/namespaces/pay/secrets/stripe-signing-keys";
const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// One request the script saw.
/// Answers the next request, which must be `method` on exactly `path_and_query`.
async fn expect(
    handle: &mut Handle,
    method: &str,
    path_and_query: &str,
    answer: (u16, Value),
) -> Seen {
    mock_api::answer(handle, method, path_and_query, answer).await
}

/// Runs `kubectl hookgate <args>` (default namespace `default`) while `script` plays the API
/// server. Fails on a call the script does not expect: one more after the script is done, or
/// one the script never answers (the 5 s deadline).
async fn plugin<F, Fut>(args: &[&str], script: F) -> (anyhow::Result<()>, String)
where
    F: FnOnce(Handle) -> Fut,
    Fut: Future<Output = Handle> + Send + 'static,
{
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let script = tokio::spawn(script(handle));
    let argv = std::iter::once("kubectl-hookgate").chain(args.iter().copied());
    let args = PluginArgs::try_parse_from(argv).unwrap();
    let mut out = Vec::new();
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        run(client, "default", args, &mut out),
    )
    .await
    .expect("the plugin made an API call the script did not answer");
    let mut handle = match script.await {
        Ok(handle) => handle,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    let extra = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .expect("the client was not released");
    if let Some((request, _)) = extra {
        panic!(
            "unexpected extra call {} {}",
            request.method(),
            request.uri()
        );
    }
    (result, String::from_utf8(out).unwrap())
}

fn key(id: &str) -> Value {
    json!({"id": id, "secretRef": {"name": "stripe-keys", "key": id}})
}

/// `pay/stripe` at resourceVersion 7.
fn integration(keys: Value, rotation: Option<Value>, status_keys: Option<Value>) -> Value {
    let mut wi = json!({
        "apiVersion": "hookgate.dev/v1alpha1",
        "kind": "WebhookIntegration",
        "metadata": {"name": "stripe", "namespace": "pay", "generation": 3, "resourceVersion": "7", "uid": "u-1"},
        "spec": {"scheme": {"type": "stripe"}, "keys": keys, "delivery": {"url": "http://billing:8080/hooks"}},
    });
    if let Some(r) = rotation {
        wi["spec"]["rotation"] = r;
    }
    if let Some(k) = status_keys {
        wi["status"] = json!({"observedGeneration": 3, "keys": k});
    }
    wi
}

/// v1 Retiring (overlap running), v2 Active.
fn rotating_status() -> Value {
    json!([
        {"id": "v1", "phase": "Retiring", "since": "2026-11-30T00:00:00Z",
         "retireAt": "2026-12-03T00:00:00Z", "lastUsedAt": "2026-12-01T10:00:00Z"},
        {"id": "v2", "phase": "Active", "since": "2026-11-30T00:00:00Z"}
    ])
}

fn provider_integration() -> Value {
    integration(json!([key("v1"), key("v2")]), None, Some(rotating_status()))
}

/// Generated keys: none in spec, two in status, the newer Active.
fn generated_integration() -> Value {
    let status = json!([
        {"id": "g-20261101-000000", "phase": "Retiring", "since": "2026-12-01T00:00:00Z",
         "retireAt": "2026-12-04T00:00:00Z"},
        {"id": "g-20261201-000000", "phase": "Active", "since": "2026-12-01T00:00:00Z"}
    ]);
    integration(json!([]), Some(json!({"generate": true})), Some(status))
}

fn not_found(kind: &str, name: &str) -> (u16, Value) {
    (
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
               "message": format!("{kind} \"{name}\" not found"), "details": {"name": name, "kind": kind}}),
    )
}

fn secret(name: &str, data: Value, managed: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": name, "namespace": "pay", "resourceVersion": "41", "managedFields": managed},
           "data": data})
}

fn b64(s: &str) -> String {
    STANDARD.encode(s)
}

fn error(result: anyhow::Result<()>) -> String {
    format!("{:#}", result.expect_err("the command must fail"))
}

#[tokio::test]
async fn keys_lists_status_keys_then_spec_keys_not_yet_in_status_as_pending() {
    let keys = json!([key("v1"), key("v2"), key("v3")]);
    let wi = integration(keys, None, Some(rotating_status()));
    let (result, out) = plugin(&["keys", "stripe", "-n", "pay"], |mut api| async move {
        expect(&mut api, "GET", WI, (200, wi)).await;
        api
    })
    .await;
    result.unwrap();
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "ID   PHASE      SINCE                  RETIRES                LAST USED",
            "v1   Retiring   2026-11-30T00:00:00Z   2026-12-03T00:00:00Z   2026-12-01T10:00:00Z",
            "v2   Active     2026-11-30T00:00:00Z   -                      -",
            "v3   Pending    -                      -                      -",
        ]
    );
}

#[tokio::test]
async fn keys_json_prints_the_status_keys_array() {
    let (result, out) = plugin(
        &["keys", "pay/stripe", "-o", "json"],
        |mut api| async move {
            expect(&mut api, "GET", WI, (200, provider_integration())).await;
            api
        },
    )
    .await;
    result.unwrap();
    let printed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(printed, rotating_status());
}

#[tokio::test]
async fn keys_on_a_missing_integration_names_it() {
    let (result, out) = plugin(&["keys", "pay/stripe"], |mut api| async move {
        let answer = not_found("webhookintegrations.hookgate.dev", "stripe");
        expect(&mut api, "GET", WI, answer).await;
        api
    })
    .await;
    assert_eq!(error(result), "WebhookIntegration pay/stripe not found");
    assert_eq!(out, "");
}

#[tokio::test]
async fn keys_without_the_crd_installed_says_so() {
    let (result, _) = plugin(&["keys", "pay/stripe"], |mut api| async move {
        let answer = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                            "code": 404, "message": "the server could not find the requested resource"});
        expect(&mut api, "GET", WI, (404, answer)).await;
        api
    })
    .await;
    let err = error(result);
    assert!(
        err.starts_with("WebhookIntegration pay/stripe not found: ")
            && err.contains("is the hookgate CRD installed?"),
        "{err}"
    );
}

#[tokio::test]
async fn a_namespace_flag_contradicting_ns_slash_name_is_refused_before_any_call() {
    let (result, _) = plugin(
        &["keys", "pay/stripe", "-n", "other"],
        |api| async move { api },
    )
    .await;
    let err = error(result);
    assert!(
        err.contains("\"pay\"") && err.contains("\"other\""),
        "{err}"
    );
}

#[tokio::test]
async fn retire_at_sets_retire_at_with_a_merge_patch_conditional_on_the_version_read() {
    // An unknown field on a key (a newer CRD) must survive the read-modify-write.
    let mut v1 = key("v1");
    v1["comment"] = json!("from a newer CRD");
    let wi = integration(json!([v1, key("v2")]), None, Some(rotating_status()));
    let args = [
        "retire",
        "stripe",
        "v1",
        "--at",
        "2026-12-24T01:00:00+01:00",
        "-n",
        "pay",
    ];
    let (result, out) = plugin(&args, |mut api| async move {
        expect(&mut api, "GET", WI, (200, wi.clone())).await;
        let patch = expect(&mut api, "PATCH", &format!("{WI}?"), (200, wi)).await;
        assert_eq!(patch.content_type.as_deref(), Some(MERGE));
        let mut v1 = key("v1");
        v1["comment"] = json!("from a newer CRD");
        v1["retireAt"] = json!("2026-12-24T00:00:00Z");
        let want = json!({"metadata": {"resourceVersion": "7"}, "spec": {"keys": [v1, key("v2")]}});
        assert_eq!(patch.body, want);
        api
    })
    .await;
    result.unwrap();
    assert_eq!(
        out,
        "key v1 of WebhookIntegration pay/stripe retires at 2026-12-24T00:00:00Z\n"
    );
}

#[tokio::test]
async fn retire_losing_a_race_fails_clearly() {
    let (result, _) = plugin(
        &["retire", "pay/stripe", "v1", "--at", "2026-12-24T00:00:00Z"],
        |mut api| async move {
            expect(&mut api, "GET", WI, (200, provider_integration())).await;
            let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
                "message": "Operation cannot be fulfilled on webhookintegrations.hookgate.dev \"stripe\": the object has been modified"});
            expect(&mut api, "PATCH", &format!("{WI}?"), (409, conflict)).await;
            api
        },
    )
    .await;
    let err = error(result);
    assert!(
        err.starts_with("WebhookIntegration pay/stripe was changed by someone else")
            && err.contains("resourceVersion 7")
            && err.contains("nothing was written"),
        "{err}"
    );
}

#[tokio::test]
async fn retire_of_an_unknown_key_lists_the_ids_and_writes_nothing() {
    let (result, out) = plugin(&["retire", "pay/stripe", "v9"], |mut api| async move {
        expect(&mut api, "GET", WI, (200, provider_integration())).await;
        api
    })
    .await;
    assert_eq!(
        error(result),
        r#"key "v9" not in WebhookIntegration pay/stripe (keys: v1, v2)"#
    );
    assert_eq!(out, "");
}

#[tokio::test]
async fn retire_default_is_now_and_warns_when_no_key_would_be_left() {
    let wi = integration(json!([key("v1")]), None, None);
    let before = Utc::now();
    let (result, out) = plugin(&["retire", "pay/stripe", "v1"], |mut api| async move {
        expect(&mut api, "GET", WI, (200, wi.clone())).await;
        let patch = expect(&mut api, "PATCH", &format!("{WI}?"), (200, wi)).await;
        let at = patch.body["spec"]["keys"][0]["retireAt"].as_str().unwrap();
        let at: DateTime<Utc> = at.parse().unwrap();
        assert!(
            at >= before - chrono::Duration::seconds(1) && at <= Utc::now(),
            "{at}"
        );
        api
    })
    .await;
    result.unwrap();
    assert!(out.contains("rejected from now on"), "{out}");
    assert!(out.contains("warning: no other key is accepted"), "{out}");
}

#[tokio::test]
async fn add_key_applies_only_that_key_then_appends_it_to_spec_keys() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("v3.key");
    std::fs::write(&file, "whsec_new-provider-key\n").unwrap();
    let args = [
        "add-key",
        "pay/stripe",
        "--id",
        "v3",
        "--from-file",
        file.to_str().unwrap(),
    ];
    let (result, out) = plugin(&args, |mut api| async move {
        expect(&mut api, "GET", WI, (200, provider_integration())).await;
        expect(
            &mut api,
            "GET",
            KEYS_SECRET,
            not_found("secrets", "stripe-keys"),
        )
        .await;
        let stored = secret("stripe-keys", json!({}), json!([]));
        let apply = expect(
            &mut api,
            "PATCH",
            &format!("{KEYS_SECRET}?&fieldManager=kubectl-hookgate"),
            (201, stored),
        )
        .await;
        assert_eq!(apply.content_type.as_deref(), Some(APPLY));
        let want = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "stripe-keys", "namespace": "pay"},
            "data": {"v3": b64("whsec_new-provider-key\n")}});
        assert_eq!(apply.body, want);
        let patch = expect(
            &mut api,
            "PATCH",
            &format!("{WI}?"),
            (200, provider_integration()),
        )
        .await;
        assert_eq!(patch.content_type.as_deref(), Some(MERGE));
        let keys = json!([key("v1"), key("v2"), key("v3")]);
        let want = json!({"metadata": {"resourceVersion": "7"}, "spec": {"keys": keys}});
        assert_eq!(patch.body, want);
        api
    })
    .await;
    result.unwrap();
    assert!(
        out.contains("v2, the active key until now, becomes Retiring: still accepted for 72h"),
        "{out}"
    );
    assert!(
        !out.contains("whsec_new"),
        "the key value is never printed: {out}"
    );
}

#[tokio::test]
async fn add_key_carries_over_the_keys_it_applied_before_and_only_those() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("v3.key");
    std::fs::write(&file, "three").unwrap();
    let managed = json!([
        {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:v1": {}}, "f:type": {}}},
        {"manager": "kubectl-hookgate", "operation": "Apply", "apiVersion": "v1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:v2": {}}}}
    ]);
    let existing = secret(
        "stripe-keys",
        json!({"v1": b64("one"), "v2": b64("two")}),
        managed,
    );
    let args = [
        "add-key",
        "stripe",
        "-n",
        "pay",
        "--id",
        "v3",
        "--from-file",
        file.to_str().unwrap(),
    ];
    let (result, _) = plugin(&args, |mut api| async move {
        expect(&mut api, "GET", WI, (200, provider_integration())).await;
        expect(&mut api, "GET", KEYS_SECRET, (200, existing.clone())).await;
        let apply = expect(
            &mut api,
            "PATCH",
            &format!("{KEYS_SECRET}?&fieldManager=kubectl-hookgate"),
            (200, existing),
        )
        .await;
        // v2 is re-applied unchanged (else server-side apply would delete it); v1 is not ours.
        let want = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "stripe-keys", "namespace": "pay", "resourceVersion": "41"},
            "data": {"v2": b64("two"), "v3": b64("three")}});
        assert_eq!(apply.body, want);
        expect(
            &mut api,
            "PATCH",
            &format!("{WI}?"),
            (200, provider_integration()),
        )
        .await;
        api
    })
    .await;
    result.unwrap();
}

#[tokio::test]
async fn add_key_with_an_existing_id_fails_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("v2.key");
    std::fs::write(&file, "two").unwrap();
    let args = [
        "add-key",
        "pay/stripe",
        "--id",
        "v2",
        "--from-file",
        file.to_str().unwrap(),
    ];
    let (result, out) = plugin(&args, |mut api| async move {
        expect(&mut api, "GET", WI, (200, provider_integration())).await;
        api
    })
    .await;
    assert_eq!(
        error(result),
        r#"key "v2" already in WebhookIntegration pay/stripe (keys: v1, v2)"#
    );
    assert_eq!(out, "");
}

#[tokio::test]
async fn rotate_on_generated_keys_sets_the_rotate_annotation_and_overlap() {
    let before = Utc::now();
    let args = ["rotate", "pay/stripe", "--overlap", "24h"];
    let (result, out) = plugin(&args, |mut api| async move {
        expect(&mut api, "GET", WI, (200, generated_integration())).await;
        let patch = expect(
            &mut api,
            "PATCH",
            &format!("{WI}?"),
            (200, generated_integration()),
        )
        .await;
        assert_eq!(patch.content_type.as_deref(), Some(MERGE));
        let mut body = patch.body;
        let requested = body["metadata"]["annotations"]["hookgate.dev/rotate"]
            .as_str()
            .expect("annotation set")
            .to_string();
        let at: DateTime<Utc> = requested.parse().unwrap();
        assert!(
            at >= before - chrono::Duration::seconds(1) && at <= Utc::now(),
            "{requested}"
        );
        body["metadata"]["annotations"]["hookgate.dev/rotate"] = json!("T");
        let want = json!({"metadata": {"annotations": {"hookgate.dev/rotate": "T"}},
                          "spec": {"rotation": {"overlap": "24h"}}});
        assert_eq!(body, want, "nothing else is written");
        api
    })
    .await;
    result.unwrap();
    assert!(
        out.contains("g-20261201-000000 stays accepted (Retiring) for 24h"),
        "{out}"
    );
}

#[tokio::test]
async fn rotate_without_overlap_only_annotates() {
    let (result, _) = plugin(&["rotate", "pay/stripe"], |mut api| async move {
        expect(&mut api, "GET", WI, (200, generated_integration())).await;
        let patch = expect(
            &mut api,
            "PATCH",
            &format!("{WI}?"),
            (200, generated_integration()),
        )
        .await;
        assert_eq!(patch.body.as_object().unwrap().len(), 1, "{}", patch.body);
        let annotations = patch.body["metadata"]["annotations"].as_object().unwrap();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["hookgate.dev/rotate"]
        );
        api
    })
    .await;
    result.unwrap();
}

#[tokio::test]
async fn rotate_on_provider_keys_prints_the_steps_and_writes_nothing() {
    let (result, out) = plugin(&["rotate", "pay/stripe"], |mut api| async move {
        expect(&mut api, "GET", WI, (200, provider_integration())).await;
        api
    })
    .await;
    result.unwrap();
    assert!(out.contains("provider-issued keys"), "{out}");
    assert!(out.contains("nothing was changed"), "{out}");
    assert!(
        out.contains("kubectl hookgate add-key pay/stripe --id v3 --from-file <file>"),
        "{out}"
    );
    assert!(
        out.contains("v2 stays accepted (Retiring) for 72h"),
        "{out}"
    );
}

#[tokio::test]
async fn secret_on_generated_keys_prints_exactly_the_active_value() {
    let data = json!({"g-20261101-000000": b64("old-secret"), "g-20261201-000000": b64("d2e4f6-active-secret")});
    let stored = secret("stripe-signing-keys", data, json!([]));
    let (result, out) = plugin(&["secret", "pay/stripe"], |mut api| async move {
        expect(&mut api, "GET", WI, (200, generated_integration())).await;
        expect(&mut api, "GET", SIGNING_SECRET, (200, stored)).await;
        api
    })
    .await;
    result.unwrap();
    assert_eq!(out, "d2e4f6-active-secret\n");
}

#[tokio::test]
async fn secret_of_an_unknown_key_lists_ids_but_no_values() {
    let data =
        json!({"g-20261101-000000": b64("old-secret"), "g-20261201-000000": b64("active-secret")});
    let stored = secret("stripe-signing-keys", data, json!([]));
    let args = ["secret", "pay/stripe", "--key", "g-9"];
    let (result, out) = plugin(&args, |mut api| async move {
        expect(&mut api, "GET", WI, (200, generated_integration())).await;
        expect(&mut api, "GET", SIGNING_SECRET, (200, stored)).await;
        api
    })
    .await;
    assert_eq!(
        error(result),
        r#"key "g-9" not in Secret pay/stripe-signing-keys (keys: g-20261101-000000, g-20261201-000000)"#
    );
    assert_eq!(out, "");
}

#[tokio::test]
async fn secret_on_provider_keys_is_refused_without_reading_any_secret() {
    let (result, out) = plugin(&["secret", "pay/stripe"], |mut api| async move {
        expect(&mut api, "GET", WI, (200, provider_integration())).await;
        api
    })
    .await;
    let err = error(result);
    assert!(
        err.starts_with("WebhookIntegration pay/stripe uses provider-issued keys"),
        "{err}"
    );
    assert_eq!(out, "");
}

#[tokio::test]
async fn send_signs_with_the_cluster_keys_and_the_receiver_verifies_it() {
    // A stand-in receiver on loopback that checks the Stripe signature with hookgate's verifier.
    use hookgate::signature::{Key, Scheme, Unverified, Verifier};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let app = {
        let seen = seen.clone();
        axum::Router::new().fallback(
            move |headers: http::HeaderMap, uri: http::Uri, body: axum::body::Bytes| {
                let seen = seen.clone();
                async move {
                    let material = Scheme::Stripe.parse_key(b"whsec_two").unwrap();
                    let v = Verifier::new(
                        Scheme::Stripe,
                        vec![Key {
                            id: "v2".into(),
                            material,
                            not_after: None,
                        }],
                    );
                    let ok = v
                        .verify(
                            Unverified {
                                query: None,
                                headers: &headers,
                                body: &body,
                            },
                            chrono::Utc::now(),
                        )
                        .is_ok();
                    *seen.lock().unwrap() = Some((uri.path().to_string(), ok));
                    "{\"received\":true,\"duplicate\":false}"
                }
            },
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let body = r#"{"id":"evt_1","type":"invoice.paid"}"#;
    let (result, out) = plugin(
        &["send", "pay/stripe", "--body", body, "--url", &url],
        |mut api| async move {
            expect(&mut api, "GET", WI, (200, provider_integration())).await;
            let data = json!({"v1": b64("whsec_one"), "v2": b64("whsec_two")});
            expect(
                &mut api,
                "GET",
                KEYS_SECRET,
                (200, secret("stripe-keys", data, json!([]))),
            )
            .await;
            api
        },
    )
    .await;
    result.unwrap();
    assert_eq!(out, "200 {\"received\":true,\"duplicate\":false}\n");
    assert_eq!(
        seen.lock().unwrap().clone(),
        Some(("/hooks/pay/stripe".to_string(), true)),
        "signed with the newest key"
    );
}

#[tokio::test]
async fn send_names_a_missing_secret_and_sends_nothing() {
    let (result, out) = plugin(
        &[
            "send",
            "stripe",
            "-n",
            "pay",
            "--body",
            "{}",
            "--url",
            "http://127.0.0.1:9",
        ],
        |mut api| async move {
            expect(&mut api, "GET", WI, (200, provider_integration())).await;
            expect(
                &mut api,
                "GET",
                KEYS_SECRET,
                not_found("secrets", "stripe-keys"),
            )
            .await;
            api
        },
    )
    .await;
    assert_eq!(error(result), "Secret pay/stripe-keys not found");
    assert_eq!(out, "");
}
