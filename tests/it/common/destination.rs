//! A real HTTP destination on loopback that records every delivery and answers from a script.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the destination does with one request.
#[derive(Clone, Debug)]
pub enum Answer {
    Status(u16),
    StatusRetryAfter(u16, &'static str),
    /// Never answers within any sane timeout.
    Hang,
    /// 200, after this long.
    After(Duration),
}

#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct Inner {
    script: Mutex<VecDeque<Answer>>,
    fallback: Mutex<Option<Answer>>,
    received: Mutex<Vec<Received>>,
}

#[derive(Clone)]
pub struct Destination {
    inner: Arc<Inner>,
    pub url: String,
}

impl Destination {
    /// Starts on 127.0.0.1:0; answers 200 unless scripted otherwise.
    pub async fn start() -> Self {
        Self::start_on("127.0.0.1:0").await
    }

    /// Starts on another loopback address (all of 127.0.0.0/8 is loopback on Linux).
    pub async fn start_on(addr: &str) -> Self {
        let inner = Arc::new(Inner::default());
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let url = format!("http://{}/deliver", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { inner, url }
    }

    /// The next requests get these answers, in order.
    pub fn script(&self, answers: impl IntoIterator<Item = Answer>) {
        self.inner.script.lock().unwrap().extend(answers);
    }

    /// Every request after the script gets this answer.
    pub fn always(&self, answer: Answer) {
        *self.inner.fallback.lock().unwrap() = Some(answer);
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    /// Waits until at least `n` requests arrived (bounded).
    pub async fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let got = self.received();
            if got.len() >= n || tokio::time::Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn answer(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Response {
    inner.received.lock().unwrap().push(Received {
        headers,
        body: body.to_vec(),
    });
    let next = inner.script.lock().unwrap().pop_front();
    let next = next
        .or_else(|| inner.fallback.lock().unwrap().clone())
        .unwrap_or(Answer::Status(200));
    match next {
        Answer::Status(code) => StatusCode::from_u16(code).unwrap().into_response(),
        Answer::StatusRetryAfter(code, after) => (
            StatusCode::from_u16(code).unwrap(),
            [("retry-after", after)],
        )
            .into_response(),
        Answer::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::OK.into_response()
        }
        Answer::After(delay) => {
            tokio::time::sleep(delay).await;
            StatusCode::OK.into_response()
        }
    }
}
