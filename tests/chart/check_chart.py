#!/usr/bin/env python3
"""Assertions on the objects that charts/hookgate renders, and on checkov's report.

    check_chart.py render --helm HELM --chart DIR --crd FILE --metrics src/metrics/register.rs
    check_chart.py checkov --report JSON --framework kubernetes|dockerfile

    check_chart.py dockerfile --root .

Each prints one line per assertion ("ok ..." or "FAIL ...") and ends with
"check_chart.py totals: passed=N failed=M"; the exit status is 1 when anything failed.
tests/chart/run.sh adds the counts to its own.
"""

import argparse
import base64
import ipaddress
import json
import os
import re
import subprocess
import sys

import yaml

RELEASE = "hg"
NAMESPACE = "hookgate-system"
FULL = "hg-hookgate"
ROLES = ("controller", "receiver", "worker")
DB_URL = "postgres://hookgate:s3cret@db.example:5432/hookgate"
# --trusted-proxies per scenario: none by default, the ingress controller in production.
TRUSTED_PROXIES = {"default": "0", "production": "1"}
# --db-max-connections per role: the chart's 16 for all by default; production caps receivers
# (without workers of their own) and controllers lower.
DB_CAPS = {"default": {"controller": "16", "receiver": "16", "worker": "16"},
           "production": {"controller": "4", "receiver": "8", "worker": "16"}}
DIGEST = "sha256:" + "0123456789abcdef" * 4

# Series the dashboard must chart (counters as _total, histograms as _bucket).
DASHBOARD_METRICS = {
    "hookgate_receiver_requests_total",
    "hookgate_signature_failures_total",
    "hookgate_duplicates_total",
    "hookgate_duplicates_remembered_total",
    "hookgate_dedupe_cache_bytes",
    "hookgate_dedupe_cache_evicted_total",
    "hookgate_handshakes_total",
    "hookgate_dedupe_conflicts_total",
    "hookgate_delivery_attempts_total",
    "hookgate_ordering_ungated_total",
    "hookgate_deliveries_deferred_total",
    "hookgate_inbox_events",
    "hookgate_inbox_oldest_pending_seconds",
    "hookgate_delivery_duration_seconds_bucket",
    "hookgate_completion_latency_seconds_bucket",
    "hookgate_intake_batch_size_bucket",
    "hookgate_intake_commit_duration_seconds_bucket",
    "hookgate_receiver_request_duration_seconds_bucket",
    "hookgate_reconcile_errors_total",
    "hookgate_verified_requests_total",
    "hookgate_key_phase",
    "hookgate_refusal_logs_dropped_total",
    "hookgate_events_handed_over_total",
    "hookgate_claims_total",
    "hookgate_claim_duration_seconds_bucket",
    "hookgate_completion_commit_duration_seconds_bucket",
    "hookgate_completion_batch_size_bucket",
    "hookgate_catch_up_missing_total",
    "hookgate_catch_up_present_total",
    "hookgate_catch_up_errors_total",
    "hookgate_catch_up_passes_running",
    "hookgate_catch_up_passes_waiting",
    "hookgate_retention_failures_total",
    "hookgate_http_open_connections",
    "hookgate_http_max_connections",
    "hookgate_http_requests_in_flight",
    "hookgate_http_max_requests_in_flight",
    "hookgate_http_connections_dropped_total",
    "hookgate_http_requests_refused_total",
    "hookgate_db_connections",
    "hookgate_db_max_connections",
    "hookgate_delivery_slots_in_use",
    "hookgate_delivery_max_slots",
}

# The alerts of templates/prometheusrule.yaml: name -> the values block under
# metrics.prometheusRule.alerts. Each has a section in docs/runbook.md (its anchor is the name in
# lower case) and promtool tests in tests/chart/alerts/.
ALERTS = {
    "HookgateInboxOldestPending": "oldestPending",
    "HookgateDeadLettersGrowing": "deadLetters",
    "HookgateSignatureFailures": "signatureFailures",
    "HookgateCompletionLatencyHigh": "completionLatency",
    "HookgateReceiverUnavailable": "receiverUnavailable",
    "HookgateConnectionsDropped": "connectionsDropped",
    "HookgateReceiverNearCapacity": "receiverNearCapacity",
    "HookgateDatabasePoolSaturated": "databasePoolSaturated",
    "HookgateReceiverSlow": "receiverSlow",
    "HookgateRetiringKeyInUse": "retiringKeyInUse",
    "HookgateDeliveriesDeferred": "deliveriesDeferred",
    "HookgateCatchUpFailing": "catchUpFailing",
    "HookgateRetentionFailing": "retentionFailing",
    "HookgateWorkersAbsent": "workersAbsent",
}

# The checkov skips the scan accepts, each with the reason it does not apply. A new skip in a
# template fails the test until it is listed (and so justified) here too.
EXPECTED_SKIPS = {
    "kubernetes": {
        # hookgate takes the database URL only from --database-url or HOOKGATE_DATABASE_URL; an
        # env var from a Secret keeps it off the command line. A file option would need Rust work.
        ("CKV_K8S_35", "Deployment.hookgate-system.hg-hookgate-controller"),
        ("CKV_K8S_35", "Deployment.hookgate-system.hg-hookgate-receiver"),
        ("CKV_K8S_35", "Deployment.hookgate-system.hg-hookgate-worker"),
        ("CKV_K8S_35", "Job.hookgate-system.hg-hookgate-migrate"),
        # values-production.yaml cannot know the digest of an image not pushed yet; it says to
        # set image.digest, and the skip disappears once it is set (asserted in `render`).
        ("CKV_K8S_43", "Deployment.hookgate-system.hg-hookgate-controller"),
        ("CKV_K8S_43", "Deployment.hookgate-system.hg-hookgate-receiver"),
        ("CKV_K8S_43", "Deployment.hookgate-system.hg-hookgate-worker"),
        ("CKV_K8S_43", "Job.hookgate-system.hg-hookgate-migrate"),
        # These three call the Kubernetes API (reconcile; watch compiled route Secrets), so they
        # need a token; the migration Job and every ServiceAccount have automount off.
        ("CKV_K8S_38", "Deployment.hookgate-system.hg-hookgate-controller"),
        ("CKV_K8S_38", "Deployment.hookgate-system.hg-hookgate-receiver"),
        ("CKV_K8S_38", "Deployment.hookgate-system.hg-hookgate-worker"),
        # Receivers and workers list/watch route Secrets by label: RBAC cannot narrow that to
        # names, so the Role covers the Secrets of hookgate's own namespace (and nothing else).
        ("CKV2_K8S_5", "RoleBinding.hookgate-system.hg-hookgate-routes-reader"),
    },
    "dockerfile": {
        # Kubernetes ignores HEALTHCHECK; the chart probes /healthz and /readyz instead, and the
        # distroless image has no shell or curl for a HEALTHCHECK command anyway.
        ("CKV_DOCKER_2", "Dockerfile."),
    },
}


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, cond, detail=""):
        if cond:
            self.passed += 1
            print(f"ok   {name}")
        else:
            self.failed += 1
            print(f"FAIL {name}" + (f": {detail}" if detail else ""))
        return cond

    def finish(self):
        # Parsed by tests/chart/run.sh, which prints the one closing count line.
        print(f"check_chart.py totals: passed={self.passed} failed={self.failed}")
        return 1 if self.failed else 0


R = Results()


# ---------------------------------------------------------------------------------------------
# Rendering


class Helm:
    def __init__(self, helm, chart):
        self.helm = helm
        self.chart = chart

    def template(self, *args, include_crds=False):
        cmd = [self.helm, "template", RELEASE, self.chart, "--namespace", NAMESPACE, *args]
        if include_crds:
            cmd.append("--include-crds")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def objects(self, *args, include_crds=False):
        rc, out, err = self.template(*args, include_crds=include_crds)
        if rc != 0:
            raise SystemExit(f"helm template {' '.join(args)} failed:\n{err}")
        return Objects([d for d in yaml.safe_load_all(out) if d])


