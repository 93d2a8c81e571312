//! `hookgate::manifest`: loading the YAML a user would `kubectl apply`, from real files. Every
//! error must name the file, the object and the field.

use hookgate::manifest::{self, Manifests};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

const SECRET: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: hook-secret, namespace: payments}
stringData:
  v1: s3cret
"#;

/// A valid integration `payments/{name}` using [`SECRET`], with `extra` spec lines appended.
fn integration(name: &str, extra: &str) -> String {
    format!(
        r#"
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: {name}, namespace: payments}}
spec:
  scheme: {{type: stripe}}
  keys:
    - id: v1
      secretRef: {{name: hook-secret, key: v1}}
  delivery: {{url: "http://127.0.0.1:9000/{name}"}}
{extra}"#
    )
}

fn docs(parts: &[&str]) -> String {
    parts.join("\n---\n")
}

/// Writes `text` to `dir/rel`, creating parent directories.
fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    std::fs::write(&path, text).expect("write");
    path
}

fn load(paths: &[PathBuf]) -> Manifests {
    manifest::load(paths).unwrap_or_else(|e| panic!("loads: {e}"))
}

fn load_err(path: &Path) -> String {
    manifest::load(&[path.to_path_buf()])
        .expect_err("the manifests must be refused")
        .to_string()
}

/// The error of a file that loads but whose routes are refused.
fn compile_err(file: &Path) -> String {
    load(&[file.to_path_buf()])
        .route_table()
        .expect_err("the routes must be refused")
        .to_string()
}

/// Asserts that `shown` contains every fragment.
#[track_caller]
fn assert_names(shown: &str, fragments: &[&str]) {
    for f in fragments {
        assert!(shown.contains(f), "{f:?} missing from error: {shown}");
    }
}

fn names(m: &Manifests) -> Vec<String> {
    let mut v: Vec<String> = m.integrations.iter().map(|l| l.object()).collect();
    v.sort();
    v
}

// ---- errors ----

#[test]
fn invalid_yaml_names_the_file_and_document() {
    let dir = TempDir::new().unwrap();
    let file = write(
        dir.path(),
        "multi.yaml",
        &docs(&[SECRET, "apiVersion: v1\nkind: [unclosed\n"]),
    );
    let shown = load_err(&file);
    assert_names(
        &shown,
        &[
            &file.display().to_string(),
            ": document 2: ",
            "invalid YAML",
        ],
    );
}

#[test]
fn a_missing_kind_names_the_document_and_field() {
    let dir = TempDir::new().unwrap();
    let file = write(
        dir.path(),
        "nokind.yaml",
        &docs(&[
            SECRET,
            SECRET.replace("Secret", "Other").as_str(),
            "apiVersion: v1\nmetadata: {name: x}\n",
        ]),
    );
    let shown = load_err(&file);
    assert_eq!(
        shown,
        format!("{}: document 3: kind: missing", file.display())
    );
}

#[test]
fn a_missing_api_version_names_the_document_and_field() {
    let dir = TempDir::new().unwrap();
    let file = write(
        dir.path(),
        "noapi.yaml",
        "kind: Secret\nmetadata: {name: x}\n",
    );
    let shown = load_err(&file);
    assert_eq!(
        shown,
        format!("{}: document 1: apiVersion: missing", file.display())
    );
}

#[test]
fn an_unserved_api_version_is_refused() {
    let dir = TempDir::new().unwrap();
    let text = integration("stripe", "").replace("hookgate.dev/v1alpha1", "hookgate.dev/v1");
    let file = write(dir.path(), "v1.yaml", &text);
    let shown = load_err(&file);
    assert_names(
        &shown,
        &[
            &file.display().to_string(),
            "WebhookIntegration payments/stripe",
            ": apiVersion: ",
            "\"hookgate.dev/v1\" is not served",
        ],
    );
}

#[test]
fn an_unknown_scheme_type_names_spec_scheme_type() {
    let dir = TempDir::new().unwrap();
    let text = integration("stripe", "").replace("type: stripe", "type: paypal");
    let file = write(dir.path(), "paypal.yaml", &text);
    let shown = load_err(&file);
    assert_names(
        &shown,
        &[
            &file.display().to_string(),
            "WebhookIntegration payments/stripe",
            ": spec.scheme.type: ",
            "paypal",
        ],
    );
}

