#![forbid(unsafe_code)]
use clap::Parser;
use hookgate::cli::{Cli, LogFormat};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() {
    hookgate::tls::install_crypto_provider();
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only on a terminal: log files and collectors get plain text.
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Json => fmt.json().init(),
        LogFormat::Text => fmt.init(),
    }
    // One line with the whole context chain; no backtrace noise for a user's config mistake.
    if let Err(e) = hookgate::cli::run(cli).await {
        // Library errors already include their cause in Display; print each cause once.
        let mut msg = e.to_string();
        for cause in e.chain().skip(1).map(ToString::to_string) {
            if !msg.contains(&cause) {
                msg = format!("{msg}: {cause}");
            }
        }
        eprintln!("error: {msg}");
        std::process::exit(1);
    }
}
