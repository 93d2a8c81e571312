//! Helpers for tests that run hookgate as real processes against a database of their own.

use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_hookgate");

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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

/// Waits until `GET url` answers 200 (bounded).
pub async fn wait_ready(url: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reqwest::get(url).await.is_ok_and(|r| r.status() == 200) {
        assert!(Instant::now() < deadline, "{what} did not become ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
