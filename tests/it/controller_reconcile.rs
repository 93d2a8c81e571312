//! The reconciler against a scripted mock API server (tower-test): each test lists the exact API
//! calls a reconcile must make, in order, and what the server answers.

use chrono::{DateTime, Utc};
use hookgate::controller::reconcile::{Context, FINALIZER, reconcile};
use hookgate::crd::WebhookIntegration;
use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

#[allow(dead_code)]
use crate::common::mock_api;
use mock_api::Handle;

fn now() -> DateTime<Utc> {
    "2026-12-01T00:00:00Z".parse().unwrap()
}

fn context() -> (Arc<Context>, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "hookgate-controller".into(),
            instance: None,
        },
    );
    let ctx = Context {
        client,
        namespace: "hookgate-system".into(),
        inbox: None,
        recorder,
        clock: now,
        metrics: Default::default(),
    };
    (Arc::new(ctx), handle)
}

/// The `hookgate_key_phase` series the controller exports, sorted, as `key=phase`.
fn phase_series(ctx: &Context) -> Vec<String> {
    let text = ctx.metrics.encode();
    let mut series: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("hookgate_key_phase{integration=\"pay/stripe\",key=\""))
        .map(|l| l.replace("\",phase=\"", "=").replace("\"} 1", ""))
        .collect();
    series.sort();
    series
}

fn integration(
    keys: Value,
    status: Option<Value>,
    finalizer: bool,
    deleting: bool,
) -> WebhookIntegration {
    let mut wi = json!({
        "apiVersion": "hookgate.dev/v1alpha1",
        "kind": "WebhookIntegration",
        "metadata": {"name": "stripe", "namespace": "pay", "generation": 2, "resourceVersion": "7", "uid": "u-1"},
        "spec": {"scheme": {"type": "stripe"}, "keys": keys, "rotation": {"overlap": "24h"},
                 "delivery": {"url": "http://billing:8080/hooks"}},
    });
    if finalizer {
        wi["metadata"]["finalizers"] = json!([FINALIZER]);
    }
    if deleting {
        wi["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
    }
    if let Some(s) = status {
        wi["status"] = s;
    }
    serde_json::from_value(wi).unwrap()
}

fn keys(ids: &[&str]) -> Value {
    Value::Array(
        ids.iter()
            .map(|id| json!({"id": id, "secretRef": {"name": "stripe-keys", "key": id}}))
            .collect(),
    )
}

fn secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "stripe-keys", "namespace": "pay"},
           "data": {"v1": "d2hzZWNfb25l", "v2": "d2hzZWNfdHdv"}})
}

fn not_found() -> (u16, Value) {
    (
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
    )
}

/// Answers the next request if it matches `method` and `path` (query ignored); returns its body.
async fn expect(handle: &mut Handle, method: &str, path: &str, answer: (u16, Value)) -> Value {
    mock_api::answer(handle, method, path, answer).await.body
}

const WI: &str = "/apis/hookgate.dev/v1alpha1/namespaces/pay/webhookintegrations/stripe";
const ROUTE: &str = "/api/v1/namespaces/hookgate-system/secrets/route.pay.stripe";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/pay/events";
const ROUTES: &str = "/api/v1/namespaces/hookgate-system/secrets";

/// The metadata list of compiled route Secrets, each with its recorded path claim.
fn routes(claims: &[(&str, &str, &str, &str)]) -> Value {
    let items: Vec<Value> = claims
        .iter()
        .map(|(integration, path, at, uid)| {
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                   "metadata": {"name": format!("route.{}", integration.replace('/', ".")),
                                "namespace": "hookgate-system",
                                "annotations": {"hookgate.dev/integration": integration,
                                                "hookgate.dev/path": path,
                                                "hookgate.dev/claimed-at": at,
                                                "hookgate.dev/uid": uid}}})
        })
        .collect();
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
           "metadata": {"resourceVersion": "1"}, "items": items})
}

