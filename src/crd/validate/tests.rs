use super::*;

/// A spec exactly as a user writes it in YAML.
fn spec(yaml: &str) -> WebhookIntegrationSpec {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("test YAML must parse: {e}\n{yaml}"))
}

/// A valid hmac-sha256 spec whose top-level fields are replaced by those in `overrides`.
fn with(overrides: &str) -> WebhookIntegrationSpec {
    let mut base: serde_yaml::Mapping = serde_yaml::from_str(
        r#"
scheme: {type: hmac-sha256}
keys:
  - id: v1
    secretRef: {name: hook-secret, key: v1}
delivery: {url: "https://app.example.com/webhooks"}
"#,
    )
    .expect("base YAML parses");
    let extra: serde_yaml::Mapping = serde_yaml::from_str(overrides)
        .unwrap_or_else(|e| panic!("override YAML must parse: {e}\n{overrides}"));
    for (k, v) in extra {
        base.insert(k, v);
    }
    spec(&serde_yaml::to_string(&base).expect("mapping serializes"))
}

#[test]
fn base_spec_is_valid() {
    assert_eq!(spec_result("{}"), Ok(()));
}

fn spec_result(overrides: &str) -> Result<(), FieldError> {
    super::spec(&with(overrides))
}

#[test]
fn a_valid_spec_of_every_scheme_type_passes() {
    let cases = [
        "scheme: {type: stripe}",
        "scheme: {type: github}",
        "scheme: {type: standard-webhooks}",
        "scheme: {type: slack}",
        "scheme: {type: shopify}",
        "scheme: {type: hmac-sha256}",
        "scheme: {type: ed25519}",
        // Every generic field set, Discord-style.
        r#"scheme:
                 type: ed25519
                 signatureHeader: X-Signature-Ed25519
                 timestampHeader: X-Signature-Timestamp
                 eventIdHeader: ""
                 keyIdHeader: ""
                 signedPayload: "{timestamp}{body}"
                 encoding: hex
                 signaturePrefix: ""
            "#,
        // A provider that signs only the body.
        r#"scheme: {type: hmac-sha256, timestampHeader: "", eventIdHeader: "", signedPayload: "{body}", encoding: base64, signaturePrefix: "sha256="}"#,
        "scheme: {type: discord}",
        "scheme: {type: twilio, publicUrl: https://hooks.example.com/hooks/ns/twilio}",
        // A port and plain http (behind a TLS-terminating proxy the URL is still what is signed).
        "scheme: {type: twilio, publicUrl: \"http://10.0.0.1:8080/in\"}",
        "scheme: {type: twitch}",
        "scheme: {type: zoom}",
        "scheme: {type: meta, verifyTokenRef: {name: meta-app, key: verify-token}}",
        "scheme: {type: gitlab}",
        "scheme: {type: paddle}",
        "scheme: {type: square, publicUrl: https://hooks.example.com/hooks/ns/square}",
        "scheme: {type: sendgrid}",
        "scheme: {type: linear}",
        // The controller may generate secrets the provider accepts from us.
        "{scheme: {type: twitch}, keys: [], rotation: {generate: true}}",
        "{scheme: {type: gitlab}, keys: [], rotation: {generate: true, every: 720h}}",
    ];
    for case in cases {
        assert_eq!(spec_result(case), Ok(()), "{case}");
    }
}

#[test]
fn a_fully_specified_spec_passes() {
    let s = spec(
        r#"
path: /hooks/payments/stripe-v2
scheme: {type: stripe}
eventId: {jsonPointer: /data/object/id}
eventType: {header: X-Event-Type}
replay: {tolerance: 1h30m, nonceRetention: 48h}
keys:
  - id: v1
    secretRef: {name: stripe-keys, key: v1}
    retireAt: "2030-01-01T00:00:00Z"
  - id: v2.next_key-2
    secretRef: {name: stripe-keys, key: v2}
events: {allow: ["invoice.*", "customer.?"]}
delivery: {url: "http://billing.payments.svc:8080/webhooks"}
limits: {maxBodyBytes: 67108864, requestsPerSecond: 1, burst: 1}
"#,
    );
    assert_eq!(super::spec(&s), Ok(()));
}

