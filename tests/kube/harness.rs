//! A real control plane for the suite: etcd and kube-apiserver (built by `tests/kube/build.sh`) on
//! free loopback ports, the way controller-runtime's envtest runs them, plus kubectl and helm from
//! `tests/kube/tools.sh`.
//!
//! The server runs with RBAC + Node authorization, the default admission plugins plus
//! NodeRestriction, a generated service-account signing key and issuer, and self-signed serving
//! certificates under a CA of its own. The admin is a static token in `system:masters`.
//!
//! Child processes are started by one keeper thread that lives as long as the test process, under
//! `setpriv --pdeathsig KILL`: whatever way the test process ends (a failed assertion, an abort,
//! a SIGKILL), the kernel kills etcd and kube-apiserver with it.

use crate::procs::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const ADMIN_TOKEN_LEN: usize = 32;

/// Where the binaries are: `None` (with the reason) when this machine cannot build them.
pub struct Tools {
    pub kube_apiserver: PathBuf,
    pub etcd: PathBuf,
    pub kubectl: PathBuf,
    pub helm: PathBuf,
}

fn run_script(script: &str) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("bash")
        .arg(root.join(script))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{script}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{script} exited with {}", out.status));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn tools() -> Result<&'static Tools, String> {
    static TOOLS: OnceLock<Result<Tools, String>> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            if Command::new("go").arg("version").output().is_err()
                && std::env::var_os("HOOKGATE_KUBE_BIN").is_none()
            {
                return Err(
                    "Go is not installed, so kube-apiserver and etcd cannot be built".into(),
                );
            }
            let bin = run_script("tests/kube/build.sh")?;
            let cache = run_script("tests/kube/tools.sh")?;
            Ok(Tools {
                kube_apiserver: bin.join("kube-apiserver"),
                etcd: bin.join("etcd"),
                kubectl: cache.join("kubectl/kubectl"),
                helm: cache.join("helm/helm"),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Spawns every control-plane child from one thread that never exits, so that `--pdeathsig`
/// (which fires when the spawning *thread* ends) fires only when the test process ends.
pub fn spawn(cmd: Command) -> Child {
    type Req = (Command, mpsc::Sender<std::io::Result<Child>>);
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Req>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Req>();
        std::thread::spawn(move || {
            for (mut cmd, reply) in rx {
                let _ = reply.send(cmd.spawn());
            }
            // Every sender lives in a static: unreachable, but never let this thread end early.
            loop {
                std::thread::park();
            }
        });
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    keeper.lock().unwrap().send((cmd, tx)).unwrap();
    rx.recv().unwrap().expect("spawn a child process")
}

/// Removes `dir` once this process has ended, however it ends: a shell of its own session waits
/// for its stdin, a pipe only this process holds, to close. The suite's shared server lives in a
/// static, which is never dropped, so its `TempDir` alone left ~130 MB of etcd data in the temp
/// directory after every run.
fn sweep_when_done(dir: &Path) -> Child {
    let mut cmd = Command::new("setsid");
    // The pause lets etcd, killed by --pdeathsig at the same moment, stop writing first.
    cmd.args(["sh", "-c", "cat >/dev/null; sleep 2; rm -rf -- \"$0\""])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    spawn(cmd)
}

pub fn deathbound(bin: &Path) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL", "--"]).arg(bin);
    cmd
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is installed");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CA, serving certificate for 127.0.0.1/localhost, service-account key pair, admin token file.
fn make_credentials(dir: &Path, admin_token: &str) {
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    let run = |line: String| openssl(dir, &line.split_whitespace().collect::<Vec<_>>());
    run(format!(
        "req -x509 -days 2 {ec} -keyout ca.key -out ca.crt -subj /CN=hookgate-test-ca"
    ));
    run(format!(
        "req {ec} -keyout serving.key -out serving.csr -subj /CN=localhost"
    ));
    std::fs::write(
        dir.join("serving.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(
        "x509 -req -in serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out serving.crt \
         -days 2 -extfile serving.ext"
            .into(),
    );
    run("genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key".into());
    run("pkey -in sa.key -pubout -out sa.pub".into());
    std::fs::write(
        dir.join("tokens.csv"),
        format!("{admin_token},hookgate-test-admin,hookgate-test-admin,\"system:masters\"\n"),
    )
    .unwrap();
}

/// One etcd + kube-apiserver pair. Dropping it stops both.
pub struct ApiServer {
    dir: tempfile::TempDir,
    /// Removes `dir` once the server is dropped or the test process ends ([`sweep_when_done`]).
    _sweeper: Child,
    etcd: Mutex<Child>,
    apiserver: Mutex<Option<Child>>,
    apiserver_args: Vec<String>,
    pub port: u16,
    pub admin_token: String,
    /// Set once `crds/` is applied and Established on this server.
    pub crd_applied: OnceLock<()>,
    pub tools: &'static Tools,
}

impl ApiServer {
    /// The suite's shared server, started on first use; `None` when the suite is skipped.
    pub fn shared() -> Option<&'static ApiServer> {
        static SHARED: OnceLock<Option<ApiServer>> = OnceLock::new();
        SHARED.get_or_init(ApiServer::start).as_ref()
    }

    /// A private server (for a test that stops it). `None` when the suite is skipped.
    pub fn start() -> Option<ApiServer> {
        let tools = match tools() {
            Ok(t) => t,
            Err(why) => {
                assert!(
                    std::env::var("HOOKGATE_REQUIRE_CLUSTER").as_deref() != Ok("1"),
                    "HOOKGATE_REQUIRE_CLUSTER=1 but the cluster suite cannot run: {why}"
                );
                eprintln!("SKIPPED cluster suite: {why}");
                return None;
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("hookgate-kube.")
            .tempdir()
            .unwrap();
        let sweeper = sweep_when_done(dir.path());
        let admin_token = crate::random_hex(ADMIN_TOKEN_LEN);
        make_credentials(dir.path(), &admin_token);
        let (client, peer, port) = (free_port(), free_port(), free_port());
        let log = |name: &str| std::fs::File::create(dir.path().join(name)).unwrap();
        let mut etcd = deathbound(&tools.etcd);
        etcd.args([
            "--name=default".to_string(),
            format!("--data-dir={}", dir.path().join("etcd").display()),
            format!("--listen-client-urls=http://127.0.0.1:{client}"),
            format!("--advertise-client-urls=http://127.0.0.1:{client}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-cluster=default=http://127.0.0.1:{peer}"),
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ])
        .stdout(log("etcd.log"))
        .stderr(log("etcd.log"));
        let etcd = spawn(etcd);
        let d = |f: &str| dir.path().join(f).display().to_string();
        let apiserver_args = vec![
            format!("--etcd-servers=http://127.0.0.1:{client}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // The default reconciler refuses a loopback address for the `kubernetes` Service.
            "--endpoint-reconciler-type=none".into(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", d("certs")),
            format!("--tls-cert-file={}", d("serving.crt")),
            format!("--tls-private-key-file={}", d("serving.key")),
            format!("--client-ca-file={}", d("ca.crt")),
            format!("--token-auth-file={}", d("tokens.csv")),
            "--authorization-mode=Node,RBAC".into(),
            // The defaults a cluster runs with, plus the one kubeadm adds.
            "--enable-admission-plugins=NodeRestriction".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", d("sa.pub")),
            format!("--service-account-signing-key-file={}", d("sa.key")),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--allow-privileged=true".into(),
            "--v=1".into(),
        ];
        let server = ApiServer {
            dir,
            _sweeper: sweeper,
            etcd: Mutex::new(etcd),
            apiserver: Mutex::new(None),
            apiserver_args,
            port,
            admin_token,
            crd_applied: OnceLock::new(),
            tools,
        };
        server.write_kubeconfig("admin.kubeconfig", &server.admin_token.clone(), None);
        server.start_apiserver();
        Some(server)
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// Writes a kubeconfig with a bearer token (and a default namespace) and returns its path.
    pub fn write_kubeconfig(&self, name: &str, token: &str, namespace: Option<&str>) -> PathBuf {
        let ca = self.dir.path().join("ca.crt");
        let ns = namespace
            .map(|n| format!("\n    namespace: {n}"))
            .unwrap_or_default();
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: user{ns}\ncurrent-context: test\n",
            self.url(),
            ca.display()
        );
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// (Re)starts kube-apiserver with the same flags and waits for `/readyz`.
    pub fn start_apiserver(&self) {
        let mut slot = self.apiserver.lock().unwrap();
        assert!(slot.is_none(), "kube-apiserver is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("kube-apiserver.log"))
            .unwrap();
        let mut cmd = deathbound(&self.tools.kube_apiserver);
        cmd.args(&self.apiserver_args)
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        *slot = Some(spawn(cmd));
        drop(slot);
        self.wait_ready(Duration::from_secs(120));
    }

    /// Stops kube-apiserver (etcd keeps running). It must be running until this kill: an outage
    /// test whose server had already died, or that stopped nothing, would prove nothing.
    pub fn stop_apiserver(&self) {
        use std::os::unix::process::ExitStatusExt;
        let mut child = self
            .apiserver
            .lock()
            .unwrap()
            .take()
            .expect("kube-apiserver is running");
        child.kill().expect("kill kube-apiserver");
        let status = child.wait().expect("reap kube-apiserver");
        assert_eq!(
            status.signal(),
            Some(9),
            "kube-apiserver ended by itself before it was stopped ({status}):\n{}",
            self.log_tail()
        );
    }

    fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let out = self.kubectl(&["get", "--raw", "/readyz"]).output().unwrap();
            if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
                return;
            }
            let exited = match self.apiserver.lock().unwrap().as_mut() {
                Some(child) => child.try_wait().ok().flatten(),
                None => None,
            };
            if let Some(status) = exited {
                panic!("kube-apiserver exited ({status}):\n{}", self.log_tail());
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready within {within:?}:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    pub fn log_tail(&self) -> String {
        let log =
            std::fs::read_to_string(self.dir.path().join("kube-apiserver.log")).unwrap_or_default();
        let lines: Vec<_> = log.lines().rev().take(40).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// kubectl as the admin.
    pub fn kubectl(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.tools.kubectl);
        cmd.env("KUBECONFIG", self.admin_kubeconfig()).args(args);
        cmd
    }

    /// helm as the admin, with its own config and cache directories.
    pub fn helm(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.tools.helm);
        let home = self.dir.path().join("helm");
        cmd.env("KUBECONFIG", self.admin_kubeconfig())
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .args(args);
        cmd
    }

    /// An admin kube client (kube-rs), built from the admin kubeconfig.
    pub async fn client(&self) -> kube::Client {
        client_from(&self.admin_kubeconfig()).await
    }
}

pub async fn client_from(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

impl Drop for ApiServer {
    /// Best effort: a test that failed may leave either process already gone, and a panic here
    /// would hide its message.
    fn drop(&mut self) {
        if let Some(mut child) = self.apiserver.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let mut etcd = self.etcd.lock().unwrap();
        let _ = etcd.kill();
        let _ = etcd.wait();
    }
}