fn condition<'a>(status: &'a Value, t: &str) -> &'a Value {
    status["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == t)
        .unwrap()
}

/// Expects the status patch and checks that it says Ready=False with `reason`, its message
/// containing `says`; returns the patch.
async fn expect_not_ready(api: &mut Handle, reason: &str, says: &str) -> Value {
    let status = expect(api, "PATCH", &format!("{WI}/status"), (200, wi_answer())).await;
    let ready = condition(&status, "Ready");
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("False"), Some(reason))
    );
    assert!(ready["message"].as_str().unwrap().contains(says), "{ready}");
    status
}

#[tokio::test]
async fn first_apply_adds_the_finalizer_then_programs_the_route() {
    let (ctx, mut api) = context();
    let wi = integration(keys(&["v1"]), None, false, false);
    let with_finalizer =
        serde_json::to_value(integration(keys(&["v1"]), None, true, false)).unwrap();
    let script = tokio::spawn(async move {
        let patch = expect(&mut api, "PATCH", WI, (200, with_finalizer)).await;
        assert!(patch.to_string().contains(FINALIZER), "{patch}");
        api
    });
    assert_eq!(run(wi, ctx.clone()).await.unwrap(), Action::await_change());
    let mut api = script.await.unwrap();

    let wi = integration(keys(&["v1"]), None, true, false);
    let script = tokio::spawn(async move {
        expect(
            &mut api,
            "GET",
            "/api/v1/namespaces/pay/secrets/stripe-keys",
            (200, secret()),
        )
        .await;
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        let route = expect(&mut api, "PATCH", ROUTE, (200, route_answer())).await;
        assert_eq!(
            route["metadata"]["labels"]["hookgate.dev/route"],
            "pay.stripe"
        );
        assert!(route["data"]["manifests.yaml"].is_string());
        let status = expect(
            &mut api,
            "PATCH",
            &format!("{WI}/status"),
            (200, wi_answer()),
        )
        .await;
        assert_eq!(condition(&status, "Ready")["status"], "True");
        assert_eq!(status["status"]["keys"][0]["phase"], "Active");
        assert_eq!(status["status"]["route"], "/hooks/pay/stripe");
        let event = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
        assert_eq!(event["reason"], "KeyActivated");
    });
    let action = run(wi, ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(3600)));
    script.await.unwrap();
}

