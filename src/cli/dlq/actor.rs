//! Who `hookgate dlq` says changed dead letters: the OS account it runs as. `kubectl hookgate
//! dlq` passes the Kubernetes user instead (`crate::plugin`). There is deliberately no `--actor`
//! flag: a name anyone may type is no record of who acted.

use crate::inbox::{Actor, ActorSource};

/// The account of this process: its uid's name from the user database (NSS), else `$USER` or
/// `$LOGNAME` (a container running as a uid with no passwd entry), else `uid <n>`.
pub fn os_user() -> Actor {
    let name = whoami::username()
        .ok()
        .or_else(|| from_env(std::env::var("USER").ok(), std::env::var("LOGNAME").ok()))
        .unwrap_or_else(uid_name);
    Actor {
        name,
        source: ActorSource::OsUser,
    }
}

/// The first non-empty of `$USER`, `$LOGNAME`.
fn from_env(user: Option<String>, logname: Option<String>) -> Option<String> {
    [user, logname]
        .into_iter()
        .flatten()
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
}

/// `uid 1000`, read without libc: `/proc/self` belongs to the process's effective uid.
fn uid_name() -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata("/proc/self") {
            return format!("uid {}", m.uid());
        }
    }
    "unknown".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_a_fallback_in_order_and_blank_is_nothing() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(from_env(s("alice"), s("bob")), s("alice"));
        assert_eq!(from_env(None, s("bob")), s("bob"));
        assert_eq!(from_env(s("  "), s("bob")), s("bob"));
        assert_eq!(from_env(s(""), None), None);
        assert_eq!(from_env(None, None), None);
    }

    #[test]
    fn this_process_has_a_name() {
        let a = os_user();
        assert_eq!(a.source, ActorSource::OsUser);
        assert!(!a.name.is_empty());
    }
}
