#![forbid(unsafe_code)]
//! `kubectl hookgate`: rotation and inspection of WebhookIntegrations from kubectl.

#[tokio::main]
async fn main() {
    hookgate::plugin::main().await
}