#[tokio::test]
async fn adding_a_key_moves_the_old_one_to_retiring_and_requeues() {
    let (ctx, mut api) = context();
    let previous =
        json!({"keys": [{"id": "v1", "phase": "Active", "since": "2026-11-01T00:00:00Z"}]});
    let wi = integration(keys(&["v1", "v2"]), Some(previous), true, false);
    // As the previous reconcile left it.
    ctx.metrics.set_key_phases("pay/stripe", [("v1", "Active")]);
    let script = tokio::spawn(async move {
        expect(
            &mut api,
            "GET",
            "/api/v1/namespaces/pay/secrets/stripe-keys",
            (200, secret()),
        )
        .await;
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        let route = expect(&mut api, "PATCH", ROUTE, (200, route_answer())).await;
        let manifests = String::from_utf8(base64_decode(
            route["data"]["manifests.yaml"].as_str().unwrap(),
        ))
        .unwrap();
        assert!(
            manifests.contains("retireAt: 2026-12-02T00:00:00Z"),
            "{manifests}"
        );
        let status = expect(
            &mut api,
            "PATCH",
            &format!("{WI}/status"),
            (200, wi_answer()),
        )
        .await;
        let phases = phases_of(&status);
        assert_eq!(
            phases,
            [
                ("v1".into(), "Retiring".into()),
                ("v2".into(), "Active".into())
            ]
        );
        assert_eq!(status["status"]["nextRotationAt"], "2026-12-02T00:00:00Z");
        let mut reasons = Vec::new();
        for _ in 0..2 {
            reasons.push(
                expect(&mut api, "POST", EVENTS, (201, event_answer())).await["reason"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        reasons.sort();
        assert_eq!(reasons, ["KeyActivated", "KeyRetiring"]);
    });
    let action = run(wi, ctx.clone()).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(3600)));
    script.await.unwrap();
    // What status says, one series per key: v1's Active series is gone, not left at 1.
    assert_eq!(phase_series(&ctx), ["v1=Retiring", "v2=Active"]);
}

#[tokio::test]
async fn retire_at_reached_retires_the_key() {
    let (ctx, mut api) = context();
    let previous = json!({"keys": [
        {"id": "v1", "phase": "Retiring", "since": "2026-11-30T00:00:00Z", "retireAt": "2026-12-01T00:00:00Z"},
        {"id": "v2", "phase": "Active", "since": "2026-11-30T00:00:00Z"}]});
    let wi = integration(keys(&["v1", "v2"]), Some(previous), true, false);
    let script = tokio::spawn(async move {
        expect(
            &mut api,
            "GET",
            "/api/v1/namespaces/pay/secrets/stripe-keys",
            (200, secret()),
        )
        .await;
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        let route = expect(&mut api, "PATCH", ROUTE, (200, route_answer())).await;
        assert_eq!(
            route["metadata"]["annotations"]["hookgate.dev/retired-keys"], "v1",
            "the retirement is recorded beside the route, not only in status"
        );
        let status = expect(
            &mut api,
            "PATCH",
            &format!("{WI}/status"),
            (200, wi_answer()),
        )
        .await;
        assert_eq!(status["status"]["keys"][0]["phase"], "Retired");
        let event = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
        assert_eq!(event["reason"], "KeyRetired");
    });
    run(wi, ctx).await.unwrap();
    script.await.unwrap();
}

#[tokio::test]
async fn missing_secret_sets_a_false_condition_without_failing() {
    let (ctx, mut api) = context();
    let wi = integration(keys(&["v1"]), None, true, false);
    let script = tokio::spawn(async move {
        expect(
            &mut api,
            "GET",
            "/api/v1/namespaces/pay/secrets/stripe-keys",
            not_found(),
        )
        .await;
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        // No route is written: the status patch comes next.
        let status = expect(
            &mut api,
            "PATCH",
            &format!("{WI}/status"),
            (200, wi_answer()),
        )
        .await;
        let keys_ready = condition(&status, "KeysReady");
        assert_eq!(
            (keys_ready["status"].as_str(), keys_ready["reason"].as_str()),
            (Some("False"), Some("SecretNotFound"))
        );
        let event = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
        assert_eq!(
            (event["type"].as_str(), event["reason"].as_str()),
            (Some("Warning"), Some("SecretNotFound"))
        );
    });
    let action = run(wi, ctx).await.unwrap();
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(60)),
        "a bounded retry, not a crash loop"
    );
    script.await.unwrap();
}

/// Another namespace's integration claimed `/hooks/pay/stripe` first: this one is refused with
/// PathConflict naming the owner, and its compiled route (say, written in a race) is deleted.
#[tokio::test]
async fn a_path_claimed_first_by_another_namespace_is_refused_and_unrouted() {
    let (ctx, mut api) = context();
    let mut wi = integration(keys(&["v1"]), None, true, false);
    wi.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-11-01T00:00:00Z".parse().unwrap(),
    ));
    let script = tokio::spawn(async move {
        expect(
            &mut api,
            "GET",
            "/api/v1/namespaces/pay/secrets/stripe-keys",
            (200, secret()),
        )
        .await;
        let claims = [
            (
                "pay/stripe",
                "/hooks/pay/stripe",
                "2026-11-01T00:00:00Z",
                "u-1",
            ),
            (
                "attacker/x",
                "/hooks/pay/stripe",
                "2026-12-01T00:00:00Z",
                "u-9",
            ),
            (
                "owner/stripe",
                "/hooks/pay/stripe",
                "2026-10-01T00:00:00Z",
                "u-0",
            ),
        ];
        expect(&mut api, "GET", ROUTES, (200, routes(&claims))).await;
        expect(&mut api, "DELETE", ROUTE, (200, route_answer())).await;
        expect_not_ready(&mut api, "PathConflict", "owner/stripe").await;
        let event = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
        assert_eq!(event["reason"], "PathConflict");
        assert_eq!(event["type"], "Warning");
    });
    let action = run(wi, ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    script.await.unwrap();
}

