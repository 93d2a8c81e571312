#![forbid(unsafe_code)]
use clap::Parser;
use hookgate::cli::{Cli, LogFormat};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Json => fmt.json().init(),
        LogFormat::Text => fmt.init(),
    }
    // One line with the whole context chain; no backtrace noise for a user's config mistake.
    if let Err(e) = hookgate::cli::run(cli).await {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