class Objects:
    def __init__(self, docs):
        self.docs = docs

    def kind(self, kind):
        return [d for d in self.docs if d["kind"] == kind]

    def get(self, kind, name):
        found = [d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name]
        return found[0] if found else None

    def kinds(self):
        return sorted({d["kind"] for d in self.docs})

    def workloads(self):
        """(object, pod spec) of everything that runs pods."""
        out = []
        for d in self.docs:
            if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
                out.append((d, d["spec"]["template"]["spec"]))
            elif d["kind"] == "CronJob":
                out.append((d, d["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
            elif d["kind"] == "Pod":
                out.append((d, d["spec"]))
        return out


def deployment(objs, role):
    return objs.get("Deployment", f"{FULL}-{role}")


def container(objs, role):
    return deployment(objs, role)["spec"]["template"]["spec"]["containers"][0]


def env_map(c):
    return {e["name"]: e for e in c.get("env", [])}


def name_of(d):
    return f"{d['kind']}/{d['metadata']['name']}"


# ---------------------------------------------------------------------------------------------
# Assertions that hold for every set of values


def check_hardening(objs, label):
    for obj, pod in objs.workloads():
        who = f"{label}: {name_of(obj)}"
        psc = pod.get("securityContext") or {}
        R.check(f"{who} pod runAsNonRoot", psc.get("runAsNonRoot") is True, psc)
        R.check(f"{who} pod seccomp RuntimeDefault",
                (psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault", psc)
        R.check(f"{who} no host namespaces",
                not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")))
        R.check(f"{who} no Service env vars next to HOOKGATE_* settings",
                pod.get("enableServiceLinks") is False)
        for c in pod.get("initContainers", []) + pod["containers"]:
            cw = f"{who} container {c['name']}"
            sc = c.get("securityContext") or {}
            problems = []
            if sc.get("runAsNonRoot") is not True:
                problems.append("runAsNonRoot")
            if sc.get("runAsUser") != 65532:
                problems.append("runAsUser 65532")
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append("readOnlyRootFilesystem")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append("allowPrivilegeEscalation false")
            if sc.get("privileged"):
                problems.append("not privileged")
            if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
                problems.append("capabilities drop [ALL]")
            if (sc.get("capabilities") or {}).get("add"):
                problems.append("no added capabilities")
            if (sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
                problems.append("seccompProfile RuntimeDefault")
            R.check(f"{cw} securityContext hardened", not problems, f"missing: {problems}")
            res = c.get("resources") or {}
            R.check(f"{cw} cpu and memory requests and limits",
                    all(k in res.get(t, {}) for t in ("requests", "limits")
                        for k in ("cpu", "memory")), res)
            R.check(f"{cw} no database URL on the command line",
                    not any("database-url" in a or "postgres://" in a
                            for a in c.get("args", []) + c.get("command", [])), c.get("args"))


def rbac_grants(objs, sa_name):
    """Every (namespace or '*', apiGroup, resource, verb, resourceNames) the ServiceAccount gets,
    and the bindings that give it."""
    grants, bindings = set(), []
    for b in objs.kind("RoleBinding") + objs.kind("ClusterRoleBinding"):
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa_name
                   and s.get("namespace") == NAMESPACE for s in b.get("subjects", [])):
            continue
        bindings.append(b)
        role = objs.get(b["roleRef"]["kind"], b["roleRef"]["name"])
        assert role, f"{name_of(b)} refers to a missing {b['roleRef']['kind']}"
        scope = "*" if b["kind"] == "ClusterRoleBinding" else b["metadata"]["namespace"]
        for rule in role["rules"]:
            for g in rule.get("apiGroups", []):
                for r in rule.get("resources", []):
                    for v in rule.get("verbs", []):
                        grants.add((scope, g, r, v, tuple(rule.get("resourceNames", []))))
    return grants, bindings


def check_rbac(objs, label, watch_namespace=""):
    for kind in ("Role", "ClusterRole"):
        for role in objs.kind(kind):
            wild = [r for r in role["rules"]
                    if "*" in r.get("verbs", []) + r.get("resources", []) + r.get("apiGroups", [])]
            R.check(f"{label}: {name_of(role)} has no wildcards", not wild, wild)

    sa = {role: f"{FULL}-{role}" for role in ROLES}
    for role in ROLES:
        d = deployment(objs, role)
        R.check(f"{label}: {role} runs as its own ServiceAccount",
                d["spec"]["template"]["spec"].get("serviceAccountName") == sa[role],
                d["spec"]["template"]["spec"].get("serviceAccountName"))
        acct = objs.get("ServiceAccount", sa[role])
        R.check(f"{label}: ServiceAccount {sa[role]} exists with automount off",
                acct is not None and acct.get("automountServiceAccountToken") is False, acct)

    for role in ("receiver", "worker"):
        grants, bindings = rbac_grants(objs, sa[role])
        R.check(f"{label}: no ClusterRoleBinding binds the {role}",
                not [b for b in bindings if b["kind"] == "ClusterRoleBinding"],
                [name_of(b) for b in bindings])
        R.check(f"{label}: no binding gives the {role} a ClusterRole",
                not [b for b in bindings if b["roleRef"]["kind"] == "ClusterRole"],
                [name_of(b) for b in bindings])
        expected = {(NAMESPACE, "", "secrets", v, ()) for v in ("get", "list", "watch")}
        R.check(f"{label}: the {role} may get/list/watch Secrets in {NAMESPACE} and nothing else",
                grants == expected, sorted(grants))
    for b in objs.kind("RoleBinding"):
        if b["metadata"]["name"] == f"{FULL}-routes-reader":
            role = objs.get(b["roleRef"]["kind"], b["roleRef"]["name"]) or {}
            want = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]
            R.check(f"{label}: routes-reader Role verbs are exactly get/list/watch on secrets",
                    b["roleRef"]["kind"] == "Role" and role.get("rules") == want, role.get("rules"))

    grants, bindings = rbac_grants(objs, sa["controller"])
    scope = watch_namespace or "*"
    expected = set()
    for v in ("get", "list", "watch", "patch", "update"):
        expected.add((scope, "hookgate.dev", "webhookintegrations", v, ()))
    for v in ("get", "patch", "update"):
        expected.add((scope, "hookgate.dev", "webhookintegrations/status", v, ()))
    expected.add((scope, "hookgate.dev", "webhookintegrations/finalizers", "update", ()))
    for v in ("get", "list", "watch", "create", "patch"):
        expected.add((scope, "", "secrets", v, ()))
    for v in ("create", "patch"):
        expected.add((scope, "events.k8s.io", "events", v, ()))
    for v in ("list", "create", "patch", "delete"):
        expected.add((NAMESPACE, "", "secrets", v, ()))
    expected.add((NAMESPACE, "coordination.k8s.io", "leases", "create", ()))
    for v in ("get", "update", "patch"):
        expected.add((NAMESPACE, "coordination.k8s.io", "leases", v, ("hookgate-controller",)))
    R.check(f"{label}: controller permissions are exactly the documented ones",
            grants == expected,
            f"extra {sorted(grants - expected)} missing {sorted(expected - grants)}")
    crb = [b for b in bindings if b["kind"] == "ClusterRoleBinding"]
    if watch_namespace:
        R.check(f"{label}: --watch-namespace binds the ClusterRole in {watch_namespace} only",
                not crb and any(b["metadata"]["namespace"] == watch_namespace for b in bindings),
                [name_of(b) for b in bindings])
    else:
        R.check(f"{label}: the controller's ClusterRole is bound cluster-wide", len(crb) == 1)


def check_roles(objs, label, db_secret, db_key):
    ctrl, recv, work = (container(objs, r) for r in ROLES)
    dc = deployment(objs, "controller")
    R.check(f"{label}: controller has 2 replicas", dc["spec"]["replicas"] == 2, dc["spec"].get("replicas"))
    R.check(f"{label}: controller args",
            ctrl["args"][:3] == ["controller", "--namespace", "$(POD_NAMESPACE)"], ctrl["args"])
    R.check(f"{label}: receiver args",
            recv["args"][:3] == ["receiver", "--namespace", "$(POD_NAMESPACE)"]
            and "--listen" in recv["args"] and "0.0.0.0:8080" in recv["args"]
            and "--admin-listen" in recv["args"] and "0.0.0.0:9090" in recv["args"], recv["args"])
    R.check(f"{label}: receiver group commit defaults",
            recv["args"][recv["args"].index("--commit-window") + 1] == "0ms"
            and recv["args"][recv["args"].index("--commit-batch") + 1] == "64"
            and recv["args"][recv["args"].index("--commit-concurrency") + 1] == "1", recv["args"])
    R.check(f"{label}: receiver dedupe cache defaults",
            flag(recv["args"], "--dedupe-cache-mib") == ["16"]
            and flag(recv["args"], "--dedupe-cache-ttl") == ["5m"], recv["args"])
    R.check(f"{label}: receiver listener limits",
            recv["args"][recv["args"].index("--header-timeout") + 1] == "10s"
            and recv["args"][recv["args"].index("--body-timeout") + 1] == "30s"
            and recv["args"][recv["args"].index("--max-connections") + 1] == "1024"
            and recv["args"][recv["args"].index("--max-in-flight") + 1] == "128"
            and recv["args"][recv["args"].index("--unverified-rps") + 1] == "20", recv["args"])
    R.check(f"{label}: receiver trusts exactly one --trusted-proxies value",
            flag(recv["args"], "--trusted-proxies") == [TRUSTED_PROXIES[label]], recv["args"])
    caps = DB_CAPS[label]
    for role, c in (("controller", ctrl), ("receiver", recv), ("worker", work)):
        R.check(f"{label}: {role} database deadlines and pool cap",
                flag(c["args"], "--db-acquire-timeout") == ["3s"]
                and flag(c["args"], "--db-statement-timeout") == ["5s"]
                and flag(c["args"], "--db-max-connections") == [caps[role]], c["args"])
    R.check(f"{label}: worker args",
            work["args"][:3] == ["worker", "--namespace", "$(POD_NAMESPACE)"]
            and work["args"][work["args"].index("--admin-listen") + 1] == "0.0.0.0:9091"
            and flag(work["args"], "--catch-up-passes") == ["4"],
            work["args"])
    for role, c in zip(ROLES, (ctrl, recv, work)):
        env = env_map(c)
        R.check(f"{label}: {role} POD_NAMESPACE from the downward API",
                env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                == "metadata.namespace", env.get("POD_NAMESPACE"))
        ref = env.get("HOOKGATE_DATABASE_URL", {}).get("valueFrom", {}).get("secretKeyRef", {})
        R.check(f"{label}: {role} HOOKGATE_DATABASE_URL from Secret {db_secret}/{db_key}",
                ref == {"name": db_secret, "key": db_key}, ref)
    R.check(f"{label}: controller POD_NAME from the downward API",
            env_map(ctrl).get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            == "metadata.name")
    R.check(f"{label}: controller admin port 9092",
            [(p["name"], p["containerPort"]) for p in ctrl.get("ports", [])] == [("admin", 9092)]
            and ctrl["args"][ctrl["args"].index("--admin-listen") + 1] == "0.0.0.0:9092", ctrl.get("ports"))
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        R.check(f"{label}: controller {probe} {path} on the admin port",
                ctrl.get(probe, {}).get("httpGet") == {"path": path, "port": "admin"}, ctrl.get(probe))
    ports = {p["name"]: p["containerPort"] for p in recv["ports"]}
    R.check(f"{label}: receiver ports http 8080 and admin 9090", ports == {"http": 8080, "admin": 9090}, ports)
    R.check(f"{label}: receiver liveness /healthz on the admin port",
            recv.get("livenessProbe", {}).get("httpGet") == {"path": "/healthz", "port": "admin"},
            recv.get("livenessProbe"))
    R.check(f"{label}: receiver readiness /readyz on the admin port",
            recv.get("readinessProbe", {}).get("httpGet") == {"path": "/readyz", "port": "admin"},
            recv.get("readinessProbe"))
    R.check(f"{label}: worker admin port 9091",
            [(p["name"], p["containerPort"]) for p in work["ports"]] == [("admin", 9091)], work.get("ports"))

    for role in ROLES:
        d = deployment(objs, role)
        pod_labels = d["spec"]["template"]["metadata"]["labels"]
        sel = d["spec"]["selector"]["matchLabels"]
        R.check(f"{label}: {role} selector matches its pods and only its role",
                all(pod_labels.get(k) == v for k, v in sel.items())
                and sel.get("app.kubernetes.io/component") == role, sel)
        pdb = objs.get("PodDisruptionBudget", f"{FULL}-{role}")
        R.check(f"{label}: {role} PodDisruptionBudget selects its pods",
                pdb is not None and pdb["spec"]["selector"]["matchLabels"] == sel, pdb)
        tsc = d["spec"]["template"]["spec"].get("topologySpreadConstraints", [])
        R.check(f"{label}: {role} spreads over zones and nodes",
                {t["topologyKey"] for t in tsc} == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
                and all(t["labelSelector"]["matchLabels"] == sel for t in tsc), tsc)
        spec = d["spec"]["template"]["spec"]
        R.check(f"{label}: {role} mounts its token (it calls the API)",
                spec.get("automountServiceAccountToken") is True)

    svc = objs.get("Service", f"{FULL}-receiver")
    R.check(f"{label}: receiver Service exposes only http 8080",
            [(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [("http", 8080, "http")]
            and svc["spec"]["selector"] == deployment(objs, "receiver")["spec"]["selector"]["matchLabels"],
            svc["spec"])
    for role, port in (("receiver", 9090), ("worker", 9091), ("controller", 9092)):
        m = objs.get("Service", f"{FULL}-{role}-metrics")
        R.check(f"{label}: {role} metrics Service on {port}",
                m is not None and [(p["name"], p["port"], p["targetPort"]) for p in m["spec"]["ports"]]
                == [("metrics", port, "admin")]
                and m["spec"]["selector"] == deployment(objs, role)["spec"]["selector"]["matchLabels"],
                m)


def check_migration_hook(objs, label, secret_name):
    job = objs.get("Job", f"{FULL}-migrate")
    if not R.check(f"{label}: migration Job exists", job is not None):
        return
    ann = job["metadata"].get("annotations", {})
    R.check(f"{label}: migration Job is a pre-install,pre-upgrade hook",
            ann.get("helm.sh/hook") == "pre-install,pre-upgrade", ann)
    R.check(f"{label}: migration Job is replaced, not reused, on the next upgrade",
            "before-hook-creation" in ann.get("helm.sh/hook-delete-policy", ""), ann)
    spec = job["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    R.check(f"{label}: migration Job runs `hookgate migrate` once, in one pod",
            c.get("args") == ["migrate"] and "command" not in c and spec.get("parallelism") == 1
            and spec.get("completions") == 1 and pod.get("restartPolicy") == "Never", spec)
    R.check(f"{label}: migration Job has a deadline", spec.get("activeDeadlineSeconds", 0) > 0)
    R.check(f"{label}: migration pod has no API token", pod.get("automountServiceAccountToken") is False)
    ref = env_map(c).get("HOOKGATE_DATABASE_URL", {}).get("valueFrom", {}).get("secretKeyRef", {})
    R.check(f"{label}: migration Job reads the URL from {secret_name}", ref.get("name") == secret_name, ref)
    weight = int(ann.get("helm.sh/hook-weight", "0"))
    # What the Job needs at pre-install time must itself be a hook that runs before it.
    for kind, name in (("ServiceAccount", pod.get("serviceAccountName")), ("Secret", ref.get("name"))):
        dep = objs.get(kind, name)
        if dep is None:
            continue  # an existing Secret the user manages
        dann = dep["metadata"].get("annotations", {})
        R.check(f"{label}: {kind} {name} exists before the migration hook runs",
                "pre-install" in dann.get("helm.sh/hook", "")
                and int(dann.get("helm.sh/hook-weight", "0")) < weight, dann)
    for role in ROLES:
        c = container(objs, role)
        R.check(f"{label}: {role} does not migrate", "migrate" not in c.get("args", []))


def registered_metrics(metrics_rs):
    """Metric families registered in src/metrics/register.rs (prefix hookgate_), with the
    series its collectors serve from listeners.rs and scraped.rs beside it."""
    with open(metrics_rs) as f:
        names = set(re.findall(r'register\(\s*"([a-z_]+)"', f.read()))
    for collector in ("listeners.rs", "scraped.rs"):
        with open(os.path.join(os.path.dirname(metrics_rs), collector)) as f:
            names |= set(re.findall(r'^\s*"((?:http|db|delivery)_[a-z_]+)",$', f.read(), re.M))
    return {"hookgate_" + m for m in names}


def family(series):
    return re.sub(r"_(total|bucket|sum|count)$", "", series)


def check_dashboard(objs, label, registered=None):
    cm = objs.get("ConfigMap", f"{FULL}-dashboard")
    if not R.check(f"{label}: dashboard ConfigMap labelled grafana_dashboard=1",
                   cm is not None and cm["metadata"]["labels"].get("grafana_dashboard") == "1"):
        return
    try:
        dash = json.loads(cm["data"]["hookgate.json"])
    except (KeyError, ValueError) as e:
        R.check(f"{label}: dashboard is valid JSON", False, e)
        return
    R.check(f"{label}: dashboard is valid JSON", True)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    used = set(re.findall(r"\b(hookgate_[a-z_]+)\b", " ".join(exprs)))
    R.check(f"{label}: dashboard charts every hookgate metric", DASHBOARD_METRICS <= used,
            DASHBOARD_METRICS - used)
    R.check(f"{label}: dashboard uses no unknown series", used <= DASHBOARD_METRICS, used - DASHBOARD_METRICS)
    if registered is not None:
        R.check(f"{label}: every dashboard metric is registered in src/metrics/register.rs",
                {family(s) for s in used} <= registered, {family(s) for s in used} - registered)
        R.check(f"{label}: every metric in src/metrics/register.rs is on the dashboard",
                registered <= {family(s) for s in used}, registered - {family(s) for s in used})
    # Every worker pod exports the inbox gauges of the whole database, the same figures: a sum
    # over pods would count each event once per worker pod.
    for e in exprs:
        for m in re.finditer(r"hookgate_inbox_[a-z_]+", e):
            R.check(f"{label}: dashboard takes the max over pods of {m.group(0)}",
                    re.search(r"max(?: by \([a-z, ]*\))? ?\($", e[:m.start()]) is not None, e)
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for words in ("by outcome", "signature failures", "duplicates", "delivery attempts by result",
                  "dead letters"):
        R.check(f"{label}: dashboard has a panel on {words}", words in titles)
    ids = [p["id"] for p in dash["panels"]]
    R.check(f"{label}: dashboard panel ids are unique", len(ids) == len(set(ids)))
    # A series in another unit than its panel's gets an axis of its own: one axis for bytes and a
    # per-second rate would draw the rate as a flat line at zero.
    for p in dash["panels"]:
        refs = {t["refId"] for t in p.get("targets", [])}
        for o in p.get("fieldConfig", {}).get("overrides", []):
            props = {x["id"]: x["value"] for x in o["properties"]}
            R.check(f"{label}: {p['title']}: series {o['matcher']['options']} in its own unit on its own axis",
                    o["matcher"]["id"] == "byFrameRefID" and o["matcher"]["options"] in refs
                    and "unit" in props and props.get("custom.axisPlacement") == "right", o)
    memory = next((p for p in dash["panels"] if p["title"] == "Memory of committed keys"), None)
    R.check(f"{label}: the memory of committed keys is drawn in bytes, what it drops as a rate on the right",
            memory is not None and memory["fieldConfig"]["defaults"]["unit"] == "bytes"
            and [(o["matcher"]["options"], o["properties"][0]["value"]) for o in memory["fieldConfig"]["overrides"]]
            == [("B", "ops")], memory and memory["fieldConfig"])


# ---------------------------------------------------------------------------------------------
# Scenarios


def flag(args, name):
    """Values given to `name` in a container's args, in order."""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]


def allows(rule, address):
    """Whether one egress rule's peers admit `address` (ipBlocks only; a rule without `to` admits all)."""
    if "to" not in rule:
        return True
    ip = ipaddress.ip_address(address)
    for peer in rule["to"]:
        block = peer.get("ipBlock")
        if not block:
            continue
        net = ipaddress.ip_network(block["cidr"])
        if ip.version == net.version and ip in net and not any(
                ip in ipaddress.ip_network(e) for e in block.get("except", [])
                if ipaddress.ip_network(e).version == ip.version):
            return True
    return False


def scenario_default(helm, chart, registered):
    label = "default"
    objs = helm.objects("--set", f"database.url={DB_URL}")
    kinds = objs.kinds()
    for k in ("Deployment", "Service", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
              "RoleBinding", "PodDisruptionBudget", "Job", "Secret", "ConfigMap"):
        R.check(f"{label}: renders a {k}", k in kinds, kinds)
    for k in ("Ingress", "HTTPRoute", "NetworkPolicy", "ServiceMonitor", "HorizontalPodAutoscaler",
              "PrometheusRule"):
        R.check(f"{label}: {k} is off by default", k not in kinds)
    R.check(f"{label}: every object is namespaced to the release or cluster-scoped",
            all(d["metadata"].get("namespace") == NAMESPACE
                for d in objs.docs if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")),
            [name_of(d) for d in objs.docs if d["metadata"].get("namespace") != NAMESPACE])
    secret = objs.get("Secret", f"{FULL}-database")
    R.check(f"{label}: database.url renders a Secret with DATABASE_URL",
            secret is not None and base64.b64decode(secret["data"]["DATABASE_URL"]).decode() == DB_URL)
    check_hardening(objs, label)
    check_rbac(objs, label)
    check_roles(objs, label, f"{FULL}-database", "DATABASE_URL")
    check_migration_hook(objs, label, f"{FULL}-migrate-db")
    check_dashboard(objs, label, registered)
    R.check(f"{label}: receiver has fixed replicas without an HPA",
            deployment(objs, "receiver")["spec"].get("replicas") == 2)
    work = container(objs, "worker")
    R.check(f"{label}: worker liveness /healthz and readiness /readyz on the admin port",
            work.get("livenessProbe", {}).get("httpGet") == {"path": "/healthz", "port": "admin"}
            and work.get("readinessProbe", {}).get("httpGet") == {"path": "/readyz", "port": "admin"})
    for pdb in objs.kind("PodDisruptionBudget"):
        R.check(f"{label}: {name_of(pdb)} lets not-ready pods be evicted",
                pdb["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow")
    for role in ROLES:
        d = deployment(objs, role)
        R.check(f"{label}: {role} pods roll when database.url changes",
                "checksum/database" in d["spec"]["template"]["metadata"].get("annotations", {}))
    args = work["args"]
    R.check(f"{label}: workers deliver to any Service or host (--destinations open)",
            flag(args, "--destinations") == ["open"] and flag(args, "--cluster-domain") == ["cluster.local"]
            and not flag(args, "--allow-destination-host"), args)
    R.check(f"{label}: image defaults to the appVersion tag",
            {c["image"] for _, p in objs.workloads() for c in p["containers"]} == {"hookgate:0.1.0"})

    crd_objs = helm.objects("--set", f"database.url={DB_URL}", include_crds=True)
    crds = crd_objs.kind("CustomResourceDefinition")
    R.check(f"{label}: --include-crds installs the WebhookIntegration CRD",
            [c["metadata"]["name"] for c in crds] == ["webhookintegrations.hookgate.dev"])


def scenario_production(helm, chart):
    label = "production"
    objs = helm.objects("-f", os.path.join(chart, "values-production.yaml"))
    kinds = objs.kinds()
    for k in ("Ingress", "NetworkPolicy", "ServiceMonitor", "HorizontalPodAutoscaler", "PrometheusRule"):
        R.check(f"{label}: renders a {k}", k in kinds, kinds)
    R.check(f"{label}: no Secret rendered (database.existingSecret)", not objs.kind("Secret"),
            [name_of(s) for s in objs.kind("Secret")])
    check_hardening(objs, label)
    check_rbac(objs, label)
    check_roles(objs, label, "hookgate-database", "DATABASE_URL")
    check_migration_hook(objs, label, "hookgate-database")
    check_dashboard(objs, label)

    ing = objs.get("Ingress", f"{FULL}-receiver")
    paths = [(p["path"], p["pathType"], p["backend"]["service"]["name"], p["backend"]["service"]["port"])
             for rule in ing["spec"]["rules"] for p in rule["http"]["paths"]]
    R.check(f"{label}: Ingress routes only /hooks (Prefix) to the receiver's http port",
            paths and all(p == ("/hooks", "Prefix", f"{FULL}-receiver", {"name": "http"}) for p in paths)
            and "defaultBackend" not in ing["spec"], paths)
    hpa = objs.get("HorizontalPodAutoscaler", f"{FULL}-receiver")
    R.check(f"{label}: HPA scales the receiver Deployment",
            hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": f"{FULL}-receiver"})
    R.check(f"{label}: with the HPA the receiver Deployment sets no replicas",
            "replicas" not in deployment(objs, "receiver")["spec"])
    recv = container(objs, "receiver")
    R.check(f"{label}: receiver waits in preStop (exec-free sleep)",
            recv.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds") == 5)
    # The connection budget README "Sizing PostgreSQL" and values-production.yaml state: each
    # role's cap times the most pods it runs (the receivers' autoscaler maximum).
    most = {"receiver": hpa["spec"]["maxReplicas"], "worker": deployment(objs, "worker")["spec"]["replicas"],
            "controller": deployment(objs, "controller")["spec"]["replicas"]}
    caps = {r: int(flag(container(objs, r)["args"], "--db-max-connections")[0]) for r in most}
    R.check(f"{label}: the pods' connection caps add up to the 216 the docs state",
            sum(caps[r] * most[r] for r in most) == 216, (caps, most))

    pols = {p["metadata"]["name"]: p for p in objs.kind("NetworkPolicy")}
    for role in ROLES + ("migrate",):
        p = pols.get(f"{FULL}-{role}")
        if not R.check(f"{label}: NetworkPolicy for {role}", p is not None):
            continue
        R.check(f"{label}: {role} NetworkPolicy restricts both directions",
                sorted(p["spec"]["policyTypes"]) == ["Egress", "Ingress"])
        want = deployment(objs, role)["spec"]["selector"]["matchLabels"] if role != "migrate" else \
            objs.get("Job", f"{FULL}-migrate")["spec"]["template"]["metadata"]["labels"]
        R.check(f"{label}: {role} NetworkPolicy selects its pods",
                all(want.get(k) == v for k, v in p["spec"]["podSelector"]["matchLabels"].items()))
    ctrl_in = pols[f"{FULL}-controller"]["spec"]["ingress"]
    R.check(f"{label}: controller accepts only metrics scrapes on 9092, from the monitoring peers",
            [sorted(pt["port"] for pt in r["ports"]) for r in ctrl_in] == [[9092]]
            and all(r.get("from") for r in ctrl_in), ctrl_in)
    recv_ports = sorted(pt["port"] for r in pols[f"{FULL}-receiver"]["spec"]["ingress"] for pt in r["ports"])
    R.check(f"{label}: receiver accepts only 8080 and 9090", recv_ports == [8080, 9090], recv_ports)
    R.check(f"{label}: receiver webhook port only from the ingress controller",
            all("from" in r for r in pols[f"{FULL}-receiver"]["spec"]["ingress"]))
    mig = pols[f"{FULL}-migrate"]
    R.check(f"{label}: migration NetworkPolicy is a hook that runs before the Job",
            mig["metadata"]["annotations"].get("helm.sh/hook") == "pre-install,pre-upgrade"
            and int(mig["metadata"]["annotations"]["helm.sh/hook-weight"]) < 0)
    sm = objs.get("ServiceMonitor", FULL)
    R.check(f"{label}: ServiceMonitor scrapes the metrics Services",
            sm["spec"]["endpoints"][0]["port"] == "metrics"
            and all(objs.get("Service", f"{FULL}-{r}-metrics")["metadata"]["labels"].get(k) == v
                    for r in ("receiver", "worker", "controller")
                    for k, v in sm["spec"]["selector"]["matchLabels"].items()),
            sm["spec"])
    R.check(f"{label}: ServiceMonitor does not select the webhook Service",
            not all(objs.get("Service", f"{FULL}-receiver")["metadata"]["labels"].get(k) == v
                    for k, v in sm["spec"]["selector"]["matchLabels"].items()))
    # Deliveries: every Service, but neither the metadata range nor the API server. The workers'
    # own API access is the kubeApi rule (ports 443/6443), not the delivery rule.
    work_pol = pols[f"{FULL}-worker"]
    kube_ports = {pt["port"] for pt in pols[f"{FULL}-worker"]["spec"]["egress"][1]["ports"]}
    delivery = [r for r in work_pol["spec"]["egress"]
                if {pt["port"] for pt in r.get("ports", [])} not in ({53}, kube_ports, {5432})]
    R.check(f"{label}: worker delivery egress is not open to everything", {} not in work_pol["spec"]["egress"]
            and delivery, work_pol["spec"]["egress"])
    R.check(f"{label}: worker delivery egress reaches Services in every namespace",
            any({"namespaceSelector": {}} in r.get("to", []) for r in delivery), delivery)
    R.check(f"{label}: worker delivery egress reaches external hosts",
            all(any(allows(r, a) for r in delivery) for a in ("203.0.113.9", "2001:db8::9")), delivery)
    blocked = ["169.254.169.254", "169.254.0.1", "169.254.255.255", "fe80::1", "fd00:ec2::254"]
    api = [b["ipBlock"]["cidr"] for b in objs.get("NetworkPolicy", f"{FULL}-worker")["spec"]["egress"][1].get("to", [])
           if "ipBlock" in b]
    R.check(f"{label}: worker delivery egress excludes the metadata range 169.254.0.0/16",
            not [a for a in blocked if any(allows(r, a) for r in delivery)], delivery)
    excepted = [e for r in delivery for p in r.get("to", []) for e in p.get("ipBlock", {}).get("except", [])]
    api_server = "10.96.0.1"
    R.check(f"{label}: worker delivery egress excludes the API server ({api_server}, the ADAPT placeholder)",
            not any(allows(r, api_server) for r in delivery)
            and any(ipaddress.ip_address(api_server) in ipaddress.ip_network(e) for e in excepted
                    if ":" not in e), (excepted, api))
    R.check(f"{label}: images are pulled on every start",
            {c["imagePullPolicy"] for _, p in objs.workloads() for c in p["containers"]} == {"Always"})


def scenario_toggles(helm, chart):
    label = "toggles"
    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "httpRoute.enabled=true",
                        "--set", "httpRoute.parentRefs[0].name=public",
                        "--set", "httpRoute.hostnames[0]=hooks.example.com")
    route = objs.get("HTTPRoute", f"{FULL}-receiver")
    if R.check(f"{label}: HTTPRoute rendered", route is not None):
        matches = [m for r in route["spec"]["rules"] for m in r["matches"]]
        backends = [b for r in route["spec"]["rules"] for b in r["backendRefs"]]
        R.check(f"{label}: HTTPRoute routes only /hooks (PathPrefix) to the receiver",
                matches == [{"path": {"type": "PathPrefix", "value": "/hooks"}}]
                and backends == [{"name": f"{FULL}-receiver", "port": 8080}], route["spec"])
    rc, _, err = helm.template("--set", f"database.url={DB_URL}", "--set", "httpRoute.enabled=true")
    R.check(f"{label}: HTTPRoute without parentRefs fails clearly",
            rc != 0 and "httpRoute.parentRefs" in err, err.strip()[-300:])

    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "controller.watchNamespace=payments")
    check_rbac(objs, "watchNamespace", watch_namespace="payments")
    R.check("watchNamespace: controller gets --watch-namespace payments",
            container(objs, "controller")["args"][3:5] == ["--watch-namespace", "payments"],
            container(objs, "controller")["args"])

    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", f"image.digest={DIGEST}",
                        "--set", "worker.probes.enabled=false")
    images = {c["image"] for _, p in objs.workloads() for c in p["containers"]}
    R.check("digest: every pod runs the image by digest", images == {f"hookgate@{DIGEST}"}, images)
    skips = " ".join(v for d in objs.docs for k, v in d["metadata"].get("annotations", {}).items()
                     if k.startswith("checkov.io/skip"))
    R.check("digest: no image-digest skip once a digest is set", "CKV_K8S_43" not in skips)
    work = container(objs, "worker")
    R.check("worker.probes.enabled=false: the worker has no probes",
            "livenessProbe" not in work and "readinessProbe" not in work)

    objs = helm.objects("--set", "database.existingSecret=pg", "--set", "database.existingSecretKey=uri",
                        "--set", "controller.useDatabase=false")
    R.check("existingSecret: receiver reads the custom key",
            env_map(container(objs, "receiver"))["HOOKGATE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
            == {"name": "pg", "key": "uri"})
    R.check("useDatabase=false: the controller gets no database URL",
            "HOOKGATE_DATABASE_URL" not in env_map(container(objs, "controller")))
    R.check("existingSecret: no Secret rendered", not objs.kind("Secret"))

    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "receiver.autoscaling.enabled=true",
                        "--set", "networkPolicy.enabled=true", "--set", "migrations.enabled=false")
    R.check("migrations.enabled=false: no Job, no hook Secret",
            not objs.kind("Job") and objs.get("Secret", f"{FULL}-migrate-db") is None)
    work_pol = objs.get("NetworkPolicy", f"{FULL}-worker")
    R.check("networkPolicy defaults: workers may deliver anywhere",
            {} in work_pol["spec"]["egress"], work_pol["spec"]["egress"])


def scenario_destinations(helm, chart):
    label = "worker.destinations"
    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "worker.destinations.mode=namespace",
                        "--set", "worker.destinations.allowedHosts[0]=api.partner.example",
                        "--set", "worker.destinations.allowedHosts[1]=*.hooks.example",
                        "--set", "worker.destinations.clusterDomain=corp.internal")
    args = container(objs, "worker")["args"]
    R.check(f"{label}: mode=namespace confines the workers",
            flag(args, "--destinations") == ["namespace"], args)
    R.check(f"{label}: every allowed host is passed",
            flag(args, "--allow-destination-host") == ["api.partner.example", "*.hooks.example"], args)
    R.check(f"{label}: the cluster domain is passed", flag(args, "--cluster-domain") == ["corp.internal"], args)
    for name, value, needle in [
        ("an unknown mode fails (schema)", "worker.destinations.mode=everywhere", "mode"),
        ("a URL as an allowed host fails (schema)", "worker.destinations.allowedHosts[0]=https://x.example",
         "allowedHosts"),
        ("a typo'd key fails (schema)", "worker.destinations.allowHosts[0]=x.example", "allowHosts"),
    ]:
        rc, _, err = helm.template("--set", f"database.url={DB_URL}", "--set", value)
        R.check(f"{label}: {name}", rc != 0 and needle in err, f"rc={rc} stderr={err.strip()[-300:]}")


def scenario_trusted_proxies(helm, chart):
    label = "receiver.trustedProxies"
    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "receiver.trustedProxies=2")
    args = container(objs, "receiver")["args"]
    R.check(f"{label}: passed as --trusted-proxies", flag(args, "--trusted-proxies") == ["2"], args)
    for name, value in [("a negative count fails (schema)", "-1"), ("over 255 fails (schema)", "256"),
                        ("a word fails (schema)", "two")]:
        rc, _, err = helm.template("--set", f"database.url={DB_URL}", "--set", f"receiver.trustedProxies={value}")
        R.check(f"{label}: {name}", rc != 0 and "trustedProxies" in err, f"rc={rc} stderr={err.strip()[-300:]}")


def scenario_db_pool(helm, chart):
    label = "database.maxConnections"
    roles = ("controller", "receiver", "worker")
    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "database.maxConnections=8",
                        "--set", "database.acquireTimeout=2s", "--set", "database.statementTimeout=4s")
    for role in roles:
        args = container(objs, role)["args"]
        R.check(f"{label}: the {role} gets the chart's --db-max-connections and deadlines",
                flag(args, "--db-max-connections") == ["8"] and flag(args, "--db-acquire-timeout") == ["2s"]
                and flag(args, "--db-statement-timeout") == ["4s"], args)
    # Each role's own cap replaces the chart's for that role only.
    for role, others in [(r, [o for o in roles if o != r]) for r in roles]:
        objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "database.maxConnections=12",
                            "--set", f"{role}.database.maxConnections=5")
        caps = {r: flag(container(objs, r)["args"], "--db-max-connections") for r in roles}
        R.check(f"{label}: {role}.database.maxConnections reaches the {role} alone",
                caps[role] == ["5"] and all(caps[o] == ["12"] for o in others), caps)
    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "controller.useDatabase=false")
    args = container(objs, "controller")["args"]
    R.check(f"{label}: a controller without the database gets no database flags",
            not [a for a in args if a.startswith("--db-")], args)
    for name, key, value in [("under 4 fails (schema)", "database.maxConnections", "3"),
                             ("over 1000 fails (schema)", "database.maxConnections", "1001"),
                             ("a word fails (schema)", "database.maxConnections", "many"),
                             ("a role's under 4 fails (schema)", "worker.database.maxConnections", "2"),
                             ("a role's over 1000 fails (schema)", "receiver.database.maxConnections", "5000"),
                             ("a role's unknown key fails (schema)", "controller.database.maxConnection", "8")]:
        rc, _, err = helm.template("--set", f"database.url={DB_URL}", "--set", f"{key}={value}")
        R.check(f"{label}: {name}", rc != 0 and "maxConnection" in err, f"rc={rc} stderr={err.strip()[-300:]}")


def scenario_receiver_workers(helm, chart):
    label = "receiver.workers"
    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "networkPolicy.enabled=true")
    recv = container(objs, "receiver")
    R.check(f"{label}: off by default, the receivers do not deliver",
            "--with-workers" not in recv["args"] and not flag(recv["args"], "--concurrency"), recv["args"])
    egress = objs.get("NetworkPolicy", f"{FULL}-receiver")["spec"]["egress"]
    R.check(f"{label}: off, the receivers get no delivery egress", {} not in egress and len(egress) == 3, egress)
    R.check(f"{label}: off, the receivers keep their own grace period",
            deployment(objs, "receiver")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30)

    objs = helm.objects("--set", f"database.url={DB_URL}", "--set", "networkPolicy.enabled=true",
                        "--set", "receiver.workers.enabled=true", "--set", "receiver.workers.concurrency=16",
                        "--set", "receiver.workers.handoffEvents=1024",
                        "--set", "worker.destinations.mode=namespace",
                        "--set", "worker.destinations.allowedHosts[0]=api.partner.example",
                        "--set", "networkPolicy.delivery.to[0].ipBlock.cidr=203.0.113.0/24",
                        "--set", "networkPolicy.delivery.ports[0]=443")
    args = container(objs, "receiver")["args"]
    R.check(f"{label}: on, the receivers run workers with their own slots and room",
            "--with-workers" in args and flag(args, "--concurrency") == ["16"]
            and flag(args, "--handoff-events") == ["1024"], args)
    work = container(objs, "worker")["args"]
    for f in ("--lease", "--poll", "--grace", "--destinations", "--cluster-domain", "--allow-destination-host"):
        R.check(f"{label}: on, the receivers' workers take the workers' {f}",
                flag(args, f) == flag(work, f) and flag(args, f), (flag(args, f), flag(work, f)))
    R.check(f"{label}: on, the receivers' grace covers their workers' (worker.graceSeconds + 15)",
            deployment(objs, "receiver")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 45)
    pols = {role: objs.get("NetworkPolicy", f"{FULL}-{role}")["spec"]["egress"] for role in ("receiver", "worker")}
    delivery = [r for r in pols["worker"] if allows(r, "203.0.113.7") and r.get("ports") == [{"port": 443, "protocol": "TCP"}]]
    R.check(f"{label}: on, the receivers get exactly the workers' delivery egress",
            len(delivery) == 1 and delivery[0] in pols["receiver"] and len(pols["receiver"]) == 4, pols)
    for name, value in [("no slots fails (schema)", "receiver.workers.concurrency=0"),
                        ("a negative room fails (schema)", "receiver.workers.handoffEvents=-1"),
                        ("a typo'd key fails (schema)", "receiver.workers.enable=true")]:
        rc, _, err = helm.template("--set", f"database.url={DB_URL}", "--set", value)
        R.check(f"{label}: {name}", rc != 0 and "workers" in err, f"rc={rc} stderr={err.strip()[-300:]}")


def rule_alerts(objs):
    """{alert name: rule} of the release's PrometheusRule, or None when it is not rendered."""
    pr = objs.get("PrometheusRule", FULL)
    if pr is None:
        return None
    return {r["alert"]: r for g in pr["spec"]["groups"] for r in g["rules"] if "alert" in r}


def runbook_anchors(chart):
    """GitHub's anchors of the `## ` headings of docs/runbook.md."""
    path = os.path.join(chart, "..", "..", "docs", "runbook.md")
    with open(path) as f:
        heads = [l[3:].strip() for l in f if l.startswith("## ")]
    return {re.sub(r"[^a-z0-9 _-]", "", h.lower()).replace(" ", "-") for h in heads}


def scenario_prometheus_rule(helm, chart, registered):
    label = "prometheusRule"
    on = ("--set", f"database.url={DB_URL}", "--set", "metrics.prometheusRule.enabled=true")
    R.check(f"{label}: not rendered unless enabled",
            rule_alerts(helm.objects("--set", f"database.url={DB_URL}")) is None
            and rule_alerts(helm.objects("--set", f"database.url={DB_URL}",
                                         "--set", "metrics.serviceMonitor.enabled=true")) is None)
    objs = helm.objects(*on, "--set", "metrics.prometheusRule.labels.release=kps",
                        "--set", "metrics.prometheusRule.alertLabels.team=platform")
    pr = objs.get("PrometheusRule", FULL)
    if not R.check(f"{label}: rendered when enabled", pr is not None, objs.kinds()):
        return
    R.check(f"{label}: monitoring.coreos.com/v1 in the release namespace, with the extra labels",
            pr["apiVersion"] == "monitoring.coreos.com/v1" and pr["metadata"]["namespace"] == NAMESPACE
            and pr["metadata"]["labels"].get("release") == "kps"
            and pr["metadata"]["labels"].get("app.kubernetes.io/instance") == RELEASE, pr["metadata"])
    alerts = rule_alerts(objs)
    R.check(f"{label}: exactly the documented alerts", set(alerts) == set(ALERTS), sorted(alerts))
    anchors = runbook_anchors(chart)
    with open(os.path.join(chart, "values.yaml")) as f:
        defaults = yaml.safe_load(f)["metrics"]["prometheusRule"]["alerts"]
    for name, rule in sorted(alerts.items()):
        key = ALERTS.get(name)
        if key is None:
            continue
        v = defaults[key]
        R.check(f"{label}: {name} has for={v['for']}, severity={v['severity']} and the alert labels",
                rule.get("for") == v["for"]
                and rule["labels"] == {"severity": v["severity"], "team": "platform"}, rule)
        url = rule["annotations"].get("runbook_url", "")
        R.check(f"{label}: {name} links its runbook section (docs/runbook.md#{name.lower()})",
                url == f"docs/runbook.md#{name.lower()}" and name.lower() in anchors, (url, sorted(anchors)))
        R.check(f"{label}: {name} has a summary and a description",
                rule["annotations"].get("summary") and rule["annotations"].get("description"))
        series = set(re.findall(r"\b(hookgate_[a-z_]+)\b", rule["expr"]))
        unknown = {family(m) for m in series} - registered
        R.check(f"{label}: {name} reads only metrics that src/metrics/register.rs registers",
                not unknown, unknown)
        if name != "HookgateWorkersAbsent":
            selectors = re.findall(r"\b(hookgate_[a-z_]+)(\{[^}]*\})?", rule["expr"])
            R.check(f"{label}: {name} keeps every selector to the release's namespace",
                    selectors and all(sel.startswith(f'{{namespace="{NAMESPACE}"') for _, sel in selectors),
                    rule["expr"])
    expr = alerts["HookgateWorkersAbsent"]["expr"]
    R.check(f"{label}: HookgateWorkersAbsent reads the up series of the worker metrics Service",
            f'up{{job="{FULL}-worker-metrics",namespace="{NAMESPACE}"}} == 1' in expr, expr)

    # Every threshold, window and `for` comes from the values.
    objs = helm.objects(*on, "--set", "metrics.prometheusRule.alerts.oldestPending.thresholdSeconds=123",
                        "--set", "metrics.prometheusRule.alerts.oldestPending.for=7m",
                        "--set", "metrics.prometheusRule.alerts.signatureFailures.ratio=0.25",
                        "--set", "metrics.prometheusRule.alerts.signatureFailures.minRequestsPerSecond=0.5",
                        "--set", "metrics.prometheusRule.alerts.signatureFailures.window=3m",
                        "--set", "metrics.prometheusRule.alerts.retiringKeyInUse.window=45m",
                        "--set", "metrics.prometheusRule.alerts.workersAbsent.selector=job=\"w\"",
                        "--set", "metrics.prometheusRule.alerts.catchUpFailing.enabled=false",
                        "--set", "metrics.prometheusRule.selector=")
    alerts = rule_alerts(objs)
    op, sig, key = (alerts[n]["expr"] for n in ("HookgateInboxOldestPending", "HookgateSignatureFailures",
                                                   "HookgateRetiringKeyInUse"))
    R.check(f"{label}: values reach the rules (threshold, for, ratio, rate, window, selector)",
            op.rstrip().endswith("> 123") and alerts["HookgateInboxOldestPending"]["for"] == "7m"
            and "> 0.25" in sig and "> 0.5" in sig and "[3m]" in sig
            and "[45m]" in key and "offset 45m" in key
            and 'up{job="w"} == 1' in alerts["HookgateWorkersAbsent"]["expr"], alerts)
    R.check(f"{label}: an alert can be turned off", "HookgateCatchUpFailing" not in alerts, sorted(alerts))
    R.check(f"{label}: an empty selector reads every namespace",
            "namespace=" not in op and "hookgate_inbox_oldest_pending_seconds{}" in op, op)
    rc, _, err = helm.template(*on, "--set", "metrics.prometheusRule.alerts.deadLetters.window=15 minutes")
    R.check(f"{label}: a malformed window fails (schema)", rc != 0 and "window" in err, err.strip()[-300:])
    rc, _, err = helm.template(*on, "--set", "metrics.prometheusRule.alerts.signatureFailures.ratio=5")
    R.check(f"{label}: a ratio over 1 fails (schema)", rc != 0 and "ratio" in err, err.strip()[-300:])


def scenario_failures(helm, chart):
    cases = [
        ("a typo'd top-level key fails (schema)", ["--set", "recevier.replicas=2", "--set", f"database.url={DB_URL}"],
         "recevier"),
        ("a typo'd nested key fails (schema)", ["--set", "receiver.replcas=2", "--set", f"database.url={DB_URL}"],
         "replcas"),
        ("a wrong type fails (schema)", ["--set", "worker.concurrency=many", "--set", f"database.url={DB_URL}"],
         "concurrency"),
        ("no catch-up pass fails (schema)", ["--set", "worker.catchUpPasses=0", "--set", f"database.url={DB_URL}"],
         "catchUpPasses"),
        ("a group-commit batch over 1000 fails (schema)",
         ["--set", "receiver.groupCommit.maxBatch=5000", "--set", f"database.url={DB_URL}"], "maxBatch"),
        ("a dedupe cache over 4096 MiB fails (schema)",
         ["--set", "receiver.dedupeCache.mib=5000", "--set", f"database.url={DB_URL}"], "mib"),
        ("a malformed dedupe cache ttl fails (schema)",
         ["--set", "receiver.dedupeCache.ttl=forever", "--set", f"database.url={DB_URL}"], "ttl"),
        ("an unknown log format fails (schema)", ["--set", "logFormat=xml", "--set", f"database.url={DB_URL}"],
         "logFormat"),
        ("a malformed duration fails (schema)", ["--set", "worker.lease=soon", "--set", f"database.url={DB_URL}"],
         "lease"),
        ("a missing database fails with the chart's message", [],
         "no database configured. Set database.existingSecret"),
        ("both database settings fail", ["--set", "database.existingSecret=pg", "--set", f"database.url={DB_URL}"],
         "set only one of database.existingSecret and database.url"),
    ]
    for name, args, needle in cases:
        rc, _, err = helm.template(*args)
        R.check(f"failure: {name}", rc != 0 and needle in err, f"rc={rc} stderr={err.strip()[-400:]}")


# Each duration value the chart passes as a flag: (values key, the flag, the role whose pod gets
# it, how a duration is written for that key, the extra values that make the role get it).
DURATION_VALUES = [
    ("database.acquireTimeout", "--db-acquire-timeout", "worker", "{}ms", []),
    ("database.statementTimeout", "--db-statement-timeout", "controller", "{}ms", []),
    ("receiver.groupCommit.window", "--commit-window", "receiver", "{}ms", []),
    ("receiver.dedupeCache.ttl", "--dedupe-cache-ttl", "receiver", "{}ms", []),
    ("receiver.listener.headerTimeout", "--header-timeout", "receiver", "{}ms", []),
    ("receiver.listener.bodyTimeout", "--body-timeout", "receiver", "{}ms", []),
    ("worker.lease", "--lease", "worker", "{}ms", []),
    ("worker.poll", "--poll", "receiver", "{}ms", ["--set", "receiver.workers.enabled=true"]),
    ("worker.graceSeconds", "--grace", "worker", "{}", []),
]


def duration_ranges(chart):
    """The chart's copy of the flags' ranges (hookgate.durationRanges), in milliseconds."""
    with open(os.path.join(chart, "templates", "_helpers.tpl")) as f:
        text = f.read()
    block = text.split('{{- define "hookgate.durationRanges" -}}\n', 1)[1].split("{{- end }}", 1)[0]
    unit = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

    def ms(d):
        n, u = re.fullmatch(r"(\d+)([a-z]+)", d).groups()
        return int(n) * unit[u]

    return {k: (ms(lo), ms(hi)) for k, (lo, hi) in yaml.safe_load(block).items()}


def scenario_duration_ranges(helm, chart):
    """Both ends of each duration render into the pod's args; a step past either end fails the
    render naming the value and its range, as the pod would have failed at start."""
    ranges = duration_ranges(chart)
    R.check("durations: the chart passes exactly the flags its ranges list",
            sorted(f for _, f, *_ in DURATION_VALUES) == sorted(ranges), sorted(ranges))
    db = ["--set", f"database.url={DB_URL}"]
    for key, flag_name, role, form, extra in DURATION_VALUES:
        lo, hi = ranges[flag_name]
        seconds = form == "{}"
        for end in (lo, hi):
            value = form.format(end // 1000 if seconds else end)
            objs = helm.objects(*db, *extra, "--set-string" if not seconds else "--set", f"{key}={value}")
            got = flag(container(objs, role)["args"], flag_name)
            want = f"{value}s" if seconds else value
            R.check(f"durations: {key}={value} (an end of {flag_name}) renders into the {role}'s args",
                    got == [want], got)
        past = [(lo - (1000 if seconds else 1), "below")] if lo > 0 else []
        past.append((hi + (1000 if seconds else 1), "above"))
        for v, side in past:
            value = form.format(v // 1000 if seconds else v)
            rc, _, err = helm.template(*db, *extra, "--set-string" if not seconds else "--set", f"{key}={value}")
            shown = f"{value}s" if seconds else value
            # The schema's pattern refuses some first (a zero where the pattern wants 1-9).
            by_schema = "don't meet the specifications of the schema" in err and key.split(".")[-1] in err
            R.check(f"durations: {key}={value} ({side} {flag_name}'s range) fails naming the value",
                    rc != 0 and (f"{key} must be from " in err and f"got {shown}" in err or by_schema),
                    f"rc={rc} stderr={err.strip()[-300:]}")


def scenario_crd(chart, crd):
    chart_crd = os.path.join(chart, "crds", os.path.basename(crd))
    with open(crd, "rb") as a, open(chart_crd, "rb") as b:
        R.check(f"CRD: {chart_crd} is byte-identical to {crd}", a.read() == b.read(),
                f"run: cp {crd} {chart_crd}")
    R.check("CRD: the chart ships exactly one CRD file", os.listdir(os.path.dirname(chart_crd))
            == [os.path.basename(crd)], os.listdir(os.path.dirname(chart_crd)))


def scenario_values_documented(chart):
    """Every key in values.yaml is in the schema, and every leaf has a comment above it or its block."""
    with open(os.path.join(chart, "values.yaml")) as f:
        text = f.read()
    values = yaml.safe_load(text)
    with open(os.path.join(chart, "values.schema.json")) as f:
        schema = json.load(f)

    def resolve(node):
        while "$ref" in node:
            node = schema["definitions"][node["$ref"].split("/")[-1]]
        return node

    undeclared, closed = [], []

    def walk(v, node, path):
        node = resolve(node)
        if isinstance(v, dict):
            if node.get("additionalProperties") is False:
                closed.append(path or "(top)")
            for k, sub in v.items():
                if k in node.get("properties", {}):
                    walk(sub, node["properties"][k], f"{path}{k}.")
                elif node.get("additionalProperties") is False:
                    undeclared.append(path + k)

    walk(values, schema, "")
    R.check("schema: draft-07", schema.get("$schema") == "http://json-schema.org/draft-07/schema#")
    R.check("schema: every key in values.yaml is declared", not undeclared, undeclared)
    R.check(f"schema: typed levels refuse unknown keys ({len(closed)} levels)",
            {"(top)", "image.", "database.", "controller.", "receiver.", "worker.", "ingress.",
             "networkPolicy.", "metrics.", "receiver.autoscaling.", "receiver.workers.", "worker.probes.",
             "worker.destinations."} <= set(closed), closed)
    lines = text.splitlines()
    undocumented = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)([A-Za-z][A-Za-z0-9]*):", line)
        if not m:
            continue
        prev = lines[i - 1].strip() if i else ""
        if not prev.startswith("#"):
            # A key inside a commented block (e.g. resources.requests) is covered by that block.
            indent = len(m.group(1))
            j = i - 1
            while j >= 0 and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) >= indent):
                j -= 1
            parent_comment = j > 0 and lines[j - 1].strip().startswith("#")
            if indent == 0 or not parent_comment:
                undocumented.append(m.group(2))
    R.check("values.yaml: every key has a comment", not undocumented, undocumented)