/// When the API server refuses the compiled route (too large, invalid), status says so instead
/// of the reconcile failing in silence.
#[tokio::test]
async fn a_refused_route_is_explained_in_status() {
    let (ctx, mut api) = context();
    let wi = integration(keys(&["v1"]), None, true, false);
    let script = tokio::spawn(async move {
        expect(
            &mut api,
            "GET",
            "/api/v1/namespaces/pay/secrets/stripe-keys",
            (200, secret()),
        )
        .await;
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        let refused = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
                             "message": "Secret \"route.pay.stripe\" is invalid: data: Too long: must have at most 1048576 bytes"});
        expect(&mut api, "PATCH", ROUTE, (422, refused)).await;
        let status = expect_not_ready(&mut api, "RouteRejected", "Too long").await;
        assert_eq!(condition(&status, "RouteProgrammed")["status"], "False");
        loop {
            let event = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
            if event["reason"] == "RouteRejected" {
                break;
            }
        }
    });
    let action = run(wi, ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(60)));
    script.await.unwrap();
}

#[tokio::test]
async fn deletion_removes_the_compiled_route_then_the_finalizer() {
    let (ctx, mut api) = context();
    let wi = integration(keys(&["v1"]), None, true, true);
    let released = serde_json::to_value(integration(keys(&["v1"]), None, false, true)).unwrap();
    ctx.metrics.set_key_phases("pay/stripe", [("v1", "Active")]);
    let script = tokio::spawn(async move {
        expect(&mut api, "DELETE", ROUTE, not_found()).await;
        let patch = expect(&mut api, "PATCH", WI, (200, released)).await;
        assert!(
            patch.to_string().contains("remove"),
            "finalizer removed: {patch}"
        );
    });
    assert_eq!(run(wi, ctx.clone()).await.unwrap(), Action::await_change());
    script.await.unwrap();
    assert!(
        phase_series(&ctx).is_empty(),
        "a deleted integration keeps no key phase series"
    );
}

/// Reconciles with a deadline: an API call the script does not expect gets no answer, so an
/// unexpected extra call fails the test instead of hanging it.
async fn run(
    wi: WebhookIntegration,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<hookgate::controller::reconcile::ReconcileError>>
{
    tokio::time::timeout(Duration::from_secs(5), reconcile(Arc::new(wi), ctx))
        .await
        .expect("reconcile made an API call the script did not expect")
}

/// `(id, phase)` of every key in a status patch body.
fn phases_of(status: &Value) -> Vec<(String, String)> {
    status["status"]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["id"].as_str().unwrap().into(),
                k["phase"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn route_answer() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "route.pay.stripe", "namespace": "hookgate-system"}})
}

fn wi_answer() -> Value {
    serde_json::to_value(integration(keys(&["v1"]), None, true, false)).unwrap()
}