#[test]
fn a_misspelled_field_is_named_by_its_path() {
    let dir = TempDir::new().unwrap();
    let text = integration("partner", "").replace(
        "scheme: {type: stripe}",
        "scheme: {type: hmac-sha256, signatureHedaer: X-Sig}",
    );
    let file = write(dir.path(), "typo.yaml", &docs(&[SECRET, &text]));
    let shown = load_err(&file);
    assert_eq!(
        shown,
        format!(
            "{}: WebhookIntegration payments/partner: spec.scheme.signatureHedaer: unknown field",
            file.display()
        )
    );
}

#[test]
fn a_bad_retire_at_names_the_key() {
    let dir = TempDir::new().unwrap();
    let text = integration("stripe", "").replace(
        "secretRef: {name: hook-secret, key: v1}",
        "secretRef: {name: hook-secret, key: v1}\n      retireAt: \"tomorrow\"",
    );
    let file = write(dir.path(), "retire.yaml", &text);
    let shown = load_err(&file);
    assert_names(
        &shown,
        &[
            &file.display().to_string(),
            "WebhookIntegration payments/stripe",
            ": spec.keys[0].retireAt: ",
        ],
    );
}

#[test]
fn invalid_base64_in_a_secret_names_the_key() {
    let dir = TempDir::new().unwrap();
    let file = write(
        dir.path(),
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: keys, namespace: payments}\ndata:\n  good: czNjcmV0\n  token: \"not base64!\"\n",
    );
    let shown = load_err(&file);
    assert_names(
        &shown,
        &[
            &file.display().to_string(),
            "Secret payments/keys",
            ": data.token: ",
        ],
    );
}

/// YAML reads an unquoted `12345678` as a number, which a Secret's value cannot be; serde's
/// message for a value of the wrong type quotes it (`invalid type: integer `12345678`, ...`), and
/// the error goes to the terminal and the logs.
#[test]
fn a_secret_value_of_the_wrong_type_is_refused_without_showing_it() {
    let dir = TempDir::new().unwrap();
    for (i, (field, value)) in [
        ("stringData", "73914620558"),
        ("stringData", "-73914620558"),
        ("stringData", "7391.4620558"),
        ("stringData", "0x73914620558"),
        ("data", "73914620558"),
        ("stringData", "[73914620558]"),
        ("stringData", "{k: 73914620558}"),
        ("stringData", "true"),
        ("data", "\"73914620558!\""),
    ]
    .into_iter()
    .enumerate()
    {
        let file = write(
            dir.path(),
            &format!("secret-{i}.yaml"),
            &format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: keys, namespace: payments}}\n{field}:\n  token: {value}\n"
            ),
        );
        let shown = load_err(&file);
        assert_names(
            &shown,
            &[
                &file.display().to_string(),
                "Secret payments/keys",
                &format!(": {field}.token: "),
            ],
        );
        for secret in ["73914620558", "7391.4620558", "0x", "true", "33"] {
            assert!(
                !shown.contains(secret),
                "{value:?}: the value shows in the error: {shown}"
            );
        }
    }
}

#[test]
fn a_missing_secret_is_reported_with_the_integrations_file() {
    let dir = TempDir::new().unwrap();
    let secrets = write(dir.path(), "a-secrets.yaml", SECRET);
    let file = write(
        dir.path(),
        "b-hooks.yaml",
        &integration("stripe", "").replace("name: hook-secret", "name: stripe-keys"),
    );
    let m = load(&[secrets, file.clone()]);
    let shown = m.compile().expect_err("the Secret is missing").to_string();
    assert_eq!(
        shown,
        format!(
            "{}: WebhookIntegration payments/stripe: spec.keys[0].secretRef.name: Secret payments/stripe-keys not found",
            file.display()
        )
    );
}

#[test]
fn a_validation_error_is_reported_with_the_integrations_file() {
    let dir = TempDir::new().unwrap();
    let file = write(
        dir.path(),
        "hooks.yaml",
        &docs(&[SECRET, &integration("stripe", "  limits: {burst: 0}")]),
    );
    let shown = compile_err(&file);
    assert_eq!(
        shown,
        format!(
            "{}: WebhookIntegration payments/stripe: spec.limits.burst: must be between 1 and 100000",
            file.display()
        )
    );
}

