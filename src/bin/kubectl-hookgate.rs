#![forbid(unsafe_code)]
//! `kubectl hookgate`: rotation and inspection of WebhookIntegrations from kubectl.

#[tokio::main]
async fn main() {
    hookgate::tls::install_crypto_provider();
    hookgate::plugin::main().await
}
