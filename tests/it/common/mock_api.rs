//! A scripted Kubernetes API server (tower-test), the way kube-rs's controller-rs tests its
//! reconciler: each test answers, in order, the exact calls the code under test must make.

use http::{Request, Response};
use kube::client::Body;
use serde_json::Value;
use std::time::Duration;

pub type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// What the code under test sent.
pub struct Seen {
    pub content_type: Option<String>,
    pub body: Value,
}

/// Answers the next request with `answer`. It must be `method` on `path`; with a `?` in `path`
/// the query must match too, otherwise the query is not compared. A request that does not come
/// within 5 s fails the test.
pub async fn answer(handle: &mut Handle, method: &str, path: &str, answer: (u16, Value)) -> Seen {
    let (request, send) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .unwrap_or_else(|_| panic!("no request; expected {method} {path}"))
        .unwrap_or_else(|| panic!("the client stopped; expected {method} {path}"));
    let uri = request.uri().clone();
    let seen = if path.contains('?') {
        uri.path_and_query().map_or("", |p| p.as_str())
    } else {
        uri.path()
    };
    assert_eq!((request.method().as_str(), seen), (method, path), "{uri}");
    let content_type = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = request.into_body().collect_bytes().await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let response = Response::builder()
        .status(answer.0)
        .body(Body::from(serde_json::to_vec(&answer.1).unwrap()))
        .unwrap();
    send.send_response(response);
    Seen { content_type, body }
}
