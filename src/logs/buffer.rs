//! Log lines gathered in memory and written to stderr by a thread of their own, a batch at a time.
//!
//! Until round 29 (docs/performance.md) lines went through `tracing-appender`'s non-blocking
//! writer, a channel whose thread sleeps whenever nothing is queued. Under load nearly every line
//! then woke it: a futex call on the runtime thread that logged, a context switch to the log
//! thread, and one write(2) per line. Here a line is appended to a shared buffer under a mutex;
//! only the first line into an empty buffer wakes the thread, which gives the others
//! [`Limits::every`] to join it (less once [`Limits::write_at`] bytes wait) and writes them all
//! with one call. Load never drops a line: beyond [`Limits::hold`] bytes waiting, a role that logs
//! waits for the write, as it waited for a full channel before. Only an output nobody reads loses
//! lines: those still waiting [`Limits::drain_for`] after the guard dropped, and any logged after
//! that.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tracing_subscriber::fmt::MakeWriter;

/// How long the first line into an empty buffer waits for others before they are written.
pub const WRITE_EVERY: Duration = Duration::from_millis(10);

/// What a burst may leave allocated for the next batches; more is given back after its write.
const KEEP_CAPACITY: usize = 256 * 1024;

/// When lines are written, and how many may wait.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long lines wait for more.
    pub every: Duration,
    /// Bytes waiting that are written without waiting out `every`.
    pub write_at: usize,
    /// Bytes waiting beyond which a role that logs waits for the write.
    pub hold: usize,
    /// How long a stopping process waits for the lines still waiting to be written: an output
    /// nobody reads must not keep it from exiting.
    pub drain_for: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            every: WRITE_EVERY,
            write_at: 64 * 1024,
            hold: 8 * 1024 * 1024,
            drain_for: Duration::from_secs(5),
        }
    }
}

#[derive(Default)]
struct Waiting {
    lines: Vec<u8>,
    /// The thread sleeps until a line arrives: the next line wakes it.
    idle: bool,
    /// The thread was woken because `write_at` bytes wait.
    hurried: bool,
    /// Writers waiting for room.
    blocked: usize,
    /// The guard was dropped: lines go straight to the output.
    closed: bool,
    /// The thread wrote its last batch and returned.
    finished: bool,
    /// The guard gave up waiting for the thread, stuck in a write: later lines are lost, not
    /// queued behind it (a role stopping would otherwise hang on the output).
    abandoned: bool,
}

struct Shared {
    waiting: Mutex<Waiting>,
    wake: Condvar,
    room: Condvar,
    finished: Condvar,
    out: Mutex<Box<dyn Write + Send>>,
    limits: Limits,
}

/// The writer the log subscriber gets. Cheap to clone.
#[derive(Clone)]
pub struct LogBuffer(Arc<Shared>);

/// Writes what is left and stops the thread when dropped, waiting at most [`Limits::drain_for`];
/// lines logged after that are written by the role that logs them, or dropped if the wait ran out
/// (the output is stuck).
pub struct Flushed {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A poisoned lock means a panic elsewhere while it was held; logging goes on with what it holds.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LogBuffer {
    /// Starts the thread (`hookgate-log`) that writes to `out`.
    pub fn start(out: impl Write + Send + 'static, limits: Limits) -> io::Result<(Self, Flushed)> {
        let shared = Arc::new(Shared {
            waiting: Mutex::default(),
            wake: Condvar::new(),
            room: Condvar::new(),
            finished: Condvar::new(),
            out: Mutex::new(Box::new(out)),
            limits,
        });
        let thread = std::thread::Builder::new()
            .name("hookgate-log".into())
            .spawn({
                let shared = shared.clone();
                move || write_batches(&shared)
            })?;
        let flushed = Flushed {
            shared: shared.clone(),
            thread: Some(thread),
        };
        Ok((Self(shared), flushed))
    }

    fn append(&self, line: &[u8]) -> io::Result<()> {
        let shared = &*self.0;
        let mut w = lock(&shared.waiting);
        while w.lines.len() >= shared.limits.hold && !w.closed {
            w.blocked += 1;
            w = shared.room.wait(w).unwrap_or_else(PoisonError::into_inner);
            w.blocked -= 1;
        }
        if w.abandoned {
            return Ok(());
        }
        if w.closed {
            drop(w);
            return lock(&shared.out).write_all(line);
        }
        w.lines.extend_from_slice(line);
        // A condition variable's notify is a system call even with nobody waiting: only when
        // the thread sleeps on an empty buffer, or waits out `every` with `write_at` reached.
        if w.idle {
            w.idle = false;
            shared.wake.notify_one();
        } else if !w.hurried && w.lines.len() >= shared.limits.write_at {
            w.hurried = true;
            shared.wake.notify_one();
        }
        Ok(())
    }
}

impl Write for &LogBuffer {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        self.append(line)?;
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogBuffer {
    type Writer = &'a LogBuffer;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

fn write_batches(shared: &Shared) {
    let mut batch = Vec::new();
    loop {
        let mut w = lock(&shared.waiting);
        while w.lines.is_empty() && !w.closed {
            w.idle = true;
            w = shared.wake.wait(w).unwrap_or_else(PoisonError::into_inner);
        }
        w.idle = false;
        let until = Instant::now() + shared.limits.every;
        while !w.closed && w.lines.len() < shared.limits.write_at {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            w = shared
                .wake
                .wait_timeout(w, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        std::mem::swap(&mut w.lines, &mut batch);
        w.hurried = false;
        let closed = w.closed;
        if w.blocked > 0 {
            shared.room.notify_all();
        }
        // The output is taken before the buffer is let go, so that a line logged after the
        // guard dropped (written straight to the output) cannot overtake this batch.
        let mut out = lock(&shared.out);
        drop(w);
        // An unwritable stderr loses the lines: there is nowhere else to report that.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        drop(out);
        batch.clear();
        if batch.capacity() > KEEP_CAPACITY {
            batch = Vec::new();
        }
        if closed {
            lock(&shared.waiting).finished = true;
            shared.finished.notify_all();
            return;
        }
    }
}

impl Drop for Flushed {
    fn drop(&mut self) {
        let shared = &*self.shared;
        let mut w = lock(&shared.waiting);
        w.closed = true;
        shared.wake.notify_one();
        shared.room.notify_all();
        let (mut w, waited) = shared
            .finished
            .wait_timeout_while(w, shared.limits.drain_for, |w| !w.finished)
            .unwrap_or_else(PoisonError::into_inner);
        w.abandoned = waited.timed_out();
        drop(w);
        // Joined only once it has returned; a thread still stuck in a write is left behind.
        if let (false, Some(thread)) = (waited.timed_out(), self.thread.take()) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
#[path = "buffer_tests.rs"]
mod tests;
