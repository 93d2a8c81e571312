//! `hookgate sink`: a destination to try delivery with. It prints one line per request and, given
//! the integration's delivery secret, verifies the Standard Webhooks signature the way a real
//! destination should (401 when it does not match).

use crate::signature::{Key, Scheme, Unverified, Verifier, standard_webhooks};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use std::net::SocketAddr;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct SinkArgs {
    #[arg(long, default_value = "127.0.0.1:9000")]
    pub listen: SocketAddr,
    /// Status code to answer with (try 500 to watch retries, 410 for a dead letter).
    #[arg(long, default_value_t = 200)]
    pub status: u16,
    /// The integration's delivery secret (`whsec_...`): verify every `webhook-signature`.
    #[arg(long, env = "HOOKGATE_SINK_SECRET", hide_env_values = true)]
    pub signing_secret: Option<String>,
}

struct Sink {
    status: StatusCode,
    verifier: Option<Verifier>,
}

pub async fn run(
    args: SinkArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let status = StatusCode::from_u16(args.status)
        .map_err(|_| anyhow::anyhow!("--status {} is not an HTTP status", args.status))?;
    let verifier = match &args.signing_secret {
        None => None,
        Some(s) => {
            let material = standard_webhooks::parse_key(s.as_bytes())
                .map_err(|e| anyhow::anyhow!("--signing-secret: {e}"))?;
            let key = Key {
                id: "delivery".into(),
                material,
                not_after: None,
            };
            Some(Verifier::new(Scheme::StandardWebhooks, vec![key]))
        }
    };
    let state = Arc::new(Sink { status, verifier });
    let app = Router::new().fallback(receive).with_state(state);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    eprintln!("sink listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

async fn receive(
    State(sink): State<Arc<Sink>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let h = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_string()
    };
    let signature = match &sink.verifier {
        None if headers.contains_key("webhook-signature") => "present",
        None => "unsigned",
        Some(v) => {
            let fresh = |ts: Option<i64>| {
                ts.is_some_and(|t| (chrono::Utc::now().timestamp() - t).abs() <= 300)
            };
            match v.verify(
                Unverified {
                    headers: &headers,
                    query: None,
                    body: &body,
                },
                chrono::Utc::now(),
            ) {
                Ok(ok) if fresh(ok.timestamp()) => "valid",
                _ => "INVALID",
            }
        }
    };
    println!(
        "{} POST {} integration={} event_type={} attempt={} webhook-id={} bytes={} signature={}",
        chrono::Utc::now().format("%H:%M:%S%.3f"),
        uri.path(),
        h("hookgate-integration"),
        h("hookgate-event-type"),
        h("hookgate-attempt"),
        h("webhook-id"),
        body.len(),
        signature,
    );
    if signature == "INVALID" {
        StatusCode::UNAUTHORIZED
    } else {
        sink.status
    }
}
