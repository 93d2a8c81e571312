//! How many database connections the inbox's pool holds against its cap, read from the pool
//! itself at the instant asked: the metrics read it at every scrape.

use super::Inbox;

/// One reading of the pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolLoad {
    /// Connections open, in use or idle.
    pub open: u32,
    /// Of those, the ones no call holds.
    pub idle: u32,
    /// The pool's cap (`--db-max-connections`; SQLite's 4): at it, a call waits for a
    /// connection up to `--db-acquire-timeout`.
    pub max: u32,
}

impl PoolLoad {
    /// Connections a call holds now.
    pub fn in_use(&self) -> u32 {
        self.open.saturating_sub(self.idle)
    }
}

impl Inbox {
    /// The pool's connections now; cheap, never waits.
    pub fn pool_load(&self) -> PoolLoad {
        backend!(self, pool => PoolLoad {
            open: pool.size(),
            idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
            max: pool.options().get_max_connections(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::PoolLoad;

    #[test]
    fn in_use_is_the_open_connections_not_idle() {
        let l = PoolLoad {
            open: 5,
            idle: 2,
            max: 16,
        };
        assert_eq!(l.in_use(), 3);
        // The pool's two counts are read one after the other: a connection released between
        // them must not make the figure wrap.
        let racing = PoolLoad {
            open: 2,
            idle: 3,
            max: 16,
        };
        assert_eq!(racing.in_use(), 0);
    }
}
