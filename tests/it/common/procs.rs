//! Helpers for tests that run hookgate as real processes against a database of their own.

use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_hookgate");

/// A loopback port for a child process to bind: the bench's picker, so that tests running side by
/// side in this process never get one port twice, and the kernel never hands it to a `bind(0)` or
/// an outgoing connection before the child binds it (`hookgate::cli::bench::free_port`).
pub fn free_port() -> u16 {
    hookgate::cli::bench::free_port().unwrap().port()
}

/// A fresh database on the server DATABASE_URL points at: (admin URL, its URL). Drop it with
/// [`drop_database`].
pub async fn fresh_database() -> Option<(String, String)> {
    let admin_url = std::env::var("DATABASE_URL").ok()?;
    let name = format!("hookgate_fault_{:08x}", rand::random::<u32>());
    let mut conn = PgConnection::connect(&admin_url).await.unwrap();
    // The name is generated here (hex), not user input.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let mut url = reqwest::Url::parse(&admin_url).unwrap();
    url.set_path(&name);
    Some((admin_url, url.to_string()))
}

pub async fn drop_database(admin_url: &str, url: &str) {
    let name = reqwest::Url::parse(url)
        .unwrap()
        .path()
        .trim_start_matches('/')
        .to_string();
    let mut conn = PgConnection::connect(admin_url).await.unwrap();
    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await;
}

/// The `application_name` of every connection open to the database of `url`, but the caller's.
pub async fn connection_names(admin_url: &str, url: &str) -> std::collections::BTreeSet<String> {
    let url = reqwest::Url::parse(url).unwrap();
    let mut admin = PgConnection::connect(admin_url).await.unwrap();
    sqlx::query_scalar(
        "SELECT application_name FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&url.path()[1..])
    .fetch_all(&mut admin)
    .await
    .unwrap()
    .into_iter()
    .collect()
}

/// Waits until `GET url` answers 200 (60 s at most); panics with `log` if `child` exits first, so
/// a role that failed to start (a port taken meanwhile, say) says why instead of timing out.
pub async fn wait_ready(
    url: &str,
    what: &str,
    child: &mut std::process::Child,
    log: &std::path::Path,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reqwest::get(url).await.is_ok_and(|r| r.status() == 200) {
        let exited = child.try_wait().unwrap();
        if exited.is_some() || Instant::now() > deadline {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("{what} did not become ready ({exited:?}):\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts `hookgate <args> -f <dir>/m.yaml --database-url <url> --admin-listen <free port>` with
/// `env`, its stderr in `<dir>/<name>.log`, and waits (60 s at most) for its /readyz; panics with
/// the log if it exits or never becomes ready.
pub async fn start_ready(
    dir: &std::path::Path,
    name: &str,
    args: &[&str],
    url: &str,
    env: &[(&str, &str)],
) -> Proc {
    let admin = free_port();
    let log_path = dir.join(format!("{name}.log"));
    let child = std::process::Command::new(BIN)
        .args(args)
        .arg("-f")
        .arg(dir.join("m.yaml"))
        .args(["--database-url", url])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let mut proc = Proc(child);
    let ready = format!("http://127.0.0.1:{admin}/readyz");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reqwest::get(&ready).await.is_ok_and(|r| r.status() == 200) {
        let exited = proc.0.try_wait().unwrap();
        if exited.is_some() || Instant::now() > deadline {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            panic!("{name} did not become ready ({exited:?}):\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proc
}

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