fn event_answer() -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "pay"},
           "eventTime": "2026-12-01T00:00:00.000000Z"})
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// `spec.rotation.generate`: a changed `hookgate.dev/rotate` annotation makes the controller add a
/// fresh key to the Secret it owns; the previous generated key starts retiring.
#[tokio::test]
async fn rotate_annotation_generates_a_new_key_and_retires_the_old_one() {
    let (ctx, mut api) = context();
    let mut wi = serde_json::to_value(integration(json!([]), None, true, false)).unwrap();
    wi["spec"]["scheme"] = json!({"type": "standard-webhooks"});
    wi["spec"]["rotation"] = json!({"generate": true, "overlap": "24h"});
    wi["metadata"]["annotations"] = json!({"hookgate.dev/rotate": "t2"});
    wi["status"] = json!({"keys": [{"id": "g-20261101-000000", "phase": "Active", "since": "2026-11-01T00:00:00Z"}]});
    let wi: WebhookIntegration = serde_json::from_value(wi).unwrap();
    let owned = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "stripe-signing-keys", "namespace": "pay", "annotations": {"hookgate.dev/rotate-handled": "t1"}, "ownerReferences": [owned_by_stripe()]},
        "data": {"g-20261101-000000": base64_encode(b"whsec_c2VjcmV0LW9uZS1zZWNyZXQtb25lLXNlY3JldC0x")}});
    let script = tokio::spawn(async move {
        let path = "/api/v1/namespaces/pay/secrets/stripe-signing-keys";
        expect(&mut api, "GET", path, (200, owned.clone())).await;
        let applied = expect(&mut api, "PATCH", path, (200, owned)).await;
        let data = applied["data"].as_object().unwrap();
        assert_eq!(
            data.len(),
            2,
            "the old key stays for the overlap: {applied}"
        );
        let fresh =
            String::from_utf8(base64_decode(data["g-20261201-000000"].as_str().unwrap())).unwrap();
        assert!(fresh.starts_with("whsec_"), "standard-webhooks format");
        assert_eq!(
            applied["metadata"]["annotations"]["hookgate.dev/rotate-handled"],
            "t2"
        );
        assert_eq!(
            applied["metadata"]["ownerReferences"][0]["kind"],
            "WebhookIntegration"
        );
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        expect(&mut api, "PATCH", ROUTE, (200, route_answer())).await;
        let status = expect(
            &mut api,
            "PATCH",
            &format!("{WI}/status"),
            (200, wi_answer()),
        )
        .await;
        let phases = phases_of(&status);
        assert_eq!(
            phases,
            [
                ("g-20261101-000000".into(), "Retiring".into()),
                ("g-20261201-000000".into(), "Active".into())
            ]
        );
        let status_text = status.to_string();
        assert!(
            !status_text.contains("whsec_"),
            "no secret in status: {status_text}"
        );
        let first = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
        assert_eq!(first["reason"], "KeyGenerated");
        assert!(!first.to_string().contains(&fresh), "no secret in events");
        for _ in 0..2 {
            expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
        }
    });
    run(wi, ctx).await.unwrap();
    script.await.unwrap();
}

/// The owner reference the controller puts on the Secret it generates keys in.
fn owned_by_stripe() -> Value {
    json!({"apiVersion": "hookgate.dev/v1alpha1", "kind": "WebhookIntegration", "name": "stripe",
           "uid": "u-1", "controller": true})
}

/// A `<name>-signing-keys` Secret the integration does not own (created by someone else, or
/// owned by another object) is never adopted: no write to it, no route from it, SecretNotOwned.
#[tokio::test]
async fn a_signing_keys_secret_it_did_not_create_is_not_adopted() {
    for owners in [
        json!([]),
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u-9", "controller": true}]),
    ] {
        let (ctx, mut api) = context();
        let mut wi = serde_json::to_value(integration(json!([]), None, true, false)).unwrap();
        wi["spec"]["scheme"] = json!({"type": "github"});
        wi["spec"]["rotation"] = json!({"generate": true});
        let wi: WebhookIntegration = serde_json::from_value(wi).unwrap();
        let planted = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "stripe-signing-keys", "namespace": "pay", "ownerReferences": owners},
            "data": {"g-20261101-000000": base64_encode(b"attacker-chosen")}});
        let script = tokio::spawn(async move {
            let path = "/api/v1/namespaces/pay/secrets/stripe-signing-keys";
            expect(&mut api, "GET", path, (200, planted)).await;
            expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
            // Straight to status: neither the Secret nor a route is written.
            let status =
                expect_not_ready(&mut api, "SecretNotOwned", "pay/stripe-signing-keys").await;
            assert!(!status.to_string().contains("attacker-chosen"));
            let event = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
            assert_eq!(event["reason"], "SecretNotOwned");
        });
        run(wi, ctx).await.unwrap();
        script.await.unwrap();
    }
}

