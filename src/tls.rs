//! One TLS crypto provider for the whole process.
//!
//! kube's client and reqwest both sit on rustls. If more than one rustls provider is compiled in
//! (kube's default features bring `ring`, reqwest's bring `aws-lc-rs`), rustls cannot pick one and
//! panics on the first HTTPS connection, such as the controller's first call to a real API server.
//! Only `aws-lc-rs` is compiled in (Cargo.toml), and the binaries also install it explicitly.

/// Installs `aws-lc-rs` as the process-wide rustls provider; a second call is a no-op.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    /// Fails (panics in rustls) when a second provider is compiled in, even without an explicit
    /// install: building a client for an HTTPS API server needs a provider rustls can choose.
    #[tokio::test]
    async fn an_https_kube_client_builds_without_an_explicit_provider() {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        kube::Client::try_from(config).expect("a client for an HTTPS server");
        reqwest::Client::builder()
            .build()
            .expect("an HTTPS-capable reqwest client");
    }
}
