//! What most cluster tests need: the CRD, a namespace, a Helm release of the chart, tokens minted
//! for its ServiceAccounts, and hookgate's roles running as host processes with those tokens.

use crate::harness::{self, ApiServer};
use crate::procs::{self, BIN, Proc, free_port};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const CRD: &str = "crds/webhookintegrations.hookgate.dev.yaml";
pub const CHART: &str = "charts/hookgate";
pub const PLUGIN: &str = env!("CARGO_BIN_EXE_kubectl-hookgate");

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `hookgate <args>` (the binary under test).
pub fn hookgate(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    cmd
}

/// Runs a command, returns (success, stdout, stderr), optionally with stdin.
pub fn output(mut cmd: Command, stdin: Option<&str>) -> (bool, String, String) {
    cmd.current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    drop(pipe);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(cmd: Command, stdin: Option<&str>) -> String {
    let what = format!("{cmd:?}");
    let (success, stdout, stderr) = output(cmd, stdin);
    assert!(success, "{what} failed:\n{stderr}\n{stdout}");
    stdout
}

impl ApiServer {
    /// `kubectl apply --server-side` of a YAML text, as the admin.
    pub fn apply(&self, yaml: &str) -> String {
        ok(
            self.kubectl(&["apply", "--server-side", "--field-manager=test", "-f", "-"]),
            Some(yaml),
        )
    }

    /// The CRD from `crds/`, applied once per server and Established.
    pub fn ensure_crd(&self) {
        self.crd_applied.get_or_init(|| {
            ok(self.kubectl(&["apply", "--server-side", "-f", CRD]), None);
            ok(
                self.kubectl(&[
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "crd/webhookintegrations.hookgate.dev",
                ]),
                None,
            );
        });
    }

    /// A new namespace named `<prefix>-<random>`.
    pub fn namespace(&self, prefix: &str) -> String {
        let ns = format!("{prefix}-{}", crate::random_hex(3));
        ok(self.kubectl(&["create", "namespace", &ns]), None);
        ns
    }

    /// A token for `namespace/sa` through the TokenRequest API, in a kubeconfig of its own.
    pub fn service_account_kubeconfig(&self, namespace: &str, sa: &str) -> PathBuf {
        let token = ok(
            self.kubectl(&["create", "token", sa, "-n", namespace, "--duration=2h"]),
            None,
        );
        self.write_kubeconfig(
            &format!("{namespace}-{sa}.kubeconfig"),
            token.trim(),
            Some(namespace),
        )
    }
}

/// Polls `check` every 250 ms until it holds; panics with `what` after `within`.
pub async fn wait_for(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A Helm release of the chart in a namespace of its own, with the controller watching one tenant
/// namespace (so that tests running side by side never reconcile each other's integrations).
pub struct Release {
    pub name: String,
    pub namespace: String,
    pub tenant: String,
    pub database_url: String,
    admin_db_url: String,
    cluster_wide: bool,
}

impl Release {
    /// `helm install` (hooks are run by hand: no pod ever runs here) and `hookgate migrate`.
    pub async fn install(server: &ApiServer, prefix: &str) -> Release {
        Release::install_with(server, prefix, false).await
    }

    /// A release whose controller watches every namespace (the chart's default): only on a
    /// private server, or it would reconcile the other tests' integrations.
    pub async fn install_cluster_wide(server: &ApiServer, prefix: &str) -> Release {
        Release::install_with(server, prefix, true).await
    }

    async fn install_with(server: &ApiServer, prefix: &str, cluster_wide: bool) -> Release {
        server.ensure_crd();
        let (admin_db_url, database_url) = procs::fresh_database()
            .await
            .expect("DATABASE_URL is set (tests/run.sh sets it)");
        let namespace = server.namespace(&format!("{prefix}-sys"));
        let tenant = server.namespace(&format!("{prefix}-app"));
        let name = format!("hg{}", crate::random_hex(3));
        let db = format!("database.url={database_url}");
        let watch = format!("controller.watchNamespace={tenant}");
        let mut args = vec![
            "install",
            &name,
            CHART,
            "-n",
            &namespace,
            "--no-hooks",
            "--set",
            &db,
        ];
        if !cluster_wide {
            args.extend(["--set", &watch]);
        }
        ok(server.helm(&args), None);
        ok(
            hookgate(&["migrate", "--database-url", &database_url]),
            None,
        );
        Release {
            name,
            namespace,
            tenant,
            database_url,
            admin_db_url,
            cluster_wide,
        }
    }

    /// Names of the compiled route Secrets in the release's namespace.
    pub fn routes(&self, server: &ApiServer) -> Vec<String> {
        let args = [
            "get",
            "secrets",
            "-n",
            &self.namespace,
            "-l",
            "hookgate.dev/route",
            "-o",
            "name",
        ];
        ok(server.kubectl(&args), None)
            .lines()
            .map(String::from)
            .collect()
    }

    pub fn service_account(&self, role: &str) -> String {
        format!("{}-hookgate-{role}", self.name)
    }

    pub fn kubeconfig(&self, server: &ApiServer, role: &str) -> PathBuf {
        server.service_account_kubeconfig(&self.namespace, &self.service_account(role))
    }

    pub async fn drop_database(&self) {
        procs::drop_database(&self.admin_db_url, &self.database_url).await;
    }

    /// The `application_name` of every connection open to the release's database.
    pub async fn connection_names(&self) -> std::collections::BTreeSet<String> {
        procs::connection_names(&self.admin_db_url, &self.database_url).await
    }
}

/// A hookgate role as a host process; killed (SIGKILL) when dropped.
pub struct Role {
    pub proc: Proc,
    pub listen: Option<u16>,
    pub admin: u16,
    pub log: PathBuf,
}

impl Drop for Role {
    /// A failing test shows what each of its roles logged last.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let logs = self.logs();
            let tail: Vec<&str> = logs
                .lines()
                .rev()
                .take(
                    std::env::var("HOOKGATE_TEST_LOG_LINES")
                        .ok()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(30),
                )
                .collect();
            let name = self.log.file_name().unwrap().to_string_lossy();
            eprintln!("--- last lines of {name}:");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

impl Role {
    /// `hookgate <args…>` with `KUBECONFIG` set, logging to a file under the server's directory.
    pub fn start(server: &ApiServer, kubeconfig: &Path, name: &str, args: &[String]) -> Role {
        let admin = free_port();
        let log = server
            .dir()
            .join(format!("{name}-{}.log", crate::random_hex(2)));
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = harness::deathbound(Path::new(BIN));
        cmd.args(args)
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                std::env::var("HOOKGATE_TEST_LOG").unwrap_or("info".into()),
            )
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        let child = harness::spawn(cmd);
        Role {
            proc: Proc(child),
            listen: None,
            admin,
            log,
        }
    }

    pub fn controller(server: &ApiServer, r: &Release, identity: &str) -> Role {
        let mut args = vec![
            "controller",
            "--namespace",
            &r.namespace,
            "--identity",
            identity,
            "--database-url",
            &r.database_url,
            // values-production.yaml's cap, so that every reconcile here runs within it.
            "--db-max-connections",
            "4",
        ];
        if !r.cluster_wide {
            args.extend(["--watch-namespace", &r.tenant]);
        }
        let kc = r.kubeconfig(server, "controller");
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        Role::start(server, &kc, identity, &args)
    }

    pub fn receiver(server: &ApiServer, r: &Release) -> Role {
        Role::receiver_with(server, r, &[])
    }

    /// A receiver with `extra` flags (`--with-workers`), as the receiver's ServiceAccount.
    pub fn receiver_with(server: &ApiServer, r: &Release, extra: &[&str]) -> Role {
        let port = free_port();
        let mut args = vec![
            "receiver".to_string(),
            "--namespace".into(),
            r.namespace.clone(),
            "--database-url".into(),
            r.database_url.clone(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let kc = r.kubeconfig(server, "receiver");
        let mut role = Role::start(server, &kc, "receiver", &args);
        role.listen = Some(port);
        role
    }

    pub fn worker(server: &ApiServer, r: &Release) -> Role {
        let args = [
            "worker",
            "--namespace",
            &r.namespace,
            "--database-url",
            &r.database_url,
            "--poll",
            "100ms",
        ];
        let kc = r.kubeconfig(server, "worker");
        Role::start(server, &kc, "worker", &args.map(String::from))
    }

    pub fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}",
            self.listen.expect("a listening role")
        )
    }

    /// Its admin port's `/metrics`.
    pub async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin);
        reqwest::get(&url).await.unwrap().text().await.unwrap()
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn wait_ready(&mut self, what: &str) {
        let url = format!("http://127.0.0.1:{}/readyz", self.admin);
        procs::wait_ready(&url, what, &mut self.proc.0, &self.log).await;
    }
}

