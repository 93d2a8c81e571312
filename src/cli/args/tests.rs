use super::*;
use crate::destination::{self, Scope};
use std::time::Duration;

/// Parses `argv` and returns the arguments of subcommand `$variant` (any other is a test bug).
macro_rules! parse_as {
    ($variant:ident, $argv:expr) => {
        match Cli::try_parse_from($argv)?.command {
            Command::$variant(a) => Ok(a),
            other => panic!("not a {} command: {other:?}", stringify!($variant)),
        }
    };
}

fn worker_args(args: &[&str]) -> Result<WorkerModeArgs, clap::Error> {
    let argv = ["hookgate", "worker"].iter().chain(args);
    parse_as!(Worker, argv)
}

#[test]
fn destination_flags_reach_the_worker_policy() {
    let a = worker_args(&[
        "--namespace",
        "hookgate-system",
        "--destinations",
        "namespace",
        "--allow-destination-host",
        "*.Partner.example",
        "--allow-destination-host",
        "api.vendor.example.",
        "--cluster-domain",
        "corp.internal",
    ])
    .unwrap();
    let cluster = a
        .worker
        .cluster_config(true, Default::default())
        .unwrap()
        .destinations;
    assert_eq!(cluster.scope, Scope::Namespace);
    assert_eq!(
        cluster.allowed_hosts,
        ["*.partner.example", "api.vendor.example"]
    );
    assert_eq!(cluster.cluster_domain, "corp.internal");
    assert!(
        !cluster.allow_loopback,
        "a pod's loopback is not a destination"
    );
    assert!(
        a.worker
            .config(Default::default())
            .unwrap()
            .destinations
            .allow_loopback
    );
}

#[test]
fn a_bare_worker_command_line_is_the_default_worker_config() {
    let a = worker_args(&["-f", "x.yaml"]).unwrap();
    let mut cfg = a.worker.config(Default::default()).unwrap();
    // Taken from KUBERNETES_SERVICE_HOST when the tests run in a pod, not from a flag.
    cfg.destinations.api_server.clear();
    assert_eq!(cfg, crate::worker::WorkerConfig::default());
}