/// A rotation asked for within the second the current generated key was made in cannot take a
/// new id yet: the reconcile comes back in a second instead of at the next resync (found by
/// the cluster suite, where a rotation right after the first key waited 30 s).
#[tokio::test]
async fn a_rotation_in_the_same_second_as_the_last_key_comes_back_in_a_second() {
    let (ctx, mut api) = context();
    let mut wi = serde_json::to_value(integration(json!([]), None, true, false)).unwrap();
    wi["spec"]["scheme"] = json!({"type": "github"});
    wi["spec"]["rotation"] = json!({"generate": true});
    wi["metadata"]["annotations"] = json!({"hookgate.dev/rotate": "t2"});
    let wi: WebhookIntegration = serde_json::from_value(wi).unwrap();
    let owned = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "stripe-signing-keys", "namespace": "pay", "annotations": {"hookgate.dev/rotate-handled": "t1"}, "ownerReferences": [owned_by_stripe()]},
        "data": {"g-20261201-000000": base64_encode(b"made-this-second")}});
    let script = tokio::spawn(async move {
        let path = "/api/v1/namespaces/pay/secrets/stripe-signing-keys";
        expect(&mut api, "GET", path, (200, owned)).await;
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        expect(&mut api, "PATCH", ROUTE, (200, route_answer())).await;
        expect(
            &mut api,
            "PATCH",
            &format!("{WI}/status"),
            (200, wi_answer()),
        )
        .await;
        // The key it already had is announced; nothing is generated yet.
        let event = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
        assert_eq!(event["reason"], "KeyActivated");
    });
    let action = run(wi, ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(1)));
    script.await.unwrap();
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A generated key retired for longer than keepRetired leaves status and the owned Secret.
#[tokio::test]
async fn long_retired_generated_keys_are_removed_from_the_owned_secret() {
    let (ctx, mut api) = context();
    let mut wi = serde_json::to_value(integration(json!([]), None, true, false)).unwrap();
    wi["spec"]["scheme"] = json!({"type": "github"});
    wi["spec"]["rotation"] = json!({"generate": true, "keepRetired": "7d"});
    wi["metadata"]["annotations"] = json!({"hookgate.dev/rotate": "t1"});
    wi["status"] = json!({"keys": [
        {"id": "g-20261001-000000", "phase": "Retired", "since": "2026-10-05T00:00:00Z", "retireAt": "2026-10-05T00:00:00Z"},
        {"id": "g-20261101-000000", "phase": "Active", "since": "2026-11-01T00:00:00Z"}]});
    let wi: WebhookIntegration = serde_json::from_value(wi).unwrap();
    let owned = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "stripe-signing-keys", "namespace": "pay", "annotations": {"hookgate.dev/rotate-handled": "t1"}, "ownerReferences": [owned_by_stripe()]},
        "data": {"g-20261001-000000": base64_encode(b"old-secret"), "g-20261101-000000": base64_encode(b"new-secret")}});
    let script = tokio::spawn(async move {
        let path = "/api/v1/namespaces/pay/secrets/stripe-signing-keys";
        expect(&mut api, "GET", path, (200, owned.clone())).await;
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        let applied = expect(&mut api, "PATCH", path, (200, owned)).await;
        let ids: Vec<&String> = applied["data"].as_object().unwrap().keys().collect();
        assert_eq!(ids, ["g-20261101-000000"], "only the expired key goes");
        assert_eq!(
            applied["metadata"]["annotations"]["hookgate.dev/rotate-handled"],
            "t1"
        );
        expect(&mut api, "PATCH", ROUTE, (200, route_answer())).await;
        let status = expect(
            &mut api,
            "PATCH",
            &format!("{WI}/status"),
            (200, wi_answer()),
        )
        .await;
        let ids: Vec<&str> = status["status"]["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["g-20261101-000000"]);
        let event = expect(&mut api, "POST", EVENTS, (201, event_answer())).await;
        assert_eq!(event["reason"], "KeyRemoved");
    });
    run(wi, ctx).await.unwrap();
    script.await.unwrap();
}