/// Signs requests for one integration exactly as its provider would, with the keys it and its
/// Secrets held in the cluster when [`Signer::fetch`] read them.
pub struct Signer {
    wi: hookgate::crd::WebhookIntegration,
    secrets: hookgate::route::Secrets,
}

impl Signer {
    pub async fn fetch(client: &kube::Client, ns: &str, name: &str) -> Signer {
        use hookgate::controller::generated;
        use hookgate::crd::WebhookIntegration;
        use k8s_openapi::api::core::v1::Secret;
        let wi = kube::Api::<WebhookIntegration>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .unwrap();
        let mut wi = wi;
        let mut secrets = hookgate::route::Secrets::new();
        for s in kube::Api::<Secret>::namespaced(client.clone(), ns)
            .list(&Default::default())
            .await
            .unwrap()
        {
            let data: std::collections::BTreeMap<String, Vec<u8>> = s
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            let secret = s.metadata.name.unwrap();
            // Keys the controller generated are in its own Secret, not in spec.keys.
            if wi.spec.rotation.as_ref().is_some_and(|r| r.generate)
                && secret == generated::secret_name(name)
            {
                let ids = data.keys().cloned().collect();
                wi.spec
                    .keys
                    .extend(generated::Owned::new(ids, None).key_specs(name));
            }
            secrets.insert((ns.to_string(), secret), data);
        }
        Signer { wi, secrets }
    }