#[test]
fn destinations_default_to_open_and_refuse_a_bad_host() {
    let a = worker_args(&["-f", "x.yaml"]).unwrap();
    let policy = a.worker.config(Default::default()).unwrap().destinations;
    assert_eq!(policy.scope, Scope::Open);
    assert_eq!(policy.cluster_domain, destination::DEFAULT_CLUSTER_DOMAIN);
    assert!(policy.allowed_hosts.is_empty());
    let e = worker_args(&[
        "-f",
        "x.yaml",
        "--allow-destination-host",
        "https://x.example",
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("is not a host name"), "{e}");
}

fn send_args(args: &[&str]) -> Result<SendRequestArgs, clap::Error> {
    let argv = ["hookgate", "send", "-f", "x.yaml", "--integration", "a/b"]
        .iter()
        .chain(args);
    match Cli::try_parse_from(argv)?.command {
        Command::Send(a) => Ok(a.request),
        other => panic!("not a send command: {other:?}"),
    }
}

#[test]
fn send_takes_a_body_or_a_handshake_and_the_variant_only_after_equals() {
    assert_eq!(send_args(&["--handshake"]).unwrap().handshake, Some(None));
    assert_eq!(
        send_args(&["--handshake=events"]).unwrap().handshake,
        Some(Some(HandshakeVariant::Events))
    );
    assert_eq!(send_args(&["--body", "{}"]).unwrap().handshake, None);
    // Without `=`, a following word is not the variant (kubectl hookgate send --handshake NAME).
    let e = send_args(&["--handshake", "events"]).unwrap_err();
    assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{e}");
    for args in [
        &["--handshake", "--body", "{}"][..],
        &["--handshake", "--body-file", "b.json"],
        &[],
    ] {
        assert!(send_args(args).is_err(), "{args:?}");
    }
    let e = send_args(&["--handshake=pong"]).unwrap_err().to_string();
    assert!(e.contains("interactions") && e.contains("events"), "{e}");
}

/// The listener flags of `receiver` and `standalone`.
fn listener_args(argv: &[&str]) -> Result<ListenerArgs, clap::Error> {
    match Cli::try_parse_from(argv)?.command {
        Command::Standalone(a) => Ok(a.listener),
        Command::Receiver(a) => Ok(a.listener),
        other => panic!("no listener flags: {other:?}"),
    }
}

#[test]
fn trusted_proxies_default_to_none_and_reach_both_receiving_roles() {
    let standalone = ["hookgate", "standalone", "-f", "x.yaml"];
    let receiver = [
        "hookgate",
        "receiver",
        "--namespace",
        "n",
        "--database-url",
        "sqlite://x",
    ];
    assert_eq!(
        listener_args(&standalone).unwrap().trusted_proxies,
        crate::receiver::client::TRUSTED_PROXIES
    );
    assert_eq!(crate::receiver::client::TRUSTED_PROXIES, 0);
    for base in [&standalone[..], &receiver[..]] {
        let argv = [base, &["--trusted-proxies", "2"]].concat();
        assert_eq!(listener_args(&argv).unwrap().trusted_proxies, 2, "{argv:?}");
        for bad in ["-1", "256", "one"] {
            let argv = [base, &["--trusted-proxies", bad]].concat();
            assert!(listener_args(&argv).is_err(), "{argv:?}");
        }
    }
}

fn standalone_args(args: &[&str]) -> Result<StandaloneArgs, clap::Error> {
    let argv = ["hookgate", "standalone", "-f", "x.yaml"]
        .iter()
        .chain(args);
    parse_as!(Standalone, argv)
}

#[test]
fn the_hand_over_flags_reach_the_workers_and_refuse_what_no_channel_can_hold() {
    let db = Default::default();
    let bare = standalone_args(&[]).unwrap().worker_config(db).unwrap();
    let bare = bare.expect("workers by default");
    assert_eq!(bare.handoff_events, crate::worker::defaults::HANDOFF_EVENTS);
    assert_eq!(bare.handoff_bytes, crate::worker::defaults::HANDOFF_BYTES);

    let set = standalone_args(&["--handoff-events", "0", "--handoff-bytes", "4096"]).unwrap();
    let cfg = set.worker_config(db).unwrap().unwrap();
    assert_eq!((cfg.handoff_events, cfg.handoff_bytes), (0, 4096));
    assert_eq!(cfg.handoff_room().events, 0, "0 hands nothing over");

    let huge = standalone_args(&["--handoff-events", "1000001"]).unwrap();
    let err = huge.worker_config(db).unwrap_err().to_string();
    assert!(err.contains("--handoff-events"), "{err}");
    assert!(
        standalone_args(&["--handoff-events", "-1"]).is_err(),
        "not a count"
    );
    let none = standalone_args(&["--no-workers"]).unwrap();
    assert!(none.worker_config(db).unwrap().is_none());
}

#[test]
fn the_hand_over_holds_the_slots_always_and_waits_at_most_an_eighth_of_the_lease() {
    let cfg = crate::worker::WorkerConfig {
        concurrency: 32,
        lease: Duration::from_secs(4),
        ..Default::default()
    };
    let room = cfg.handoff_room();
    assert_eq!((room.slots, room.events), (32, 4096));
    assert_eq!(room.max_wait, Duration::from_millis(500));
    let small = crate::worker::WorkerConfig {
        handoff_events: 8,
        ..cfg
    };
    assert_eq!(small.handoff_room().slots, 8, "never more than the events");
}

fn receiver_args(args: &[&str]) -> Result<ReceiverArgs, clap::Error> {
    let base = ["hookgate", "receiver", "--namespace", "n", "--database-url"];
    let argv = base.iter().chain(&["postgres://x"]).chain(args);
    parse_as!(Receiver, argv)
}

#[test]
fn a_receiver_delivers_only_with_workers_and_then_as_a_cluster_worker_with_a_hand_over() {
    let db = Default::default();
    let bare = receiver_args(&["--concurrency", "8"]).unwrap();
    assert!(bare.worker_config(true, db).unwrap().is_none());

    let with = receiver_args(&[
        "--with-workers",
        "--concurrency",
        "8",
        "--handoff-events",
        "64",
    ])
    .unwrap();
    let in_pod = with.worker_config(true, db).unwrap().expect("workers");
    assert_eq!((in_pod.concurrency, in_pod.handoff_events), (8, 64));
    assert_eq!(in_pod.handoff_bytes, crate::worker::defaults::HANDOFF_BYTES);
    assert!(
        !in_pod.destinations.allow_loopback,
        "a pod refuses loopback"
    );
    let on_host = with.worker_config(false, db).unwrap().unwrap();
    assert!(on_host.destinations.allow_loopback);

    for (bad, flag) in [
        (
            &["--with-workers", "--handoff-events", "1000001"][..],
            "--handoff-events",
        ),
        (&["--with-workers", "--concurrency", "0"], "--concurrency"),
    ] {
        let err = receiver_args(bad)
            .unwrap()
            .worker_config(true, db)
            .unwrap_err()
            .to_string();
        assert!(err.contains(flag), "{bad:?}: {err}");
    }
}

#[test]
fn the_pool_cap_reaches_the_limits_and_refuses_what_a_worker_cannot_run_on() {
    let db = |args: &[&str]| standalone_args(args).unwrap().db.limits();
    assert_eq!(db(&[]).unwrap().max_connections, 16);
    assert_eq!(
        db(&["--db-max-connections", "4"]).unwrap().max_connections,
        4
    );
    assert_eq!(
        db(&["--db-max-connections", "1000"])
            .unwrap()
            .max_connections,
        1000
    );
    for bad in ["3", "0", "1001"] {
        let err = db(&["--db-max-connections", bad]).unwrap_err().to_string();
        assert!(
            err.contains("--db-max-connections must be from 4 to 1000, not"),
            "{bad}: {err}"
        );
    }
    assert!(standalone_args(&["--db-max-connections", "-1"]).is_err());
    let w = worker_args(&["-f", "x.yaml", "--db-max-connections", "6"]).unwrap();
    assert_eq!(w.db.limits().unwrap().max_connections, 6);
}

fn controller_args(args: &[&str]) -> Result<ControllerArgs, clap::Error> {
    let argv = ["hookgate", "controller", "--namespace", "n"]
        .iter()
        .chain(args);
    parse_as!(Controller, argv)
}

#[test]
fn the_controller_takes_the_same_database_limits_as_the_other_roles() {
    let limits = |args: &[&str]| controller_args(args).unwrap().db.limits();
    let default = limits(&[]).unwrap();
    assert_eq!(default.max_connections, 16);
    assert_eq!(default.acquire_timeout, Duration::from_secs(3));
    let set = limits(&[
        "--db-max-connections",
        "4",
        "--db-acquire-timeout",
        "1s",
        "--db-statement-timeout",
        "250ms",
    ])
    .unwrap();
    assert_eq!(set.max_connections, 4);
    assert_eq!(set.acquire_timeout, Duration::from_secs(1));
    assert_eq!(set.statement_timeout, Duration::from_millis(250));
    let err = limits(&["--db-max-connections", "2"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--db-max-connections must be from 4 to 1000, not 2"),
        "{err}"
    );
}
