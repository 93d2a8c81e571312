#![forbid(unsafe_code)]
use clap::Parser;
use hookgate::cli::{Cli, LogFormat};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's malloc: allocation and freeing were about a seventh of the
/// receiver's and workers' CPU under load (docs/performance.md, round 7).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    hookgate::tls::install_crypto_provider();
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Log lines are written by a thread of their own, a batch every few milliseconds; load slows
    // the roles down rather than dropping lines (see `hookgate::logs::LogBuffer`).
    let (writer, flushed) =
        match hookgate::logs::LogBuffer::start(std::io::stderr(), Default::default()) {
            Ok(started) => started,
            Err(e) => {
                eprintln!("error: could not start the log thread: {e}");
                std::process::exit(1);
            }
        };
    // Colour only on a terminal: log files and collectors get plain text.
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_timer(hookgate::logs::Timestamps)
        .with_writer(writer);
    match cli.log_format {
        LogFormat::Json => fmt
            .json()
            .event_format(hookgate::logs::JsonLines::default())
            .init(),
        LogFormat::Text => fmt.init(),
    }
    let result = hookgate::cli::run(cli).await;
    // Everything logged so far reaches stderr before the error line and the exit.
    drop(flushed);
    // One line with the whole context chain; no backtrace noise for a user's config mistake.
    if let Err(e) = result {
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
