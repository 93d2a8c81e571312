//! The `kubectl hookgate` plugin.

pub async fn main() {
    eprintln!("kubectl hookgate: not implemented yet");
    std::process::exit(2);
}