#[test]
fn a_bad_source_range_is_refused_naming_file_object_field_and_entry() {
    let dir = TempDir::new().unwrap();
    for (ranges, field, reason) in [
        (
            "[192.0.2.0/24, \"2001:db8::/129\"]",
            "spec.sourceRanges[1]",
            "\"2001:db8::/129\" is not an IP address or CIDR",
        ),
        (
            "[10.1.2.3/8]",
            "spec.sourceRanges[0]",
            "\"10.1.2.3/8\" has host bits set: write 10.0.0.0/8 for the whole range, or 10.1.2.3/32",
        ),
    ] {
        let file = write(
            dir.path(),
            "hooks.yaml",
            &docs(&[
                SECRET,
                &integration("stripe", &format!("  sourceRanges: {ranges}")),
            ]),
        );
        let shown = compile_err(&file);
        assert!(
            shown.starts_with(&format!(
                "{}: WebhookIntegration payments/stripe: {field}: {reason}",
                file.display()
            )),
            "{shown}"
        );
    }
}

#[test]
fn a_metadata_destination_is_refused_naming_file_object_and_field() {
    let dir = TempDir::new().unwrap();
    for (url, reason) in [
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254 is a cloud metadata address",
        ),
        (
            "http://metadata.google.internal/computeMetadata/v1/",
            "metadata.google.internal is a cloud metadata host",
        ),
        ("http://[fe80::1]:8080/", "fe80::1 is link-local"),
    ] {
        let file = write(
            dir.path(),
            "hooks.yaml",
            &docs(&[SECRET, &integration("stripe", "")])
                .replace("http://127.0.0.1:9000/stripe", url),
        );
        let shown = compile_err(&file);
        assert!(
            shown.starts_with(&format!(
                "{}: WebhookIntegration payments/stripe: spec.delivery.url: {reason}",
                file.display()
            )),
            "{shown}"
        );
    }
}

#[test]
fn the_same_integration_in_two_files_names_both() {
    let dir = TempDir::new().unwrap();
    let first = write(
        dir.path(),
        "a.yaml",
        &docs(&[SECRET, &integration("stripe", "")]),
    );
    let second = write(dir.path(), "b.yaml", &integration("stripe", ""));
    let shown = load_err(dir.path());
    assert_names(
        &shown,
        &[
            &format!("{}: ", second.display()),
            "WebhookIntegration payments/stripe",
            ": metadata.name: ",
            &format!("already defined in {}", first.display()),
        ],
    );
}

#[test]
fn the_same_secret_twice_is_refused() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "a.yaml", SECRET);
    let second = write(dir.path(), "b.yaml", SECRET);
    let shown = load_err(dir.path());
    assert_eq!(
        shown,
        format!(
            "{}: Secret payments/hook-secret: metadata.name: Secret defined twice",
            second.display()
        )
    );
}

#[test]
fn two_integrations_on_one_path_name_both() {
    let dir = TempDir::new().unwrap();
    let first = write(
        dir.path(),
        "a.yaml",
        &docs(&[SECRET, &integration("stripe", "  path: /in/shared")]),
    );
    let second = write(
        dir.path(),
        "b.yaml",
        &integration("github", "  path: /in/shared"),
    );
    let m = load(&[dir.path().to_path_buf()]);
    assert_eq!(m.compile().expect("each compiles alone").len(), 2);
    let shown = m.route_table().unwrap_err().to_string();
    assert_eq!(
        shown,
        format!(
            "{}: WebhookIntegration payments/github: spec.path: path /in/shared is claimed by both \
             WebhookIntegration payments/stripe (in {}) and this integration",
            second.display(),
            first.display()
        )
    );
}

#[test]
fn a_missing_path_is_an_io_error_naming_it() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("nope.yaml");
    let shown = load_err(&missing);
    assert!(
        shown.starts_with(&format!("{}: ", missing.display())),
        "{shown}"
    );
}

// ---- what loads ----