    /// Signed now with `key_id`, or the newest usable key.
    pub fn sign(&self, body: &str, key_id: Option<&str>) -> hookgate::cli::send::SignedRequest {
        let opts = hookgate::cli::send::SendOptions {
            key_id: key_id.map(String::from),
            ..Default::default()
        };
        hookgate::cli::send::sign_request(
            &self.wi,
            &self.secrets,
            body.as_bytes().to_vec(),
            &opts,
            chrono::Utc::now(),
        )
        .expect("signs")
    }
}

/// Signs with the integration's keys as they are in the cluster right now.
pub async fn sign(
    client: &kube::Client,
    ns: &str,
    name: &str,
    body: &str,
    key_id: Option<&str>,
) -> hookgate::cli::send::SignedRequest {
    Signer::fetch(client, ns, name).await.sign(body, key_id)
}

/// POSTs a signed request to a receiver; returns (status, body).
pub async fn post(base: &str, req: &hookgate::cli::send::SignedRequest) -> (u16, String) {
    let mut builder = reqwest::Client::new().post(format!("{base}{}", req.path));
    for (k, v) in &req.headers {
        builder = builder.header(k, v);
    }
    match builder.body(req.body.clone()).send().await {
        Ok(res) => (res.status().as_u16(), res.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

/// The integration as JSON, read as the admin.
pub fn get_json(server: &ApiServer, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&ok(server.kubectl(&all), None)).unwrap()
}

/// The `status` of condition `type_` of an object, or "".
pub fn condition<'a>(obj: &'a serde_json::Value, type_: &str) -> Option<&'a serde_json::Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Waits until `ns/name` is Ready; on timeout the panic shows its status.
pub async fn wait_ready(
    server: &ApiServer,
    ns: &str,
    name: &str,
    within: Duration,
) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let wi = get_json(server, &["whi", name, "-n", ns]);
        if condition(&wi, "Ready").is_some_and(|c| c["status"] == "True") {
            return wi;
        }
        assert!(
            Instant::now() < deadline,
            "{ns}/{name} not Ready within {within:?}; status: {}",
            serde_json::to_string_pretty(&wi["status"]).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