#[test]
fn each_invalid_field_is_named_exactly() {
    // (overrides, field, fragment of the message)
    let cases: &[(&str, &str, &str)] = &[
        // path
        ("path: hooks/x", "spec.path", "must start with '/'"),
        ("path: /a//b", "spec.path", "no empty segment"),
        ("path: /a/", "spec.path", "no empty segment"),
        ("path: /a?b=c", "spec.path", "A-Z a-z 0-9"),
        // generic-only fields on a provider scheme
        (
            "scheme: {type: stripe, signatureHeader: X-Sig}",
            "spec.scheme.signatureHeader",
            "applies only to type hmac-sha256 or ed25519",
        ),
        (
            "scheme: {type: github, encoding: hex}",
            "spec.scheme.encoding",
            "applies only to type hmac-sha256 or ed25519",
        ),
        (
            r#"scheme: {type: slack, signedPayload: "{body}"}"#,
            "spec.scheme.signedPayload",
            "applies only to type hmac-sha256 or ed25519",
        ),
        (
            r#"scheme: {type: standard-webhooks, timestampHeader: ""}"#,
            "spec.scheme.timestampHeader",
            "applies only to type hmac-sha256 or ed25519",
        ),
        (
            r#"scheme: {type: shopify, signaturePrefix: "sha256="}"#,
            "spec.scheme.signaturePrefix",
            "applies only to type hmac-sha256 or ed25519",
        ),
        // signedPayload
        (
            r#"scheme: {type: hmac-sha256, signedPayload: "{ts}.{body}"}"#,
            "spec.scheme.signedPayload",
            "unknown placeholder {ts}",
        ),
        (
            r#"scheme: {type: hmac-sha256, signedPayload: "{timestamp}.{event_id}"}"#,
            "spec.scheme.signedPayload",
            "must contain {body}",
        ),
        (
            r#"scheme: {type: ed25519, signedPayload: "{body}.{body}"}"#,
            "spec.scheme.signedPayload",
            "only once",
        ),
        (
            r#"scheme: {type: hmac-sha256, signedPayload: "{timestamp.{body}"}"#,
            "spec.scheme.signedPayload",
            "unknown placeholder",
        ),
        (
            r#"scheme: {type: hmac-sha256, timestampHeader: "", signedPayload: "{timestamp}.{body}"}"#,
            "spec.scheme.signedPayload",
            "uses {timestamp} but timestampHeader is empty",
        ),
        // The default payload signs the timestamp too.
        (
            r#"scheme: {type: hmac-sha256, timestampHeader: ""}"#,
            "spec.scheme.signedPayload",
            "uses {timestamp} but timestampHeader is empty",
        ),
        (
            r#"scheme: {type: ed25519, timestampHeader: "", eventIdHeader: "", signedPayload: "{event_id}.{body}"}"#,
            "spec.scheme.signedPayload",
            "uses {event_id} but eventIdHeader is empty",
        ),
        // header names
        (
            r#"scheme: {type: hmac-sha256, signatureHeader: "bad header"}"#,
            "spec.scheme.signatureHeader",
            "\"bad header\" is not a valid HTTP header name",
        ),
        (
            r#"scheme: {type: hmac-sha256, signatureHeader: ""}"#,
            "spec.scheme.signatureHeader",
            "must not be empty",
        ),
        (
            r#"scheme: {type: hmac-sha256, timestampHeader: "bad header"}"#,
            "spec.scheme.timestampHeader",
            "not a valid HTTP header name",
        ),
        (
            r#"scheme: {type: ed25519, eventIdHeader: "bad header"}"#,
            "spec.scheme.eventIdHeader",
            "not a valid HTTP header name",
        ),
        (
            r#"scheme: {type: hmac-sha256, keyIdHeader: "X-Key:Id"}"#,
            "spec.scheme.keyIdHeader",
            "not a valid HTTP header name",
        ),
        (
            r#"eventId: {header: "bad header"}"#,
            "spec.eventId.header",
            "\"bad header\" is not a valid HTTP header name",
        ),
        (
            r#"eventType: {header: "bad header"}"#,
            "spec.eventType.header",
            "not a valid HTTP header name",
        ),
        // event id / type sources
        (
            "eventId: {header: X-Event-Id, jsonPointer: /id}",
            "spec.eventId",
            "set exactly one of header or jsonPointer",
        ),
        (
            "eventType: {}",
            "spec.eventType",
            "set exactly one of header or jsonPointer",
        ),
        (
            "eventId: {jsonPointer: id}",
            "spec.eventId.jsonPointer",
            "must be empty or start with '/'",
        ),
        (
            "eventType: {jsonPointer: data/type}",
            "spec.eventType.jsonPointer",
            "must be empty or start with '/'",
        ),
        // event versions
        (
            "events: {versionPointer: /api_version}",
            "spec.events.supported",
            "at least one version is required with versionPointer",
        ),
        (
            "events: {versionPointer: /api_version, supported: []}",
            "spec.events.supported",
            "at least one version is required with versionPointer",
        ),
        (
            r#"events: {supported: ["2024-06-20"]}"#,
            "spec.events.supported",
            "applies only with versionPointer",
        ),
        (
            r#"events: {versionPointer: api_version, supported: ["1"]}"#,
            "spec.events.versionPointer",
            "must be a JSON pointer starting with '/'",
        ),
        (
            r#"events: {versionPointer: /v, supported: ["1", ""]}"#,
            "spec.events.supported[1]",
            "must be 1 to 512 characters",
        ),
        (
            r#"events: {versionPointer: /v, supported: ["1", "2", "1"]}"#,
            "spec.events.supported[2]",
            "duplicate version \"1\"",
        ),
        // replay
        (
            "replay: {tolerance: 5 minutes}",
            "spec.replay.tolerance",
            "invalid duration \"5 minutes\"",
        ),
        (
            "replay: {tolerance: 0s}",
            "spec.replay.tolerance",
            "must be greater than zero",
        ),
        (
            "replay: {tolerance: \"300\"}",
            "spec.replay.tolerance",
            "invalid duration \"300\"",
        ),
        (
            "replay: {nonceRetention: garbage}",
            "spec.replay.nonceRetention",
            "invalid duration \"garbage\"",
        ),
        (
            "replay: {nonceRetention: 0h0m}",
            "spec.replay.nonceRetention",
            "must be greater than zero",
        ),
        // keys
        ("keys: []", "spec.keys", "at least one key is required"),
        (
            r#"keys:
                     - {id: v1, secretRef: {name: s, key: a}}
                     - {id: v1, secretRef: {name: s, key: b}}"#,
            "spec.keys[1].id",
            "duplicate key id \"v1\"",
        ),
        (
            "keys: [{id: v 1, secretRef: {name: s, key: a}}]",
            "spec.keys[0].id",
            "must match [A-Za-z0-9._-]{1,64}",
        ),
        (
            r#"keys:
                     - {id: v1, secretRef: {name: s, key: a}}
                     - {id: "v2/next", secretRef: {name: s, key: b}}"#,
            "spec.keys[1].id",
            "must match [A-Za-z0-9._-]{1,64}",
        ),
        (
            r#"keys: [{id: "", secretRef: {name: s, key: a}}]"#,
            "spec.keys[0].id",
            "{1,64}",
        ),
        (
            r#"keys: [{id: v1, secretRef: {name: "", key: a}}]"#,
            "spec.keys[0].secretRef",
            "name and key are required",
        ),
        (
            r#"keys: [{id: v1, secretRef: {name: s, key: ""}}]"#,
            "spec.keys[0].secretRef",
            "name and key are required",
        ),
        // events
        (
            r#"events: {allow: [""]}"#,
            "spec.events.allow[0]",
            "empty pattern",
        ),
        (
            r#"events: {allow: ["invoice.*", ""]}"#,
            "spec.events.allow[1]",
            "empty pattern",
        ),
        // delivery
        (
            "delivery: {url: \"ftp://x\"}",
            "spec.delivery.url",
            "must be an absolute http(s) URL",
        ),
        (
            "delivery: {url: not a url}",
            "spec.delivery.url",
            "must be an absolute http(s) URL",
        ),
        (
            "delivery: {url: /webhooks}",
            "spec.delivery.url",
            "must be an absolute http(s) URL",
        ),
        (
            "delivery: {url: \"http://169.254.169.254/latest/meta-data/\"}",
            "spec.delivery.url",
            "169.254.169.254 is a cloud metadata address; deliveries never go there",
        ),
        (
            "delivery: {url: \"http://169.254.10.1:8080/\"}",
            "spec.delivery.url",
            "link-local",
        ),
        (
            "delivery: {url: \"http://[fd00:ec2::254]/\"}",
            "spec.delivery.url",
            "fd00:ec2::254 is a cloud metadata address",
        ),
        (
            "delivery: {url: \"http://100.100.100.200/\"}",
            "spec.delivery.url",
            "cloud metadata address",
        ),
        (
            "delivery: {url: \"http://metadata.google.internal/computeMetadata/v1/\"}",
            "spec.delivery.url",
            "metadata.google.internal is a cloud metadata host",
        ),
        (
            "delivery: {url: \"https://kubernetes.default.svc/api\"}",
            "spec.delivery.url",
            "kubernetes.default.svc is the Kubernetes API server",
        ),
        // limits
        (
            "limits: {maxBodyBytes: 0}",
            "spec.limits.maxBodyBytes",
            "must be between 1 and 67108864",
        ),
        (
            "limits: {maxBodyBytes: 100000000}",
            "spec.limits.maxBodyBytes",
            "must be between 1 and 67108864",
        ),
        (
            "limits: {maxBodyBytes: 67108865}",
            "spec.limits.maxBodyBytes",
            "must be between 1 and 67108864",
        ),
        (
            "limits: {requestsPerSecond: 0}",
            "spec.limits.requestsPerSecond",
            "must be between 1 and 100000",
        ),
        (
            "limits: {requestsPerSecond: 100001}",
            "spec.limits.requestsPerSecond",
            "must be between 1 and 100000",
        ),
        (
            "limits: {requestsPerSecond: 10, burst: 0}",
            "spec.limits.burst",
            "must be between 1 and 100000",
        ),
        // sourceRanges: the index and the entry itself are named.
        (
            "sourceRanges: [10.0.0.0/8, 10.0.0.300/32]",
            "spec.sourceRanges[1]",
            "\"10.0.0.300/32\" is not an IP address or CIDR",
        ),
        (
            "sourceRanges: [192.0.2.1/24]",
            "spec.sourceRanges[0]",
            "host bits set: write 192.0.2.0/24",
        ),
        (
            "sourceRanges: [\"::ffff:192.0.2.0/120\"]",
            "spec.sourceRanges[0]",
            "IPv4-mapped",
        ),
        (
            "scheme: {type: hmac-sha256, signedPayload: '{body}'}",
            "spec.scheme.signedPayload",
            "X-Timestamp header is not signed",
        ),
        (
            "scheme: {type: ed25519, timestampHeader: X-Sent-At, signedPayload: '{event_id}.{body}'}",
            "spec.scheme.signedPayload",
            "X-Sent-At header is not signed",
        ),
        (
            "replay: {tolerance: 25h}",
            "spec.replay.tolerance",
            "must be at most 1d",
        ),
        (
            "replay: {tolerance: 1d1s}",
            "spec.replay.tolerance",
            "must be at most 1d",
        ),
        (
            "replay: {nonceRetention: 99999999999999999999d}",
            "spec.replay.nonceRetention",
            "",
        ),
        (
            "delivery: {url: 'http://x', timeout: 301s}",
            "spec.delivery.timeout",
            "must be at most 5m",
        ),
        (
            "delivery: {url: 'http://x', retry: {schedule: [1s, 31d]}}",
            "spec.delivery.retry.schedule[1]",
            "must be at most 30d",
        ),
        (
            "delivery: {url: 'http://x', retry: {schedule: [1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s]}}",
            "spec.delivery.retry.schedule",
            "at most 32 entries",
        ),
        (
            "rotation: {overlap: 366d}",
            "spec.rotation.overlap",
            "must be at most 365d",
        ),
        (
            "retention: {payload: 1000000000000000000000000000000ms}",
            "spec.retention.payload",
            "",
        ),
        // publicUrl: required where the provider signs the URL, refused elsewhere, and exactly a
        // URL the provider could have been configured with.
        (
            "scheme: {type: twilio}",
            "spec.scheme.publicUrl",
            "required for twilio and square",
        ),
        (
            "scheme: {type: square}",
            "spec.scheme.publicUrl",
            "required for twilio and square",
        ),
        (
            "scheme: {type: stripe, publicUrl: https://hooks.example.com/x}",
            "spec.scheme.publicUrl",
            "applies only to type twilio or square",
        ),
        (
            "scheme: {type: meta, publicUrl: https://hooks.example.com/x, verifyTokenRef: {name: s, key: t}}",
            "spec.scheme.publicUrl",
            "applies only to type twilio or square",
        ),
        (
            "scheme: {type: hmac-sha256, publicUrl: https://hooks.example.com/x}",
            "spec.scheme.publicUrl",
            "applies only to type twilio or square",
        ),
        (
            "scheme: {type: twilio, publicUrl: \"https://hooks.example.com/x?tenant=a\"}",
            "spec.scheme.publicUrl",
            "must not carry a query or fragment",
        ),
        (
            "scheme: {type: square, publicUrl: \"https://hooks.example.com/x#top\"}",
            "spec.scheme.publicUrl",
            "must not carry a query or fragment",
        ),
        (
            "scheme: {type: twilio, publicUrl: ftp://hooks.example.com/x}",
            "spec.scheme.publicUrl",
            "must start with https:// or http://",
        ),
        (
            "scheme: {type: square, publicUrl: hooks.example.com/x}",
            "spec.scheme.publicUrl",
            "must start with https:// or http://",
        ),
        (
            "scheme: {type: twilio, publicUrl: \"https:///x\"}",
            "spec.scheme.publicUrl",
            "must name a host",
        ),
        (
            "scheme: {type: twilio, publicUrl: \"https://hooks.example.com/a b\"}",
            "spec.scheme.publicUrl",
            "visible ASCII",
        ),
        // verifyTokenRef: Meta's subscription GET needs it; no other scheme reads it.
        (
            "scheme: {type: meta}",
            "spec.scheme.verifyTokenRef",
            "required for meta",
        ),
        (
            "scheme: {type: github, verifyTokenRef: {name: s, key: t}}",
            "spec.scheme.verifyTokenRef",
            "applies only to type meta",
        ),
        (
            "scheme: {type: twitch, verifyTokenRef: {name: s, key: t}}",
            "spec.scheme.verifyTokenRef",
            "applies only to type meta",
        ),
        (
            r#"scheme: {type: meta, verifyTokenRef: {name: "", key: t}}"#,
            "spec.scheme.verifyTokenRef.name",
            "must be 1-253 characters",
        ),
        (
            r#"scheme: {type: meta, verifyTokenRef: {name: s, key: ""}}"#,
            "spec.scheme.verifyTokenRef.key",
            "must be 1-253 characters",
        ),
        // Generic-only fields stay refused on the new types too.
        (
            "scheme: {type: discord, signatureHeader: X-Signature-Ed25519}",
            "spec.scheme.signatureHeader",
            "applies only to type hmac-sha256 or ed25519",
        ),
    ];
    let mut failures = Vec::new();
    for (overrides, field, fragment) in cases {
        match spec_result(overrides) {
            Err(e) if e.field == *field && e.message.contains(fragment) => {}
            other => failures.push(format!(
                "{overrides}\n  expected {field}: ...{fragment}...\n  got {other:?}"
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The controller can only generate a secret that the provider then accepts from us: not a
/// public key (discord, sendgrid) and not a secret the provider issues (zoom, paddle, ...).
#[test]
fn rotation_generate_is_refused_where_the_provider_issues_the_key() {
    for t in [
        "zoom", "paddle", "sendgrid", "discord", "twilio", "meta", "square", "linear",
    ] {
        let extra = match t {
            "twilio" | "square" => ", publicUrl: https://hooks.example.com/x",
            "meta" => ", verifyTokenRef: {name: s, key: t}",
            _ => "",
        };
        // With keys too: generate is refused for the type, not for a missing key list.
        for keys in ["[]", "[{id: v1, secretRef: {name: s, key: a}}]"] {
            let e = spec_result(&format!(
                "{{scheme: {{type: {t}{extra}}}, keys: {keys}, rotation: {{generate: true}}}}"
            ))
            .unwrap_err();
            assert_eq!(e.field, "spec.rotation.generate", "{t}: {e}");
            assert!(
                e.message.contains("only for shared-secret schemes"),
                "{t}: {e}"
            );
        }
    }
    for t in ["twitch", "gitlab"] {
        let r = spec_result(&format!(
            "{{scheme: {{type: {t}}}, keys: [], rotation: {{generate: true}}}}"
        ));
        assert_eq!(r, Ok(()), "{t}");
    }
}

#[test]
fn the_first_failing_field_wins() {
    let e = spec_result("{path: hooks/x, delivery: {url: \"ftp://x\"}, keys: []}").unwrap_err();
    assert_eq!(e.field, "spec.path");
    let e = spec_result("{keys: [], delivery: {url: \"ftp://x\"}}").unwrap_err();
    assert_eq!(e.field, "spec.keys");
}

#[test]
fn the_error_displays_field_then_message() {
    let e = spec_result("limits: {burst: 0}").unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.limits.burst: must be between 1 and 100000"
    );
}

#[test]
fn durations_use_the_crd_grammar() {
    let cases = [
        ("5m", Duration::from_secs(300)),
        ("24h", Duration::from_secs(86_400)),
        ("1h30m", Duration::from_secs(5_400)),
        ("2d", Duration::from_secs(172_800)),
        ("250ms", Duration::from_millis(250)),
        ("1m30s", Duration::from_secs(90)),
    ];
    for (text, want) in cases {
        assert_eq!(duration("f", text), Ok(want), "{text}");
    }
    // humantime would read these, but the CRD schema (`^([0-9]+(ms|s|m|h|d))+$`) refuses them,
    // so standalone must too: the same manifest cannot mean something else in the cluster.
    for text in [
        "5 minutes",
        "5min",
        "1h 30m",
        "1week",
        "5M",
        "1y",
        "",
        "m",
        "5",
        "-5m",
    ] {
        let e = duration("spec.replay.tolerance", text).unwrap_err();
        assert_eq!(e.field, "spec.replay.tolerance", "{text:?}");
        assert!(
            e.message.contains(&format!("invalid duration {text:?}")),
            "{text:?}: {e}"
        );
    }
}

#[test]
fn catch_up_is_checked_field_by_field() {
    let stripe = |catch_up: &str| format!("scheme: {{type: stripe}}\ncatchUp: {catch_up}");
    let cref = "credentialRef: {name: api, key: k}";
    let ok = [
        stripe(&format!("{{provider: stripe, {cref}}}")),
        stripe(&format!(
            "{{provider: stripe, {cref}, interval: 1m, lookback: 30d, apiBaseUrl: \"https://stripe.internal.example\"}}"
        )),
        stripe(&format!(
            "{{provider: stripe, {cref}, apiBaseUrl: \"http://127.0.0.1:12111\"}}"
        )),
        stripe(&format!(
            "{{provider: stripe, {cref}, apiBaseUrl: \"http://localhost:12111/\"}}"
        )),
        stripe(&format!(
            "{{provider: stripe, {cref}, apiBaseUrl: \"http://[::1]:8080\"}}"
        )),
        format!(
            "scheme: {{type: paddle}}\neventId: {{jsonPointer: /event_id}}\ncatchUp: {{provider: paddle, {cref}}}"
        ),
        format!(
            "scheme: {{type: github}}\ncatchUp: {{provider: github, {cref}, github: {{repository: octo/hello, hookId: 7}}}}"
        ),
    ];
    for case in ok {
        assert_eq!(spec_result(&case), Ok(()), "{case}");
    }
    let refused = [
        (
            stripe(&format!("{{provider: paddle, {cref}}}")),
            "spec.catchUp.provider",
        ),
        (
            stripe(&format!("{{provider: stripe, {cref}, interval: 30s}}")),
            "spec.catchUp.interval",
        ),
        (
            stripe(&format!("{{provider: stripe, {cref}, interval: 2d}}")),
            "spec.catchUp.interval",
        ),
        (
            stripe(&format!("{{provider: stripe, {cref}, lookback: 31d}}")),
            "spec.catchUp.lookback",
        ),
        (
            format!(
                "scheme: {{type: stripe}}\nretention: {{dedupe: 24h}}\ncatchUp: {{provider: stripe, {cref}}}"
            ),
            "spec.catchUp.lookback",
        ),
        // The credential never travels in clear beyond the host.
        (
            stripe(&format!(
                "{{provider: stripe, {cref}, apiBaseUrl: \"http://api.stripe.com\"}}"
            )),
            "spec.catchUp.apiBaseUrl",
        ),
        (
            stripe(&format!(
                "{{provider: stripe, {cref}, apiBaseUrl: \"https://u:p@api.stripe.com\"}}"
            )),
            "spec.catchUp.apiBaseUrl",
        ),
        (
            stripe(&format!(
                "{{provider: stripe, {cref}, apiBaseUrl: \"https://api.stripe.com/?key=1\"}}"
            )),
            "spec.catchUp.apiBaseUrl",
        ),
        (
            stripe(&format!(
                "{{provider: stripe, {cref}, github: {{repository: a/b, hookId: 1}}}}"
            )),
            "spec.catchUp.github",
        ),
        (
            format!(
                "scheme: {{type: stripe}}\neventId: {{header: X-Id}}\ncatchUp: {{provider: stripe, {cref}}}"
            ),
            "spec.eventId",
        ),
        (
            format!("scheme: {{type: github}}\ncatchUp: {{provider: github, {cref}}}"),
            "spec.catchUp.github",
        ),
        (
            format!(
                "scheme: {{type: github}}\ncatchUp: {{provider: github, {cref}, github: {{repository: nope, hookId: 7}}}}"
            ),
            "spec.catchUp.github.repository",
        ),
        (
            format!(
                "scheme: {{type: github}}\ncatchUp: {{provider: github, {cref}, github: {{repository: a/b, hookId: 0}}}}"
            ),
            "spec.catchUp.github.hookId",
        ),
        (
            stripe("{provider: stripe, credentialRef: {name: \"\", key: k}}"),
            "spec.catchUp.credentialRef",
        ),
    ];
    for (case, field) in refused {
        let err = spec_result(&case).expect_err(&case);
        assert_eq!(err.field, field, "{case}: {err}");
    }
}