def scenario_dashboard_source(chart):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import dashboard  # noqa: E402  (tests/chart/dashboard.py)

    with open(os.path.join(chart, "files", "dashboard.json")) as f:
        R.check("dashboard: files/dashboard.json is what tests/chart/dashboard.py generates",
                f.read() == dashboard.render(),
                "run: python3 tests/chart/dashboard.py > charts/hookgate/files/dashboard.json")


def cmd_render(args):
    helm = Helm(args.helm, args.chart)
    scenario_crd(args.chart, args.crd)
    scenario_values_documented(args.chart)
    scenario_dashboard_source(args.chart)
    scenario_default(helm, args.chart, registered_metrics(args.metrics))
    scenario_production(helm, args.chart)
    scenario_toggles(helm, args.chart)
    scenario_destinations(helm, args.chart)
    scenario_trusted_proxies(helm, args.chart)
    scenario_db_pool(helm, args.chart)
    scenario_receiver_workers(helm, args.chart)
    scenario_prometheus_rule(helm, args.chart, registered_metrics(args.metrics))
    scenario_failures(helm, args.chart)
    scenario_duration_ranges(helm, args.chart)
    return R.finish()


def cmd_dockerfile(args):
    """The Dockerfile and .dockerignore: the build the brief asks for, and a context that holds
    everything the build reads (checked against the sources, so a new include_str! is caught)."""
    root = args.root
    with open(os.path.join(root, "Dockerfile")) as f:
        text = f.read()
    lines = [l.strip() for l in text.replace("\\\n", " ").splitlines()
             if l.strip() and not l.strip().startswith("#")]
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    R.check("Dockerfile: builds on rust:1.95-slim-bookworm",
            len(froms) == 2 and froms[0].split()[1] == "rust:1.95-slim-bookworm", froms)
    R.check("Dockerfile: runs on distroless cc-debian12:nonroot",
            froms[-1].split()[1] == "gcr.io/distroless/cc-debian12:nonroot", froms)
    R.check("Dockerfile: cargo build --release --locked of both binaries",
            "cargo build --release --locked --bin hookgate --bin kubectl-hookgate" in " ".join(lines))
    final = lines[[i for i, l in enumerate(lines) if l.upper().startswith("FROM ")][-1]:]
    R.check("Dockerfile: the final stage runs as 65532",
            [l for l in final if l.upper().startswith("USER ")] == ["USER 65532:65532"])
    R.check("Dockerfile: entrypoint /hookgate", 'ENTRYPOINT ["/hookgate"]' in final)
    R.check("Dockerfile: the final stage copies only the binaries",
            all("--from=build" in l for l in final if l.upper().startswith("COPY ")))

    with open(os.path.join(root, ".dockerignore")) as f:
        ignored = {l.strip().rstrip("/") for l in f if l.strip() and not l.startswith("#")}
    R.check(".dockerignore: excludes target/ and .git/", {"target", ".git"} <= ignored, ignored)
    copied = set()
    for l in lines:
        if l.upper().startswith("COPY ") and "--from" not in l:
            copied.update(p.rstrip("/") for p in l.split()[1:-1])
    # What cargo reads: the manifest, the lockfile, src/ and every path a macro embeds.
    needed = {"Cargo.toml", "Cargo.lock", "src"}
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for name in files:
            if name.endswith(".rs"):
                with open(os.path.join(dirpath, name)) as f:
                    src = f.read()
                for m in re.findall(r'sqlx::migrate!\(\s*"([^"]+)"', src):
                    needed.add(m.split("/")[0])
                for m in re.findall(r'include_(?:str|bytes)!\(\s*"([^"]+)"', src):
                    full = os.path.normpath(os.path.join(dirpath, m))
                    needed.add(os.path.relpath(full, root).split(os.sep)[0])
    R.check("Dockerfile: copies everything the build reads", needed <= copied,
            f"missing {sorted(needed - copied)}")
    R.check(".dockerignore: keeps everything the build reads", not (needed & ignored),
            sorted(needed & ignored))
    return R.finish()