/// With the inbox connected, status carries the traffic figures and the reconcile comes back
/// within 30 s to refresh them.
#[tokio::test]
async fn status_carries_inbox_figures_refreshed_every_30s() {
    let dir = tempfile::tempdir().unwrap();
    let inbox =
        hookgate::inbox::Inbox::connect(&format!("sqlite://{}", dir.path().join("i.db").display()))
            .await
            .unwrap();
    inbox.migrate().await.unwrap();
    let hookgate::inbox::Inbox::Sqlite(pool) = &inbox else {
        unreachable!()
    };
    for (id, status, received) in [
        ("e1", "pending", "2026-11-30T23:58:00+00:00"),
        ("e2", "retry", "2026-11-30T23:59:00+00:00"),
        ("e3", "dead_letter", "2026-11-30T23:59:30+00:00"),
        ("e4", "processed", "2026-11-30T23:59:59+00:00"),
    ] {
        sqlx::query(
            "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, body_sha256, status, received_at) \
             VALUES ('pay/stripe', $1, 'stripe', 'v1', '[]', x'', x'', $2, $3)",
        )
        .bind(id)
        .bind(status)
        .bind(received)
        .execute(pool)
        .await
        .unwrap();
    }
    // What the receiver that stored them writes (`key_usage`): v1's latest use.
    let last = "2026-11-30T23:59:59Z".parse().unwrap();
    inbox
        .record_key_use(&[("pay/stripe", "v1", last)])
        .await
        .unwrap();
    let (ctx, mut api) = context();
    let ctx = Arc::new(Context {
        inbox: Some(inbox),
        ..Arc::into_inner(ctx).unwrap()
    });
    let wi = integration(
        keys(&["v1"]),
        Some(json!({"keys": [{"id": "v1", "phase": "Active", "since": "2026-11-01T00:00:00Z"}]})),
        true,
        false,
    );
    let script = tokio::spawn(async move {
        expect(
            &mut api,
            "GET",
            "/api/v1/namespaces/pay/secrets/stripe-keys",
            (200, secret()),
        )
        .await;
        expect(&mut api, "GET", ROUTES, (200, routes(&[]))).await;
        expect(&mut api, "PATCH", ROUTE, (200, route_answer())).await;
        let status = expect(
            &mut api,
            "PATCH",
            &format!("{WI}/status"),
            (200, wi_answer()),
        )
        .await;
        let s = &status["status"];
        assert_eq!(
            (s["pending"].as_i64(), s["deadLetters"].as_i64()),
            (Some(2), Some(1))
        );
        assert_eq!(
            s["oldestPendingSeconds"], 120,
            "e1, received two minutes before now"
        );
        assert_eq!(s["lastReceivedAt"], "2026-11-30T23:59:59Z");
        assert_eq!(s["keys"][0]["lastUsedAt"], "2026-11-30T23:59:59Z");
        assert_eq!(s["dedupeConflicts"], 0);
    });
    assert_eq!(
        run(wi, ctx).await.unwrap(),
        Action::requeue(Duration::from_secs(30))
    );
    script.await.unwrap();
}
