//! The HTTP ceiling: the intake's load generator (same connections, same signed requests) against
//! servers that do nothing but answer a fixed 200, so that the receiver's rate can be read as a
//! share of what HTTP on this machine allows.
//!
//! Both servers run in processes of their own, as the receiver does: a server sharing the load
//! generator's runtime would steal its threads and flatter neither. Both answer the bytes the
//! receiver answers an accepted event with.

use super::cpu::PerEvent;
use super::load::{self, Prepared};
use super::ports::free_port;
use super::requests::Cycle;
use super::setup::Env;
use super::stats::Run;
use anyhow::{Context, bail};
use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The report's rows (and CPU splits) of the two servers.
pub const HYPER_ROW: &str = "HTTP ceiling: hyper server, fixed 200";
pub const NGINX_ROW: &str = "HTTP ceiling: nginx, fixed 200";

/// The row of the server that set the ceiling (`"nginx"` or `"hyper"`).
pub fn row_of(server: &str) -> &'static str {
    if server == "nginx" {
        NGINX_ROW
    } else {
        HYPER_ROW
    }
}

/// The receiver's answer to a new event.
const ANSWER: &str = r#"{"received":true,"duplicate":false}"#;

/// `hookgate bench --serve-fixed ADDR`: a hyper HTTP/1.1 server that reads each request's body
/// and answers [`ANSWER`], on the default multi-threaded runtime (one thread per core, like the
/// receiver's). Runs until the process is killed.
pub async fn serve_fixed(addr: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        // As the receiver's listener does: answers are small and must not wait for Nagle.
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                |req: hyper::Request<hyper::body::Incoming>| async move {
                    // Read the body, as any real endpoint must before answering.
                    req.into_body().collect().await?;
                    hyper::Response::builder()
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from_static(ANSWER.as_bytes())))
                        .map_err(anyhow::Error::from)
                },
            );
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The minimal hyper server as a child process of the bench.
pub fn spawn_hyper(env: &Env) -> anyhow::Result<super::setup::Child> {
    let addr = free_port()?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["bench", "--serve-fixed", &addr.to_string()]);
    env.spawn_command("fixed-200", cmd, addr)
}

/// `nginx` on PATH, or where Debian installs it (/usr/sbin is not on every user's PATH).
pub fn find_nginx() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("nginx"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| Some(PathBuf::from("/usr/sbin/nginx")).filter(|p| p.is_file()))
}

/// The nginx configuration of the ceiling. One worker per core (`auto`), as the receiver runs one
/// runtime thread per core, with `reuseport` so that the kernel spreads the connections over
/// them. No access log: the ceiling is the HTTP exchange alone. Keep-alive without a request cap
/// (nginx closes after 1,000 by default), since the load generator keeps its connections.
pub fn nginx_conf(dir: &Path, addr: SocketAddr) -> String {
    let d = dir.display();
    format!(
        r#"worker_processes auto;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    keepalive_requests 4294967295;
    keepalive_timeout 300s;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen {addr} reuseport;
        location / {{
            default_type application/json;
            return 200 '{ANSWER}';
        }}
    }}
}}
"#
    )
}

/// nginx in the foreground with a scratch prefix; stopped (master and workers) when dropped.
pub struct Nginx {
    proc: std::process::Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// The master and its workers.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = super::cpu::children_of(self.proc.id());
        pids.push(self.proc.id());
        pids
    }

    pub async fn start(bin: &Path) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let addr = free_port()?;
        let conf = dir.path().join("nginx.conf");
        std::fs::write(&conf, nginx_conf(dir.path(), addr))?;
        let log = std::fs::File::create(dir.path().join("stderr.log"))?;
        let proc = Command::new(bin)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf)
            // Before reading the configuration nginx opens its compiled-in error log; -e keeps
            // it in the prefix, where an unprivileged user may write.
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let nginx = Self {
            proc,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            if Instant::now() > deadline {
                let read = |f: &str| std::fs::read_to_string(nginx._dir.path().join(f));
                bail!(
                    "nginx did not listen on {addr} within 10 s: {}{}",
                    read("stderr.log").unwrap_or_default(),
                    read("error.log").unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(nginx)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM makes the master stop its workers; SIGKILL would leave them running.
        let _ = Command::new("kill")
            .args(["-TERM", &self.proc.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.proc.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

/// The intake's closed loop against a server at `addr`: a warm-up, then the intake's requests
/// round and round for `run` (a fixed server is several times faster than the receiver; a run of
/// one pass over the requests would be over in milliseconds); with the CPU per request of the
/// run after the warm-up, the processes `servers` names then (nginx's workers are forked after it
/// listens) counted as the server.
pub async fn closed_loop(
    addr: SocketAddr,
    servers: impl FnOnce() -> Vec<u32>,
    warmup: &Arc<Vec<Prepared>>,
    requests: &Arc<Vec<Prepared>>,
    concurrency: usize,
    run: Duration,
    what: &str,
) -> anyhow::Result<(Run, Option<PerEvent>)> {
    load::closed_loop(addr, warmup, concurrency).await?;
    let cycle = Arc::new(Cycle {
        requests: requests.clone(),
        n: usize::MAX / 2,
    });
    let load = load::closed_loop_for(addr, &cycle, concurrency, Some(run));
    let (out, split) = super::cpu::measured(servers(), load, |o| o.run.count).await?;
    out.expect_all(200, false, what)?;
    Ok((out.run, split))
}