def cmd_checkov(args):
    with open(args.report) as f:
        report = json.load(f)
    reports = report if isinstance(report, list) else [report]
    reports = [r for r in reports if r.get("check_type") == args.framework]
    fw = args.framework
    if not R.check(f"checkov {fw}: produced a report", len(reports) == 1, [r.get("check_type") for r in reports]):
        return R.finish()
    summary, results = reports[0]["summary"], reports[0]["results"]
    R.check(f"checkov {fw}: no parsing errors", summary["parsing_errors"] == 0, results.get("parsing_errors"))
    R.check(f"checkov {fw}: checks ran ({summary['passed']} passed)", summary["passed"] > 0)
    failed = [(c["check_id"], c["resource"], c["check_name"]) for c in results.get("failed_checks", [])]
    R.check(f"checkov {fw}: zero failed checks", not failed,
            "\n  " + "\n  ".join(f"{i} {r}: {n}" for i, r, n in failed))
    skipped = results.get("skipped_checks", [])
    got = {(c["check_id"], c["resource"]) for c in skipped}
    want = EXPECTED_SKIPS[fw]
    R.check(f"checkov {fw}: skips are exactly the justified ones ({len(want)})", got == want,
            f"unexpected {sorted(got - want)} missing {sorted(want - got)}")
    no_reason = [c["check_id"] for c in skipped
                 if len((c.get("check_result") or {}).get("suppress_comment") or "") < 20]
    R.check(f"checkov {fw}: every skip carries its reason", not no_reason, no_reason)
    for c in skipped:
        print(f"     skipped {c['check_id']} {c['resource']}: {c['check_result'].get('suppress_comment')}")
    return R.finish()


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("render")
    r.add_argument("--helm", required=True)
    r.add_argument("--chart", required=True)
    r.add_argument("--crd", required=True)
    r.add_argument("--metrics", required=True, help="src/metrics/register.rs")
    d = sub.add_parser("dockerfile")
    d.add_argument("--root", default=".")
    c = sub.add_parser("checkov")
    c.add_argument("--report", required=True)
    c.add_argument("--framework", required=True, choices=sorted(EXPECTED_SKIPS))
    args = p.parse_args()
    sys.exit({"render": cmd_render, "dockerfile": cmd_dockerfile, "checkov": cmd_checkov}[args.cmd](args))


if __name__ == "__main__":
    main()