#[test]
fn directories_load_recursively_and_skip_non_yaml_files() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "secrets.yaml", SECRET);
    write(dir.path(), "top.yml", &integration("top", ""));
    write(dir.path(), "team/a/deep.yaml", &integration("deep", ""));
    write(
        dir.path(),
        "team/b.json",
        r#"{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "json-secret", "namespace": "payments"}, "stringData": {"k": "v"}}"#,
    );
    // Not manifests: would fail to parse if they were read.
    write(
        dir.path(),
        "keys/x.key",
        "-----BEGIN PRIVATE KEY-----\n: not: yaml: [\n",
    );
    write(dir.path(), "README.md", "# notes\n\n- : [ not yaml\n");
    write(dir.path(), "team/notes.txt", "kind: [\n");
    let m = load(&[dir.path().to_path_buf()]);
    assert_eq!(
        names(&m),
        [
            "WebhookIntegration payments/deep",
            "WebhookIntegration payments/top"
        ]
    );
    assert!(
        m.secrets
            .contains_key(&("payments".to_string(), "json-secret".to_string()))
    );
    let table = m.route_table().expect("compiles");
    assert!(table.get("/hooks/payments/deep").is_some());
    assert!(table.get("/hooks/payments/top").is_some());
}

#[test]
fn string_data_overrides_data_for_the_same_key() {
    let dir = TempDir::new().unwrap();
    let file = write(
        dir.path(),
        "secret.yaml",
        r#"
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: payments}
data:
  v1: ZnJvbS1kYXRh        # "from-data"
  only-data: ZnJvbS1kYXRh
stringData:
  v1: from-string-data
"#,
    );
    let m = load(&[file]);
    let data = &m.secrets[&("payments".to_string(), "keys".to_string())];
    assert_eq!(data["v1"], b"from-string-data");
    assert_eq!(data["only-data"], b"from-data");
    assert_eq!(data.len(), 2);
}

#[test]
fn other_kinds_are_skipped() {
    let dir = TempDir::new().unwrap();
    let file = write(
        dir.path(),
        "mixed.yaml",
        &docs(&[
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: payments}\n",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: payments}\ndata: {a: b}\n",
            SECRET,
            &integration("stripe", ""),
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\nspec: {replicas: 1}\n",
            "",
        ]),
    );
    let m = load(&[file]);
    assert_eq!(names(&m), ["WebhookIntegration payments/stripe"]);
    assert_eq!(m.secrets.len(), 1);
    assert_eq!(m.route_table().expect("compiles").len(), 1);
}

#[test]
fn a_missing_namespace_defaults_to_default() {
    let dir = TempDir::new().unwrap();
    let text = docs(&[SECRET, &integration("stripe", "")]).replace(", namespace: payments", "");
    let file = write(dir.path(), "nons.yaml", &text);
    let m = load(&[file]);
    assert_eq!(names(&m), ["WebhookIntegration default/stripe"]);
    assert!(
        m.secrets
            .contains_key(&("default".to_string(), "hook-secret".to_string()))
    );
    assert_eq!(
        m.find("stripe").map(|l| l.object()).as_deref(),
        Some("WebhookIntegration default/stripe")
    );
    assert!(m.find("payments/stripe").is_none());
    let table = m.route_table().expect("compiles");
    assert_eq!(
        table
            .get("/hooks/default/stripe")
            .map(|r| r.integration.as_str()),
        Some("default/stripe")
    );
}

#[test]
fn find_looks_up_namespace_and_name() {
    let dir = TempDir::new().unwrap();
    let file = write(
        dir.path(),
        "a.yaml",
        &docs(&[SECRET, &integration("stripe", "")]),
    );
    let m = manifest::load_one(&file).expect("loads");
    let found = m.find("payments/stripe").expect("found");
    assert_eq!(found.file, file.display().to_string());
    assert!(
        m.find("stripe").is_none(),
        "a bare name means the default namespace"
    );
}

#[test]
fn the_repository_examples_load_and_compile() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/examples");
    let m = load(&[examples]);
    let routes = m
        .compile()
        .unwrap_or_else(|e| panic!("examples compile: {e}"));
    assert!(routes.len() >= 7, "only {} integrations", routes.len());
    let paths: HashSet<&str> = routes.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths.len(), routes.len(), "paths must be unique");
    let table = m
        .route_table()
        .unwrap_or_else(|e| panic!("route table: {e}"));
    assert_eq!(table.len(), routes.len());
    assert_eq!(
        table
            .get("/hooks/shop/orders")
            .map(|r| r.integration.as_str()),
        Some("shop/orders")
    );
    assert_eq!(
        table
            .get("/hooks/payments/stripe")
            .map(|r| r.integration.as_str()),
        Some("payments/stripe")
    );
}
