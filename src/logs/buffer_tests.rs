use super::{Limits, LogBuffer};
use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// An output that keeps each write call apart, and can be held shut.
#[derive(Clone, Default)]
struct Output {
    writes: Arc<Mutex<Vec<Vec<u8>>>>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Output {
    fn shut() -> Self {
        let out = Self::default();
        *out.gate.0.lock().unwrap() = true;
        out
    }

    fn open(&self) {
        *self.gate.0.lock().unwrap() = false;
        self.gate.1.notify_all();
    }

    fn text(&self) -> String {
        String::from_utf8(self.writes.lock().unwrap().concat()).unwrap()
    }

    fn calls(&self) -> usize {
        self.writes.lock().unwrap().len()
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (shut, opened) = &*self.gate;
        let mut held = shut.lock().unwrap();
        while *held {
            held = opened.wait(held).unwrap();
        }
        self.writes.lock().unwrap().push(buf.to_vec());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn line(mut w: &LogBuffer, text: &str) {
    w.write_all(format!("{text}\n").as_bytes()).unwrap();
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn lines_from_many_threads_arrive_whole_in_their_order_and_in_few_writes() {
    let out = Output::default();
    let (buffer, flushed) = LogBuffer::start(out.clone(), Limits::default()).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let buffer = buffer.clone();
            std::thread::spawn(move || {
                for n in 0..5_000 {
                    line(
                        &buffer,
                        &format!("thread {t} line {n:05} {}", "x".repeat(200)),
                    );
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    drop(flushed);
    let text = out.text();
    let mut next = [0; 4];
    for l in text.lines() {
        let words: Vec<&str> = l.split(' ').collect();
        let (t, n): (usize, usize) = (words[1].parse().unwrap(), words[3].parse().unwrap());
        assert_eq!(n, next[t], "thread {t}'s lines in order, none lost: {l}");
        assert_eq!(words[4].len(), 200, "a whole line: {l}");
        next[t] += 1;
    }
    assert_eq!(next, [5_000; 4]);
    // 20,000 lines of ~220 bytes are 4.4 MB: a write of at least `write_at` (64 KiB) each
    // while lines kept coming, about 70, where the channel before wrote them one by one.
    assert!(
        out.calls() < 1_000,
        "{} writes for 20,000 lines",
        out.calls()
    );
}

#[test]
fn a_line_is_written_while_the_role_runs_without_waiting_for_more() {
    let out = Output::default();
    let (buffer, _flushed) = LogBuffer::start(out.clone(), Limits::default()).unwrap();
    line(&buffer, "listening on 127.0.0.1:8080");
    wait_for("the line", || out.text() == "listening on 127.0.0.1:8080\n");
}

#[test]
fn the_lines_still_waiting_are_written_when_the_guard_drops() {
    let out = Output::default();
    let limits = Limits {
        every: Duration::from_secs(3600),
        ..Limits::default()
    };
    let (buffer, flushed) = LogBuffer::start(out.clone(), limits).unwrap();
    for n in 0..3 {
        line(&buffer, &format!("line {n}"));
    }
    assert_eq!(out.calls(), 0, "they wait for more within the hour");
    drop(flushed);
    assert_eq!(out.text(), "line 0\nline 1\nline 2\n");
    assert_eq!(out.calls(), 1);
    line(&buffer, "after the guard");
    assert_eq!(
        out.text(),
        "line 0\nline 1\nline 2\nafter the guard\n",
        "a line logged after the guard dropped is written at once"
    );
}

#[test]
fn a_full_buffer_holds_the_role_back_and_loses_nothing() {
    let out = Output::shut();
    let limits = Limits {
        every: Duration::ZERO,
        write_at: 1,
        hold: 100,
        ..Limits::default()
    };
    let (buffer, flushed) = LogBuffer::start(out.clone(), limits).unwrap();
    let logged = Arc::new(AtomicUsize::new(0));
    let role = std::thread::spawn({
        let (buffer, logged) = (buffer.clone(), logged.clone());
        move || {
            for n in 0..50 {
                line(&buffer, &format!("line {n:04}")); // 10 bytes
                logged.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    // The thread took a first batch and is stuck writing it; behind it at most `hold` bytes
    // (10 lines) are appended, then the role waits.
    wait_for("the buffer to fill", || logged.load(Ordering::SeqCst) >= 10);
    std::thread::sleep(Duration::from_millis(100));
    let while_shut = logged.load(Ordering::SeqCst);
    assert!(while_shut < 50, "the role went on past a full buffer");
    assert!(
        while_shut <= 10 + 10,
        "{while_shut} lines logged while nothing was written"
    );
    out.open();
    role.join().unwrap();
    drop(flushed);
    let expected: String = (0..50).map(|n| format!("line {n:04}\n")).collect();
    assert_eq!(out.text(), expected);
}

#[test]
fn a_stopping_process_is_not_held_by_an_output_nobody_reads() {
    let out = Output::shut();
    let limits = Limits {
        drain_for: Duration::from_millis(200),
        ..Limits::default()
    };
    let (buffer, flushed) = LogBuffer::start(out.clone(), limits).unwrap();
    line(&buffer, "the last line");
    let (stopped, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(flushed);
        stopped.send(()).unwrap();
    });
    dropped
        .recv_timeout(Duration::from_secs(30))
        .expect("dropping the guard returned while the output was stuck");
    // The thread left behind still writes the line once the output takes it.
    out.open();
    wait_for("the line", || out.text() == "the last line\n");
}

#[test]
fn a_line_logged_after_the_guard_gave_up_does_not_wait_for_the_stuck_output() {
    let out = Output::shut();
    let limits = Limits {
        drain_for: Duration::from_millis(200),
        ..Limits::default()
    };
    let (buffer, flushed) = LogBuffer::start(out.clone(), limits).unwrap();
    line(&buffer, "the last line");
    // Gives up after `drain_for`: the thread is still stuck in the write, holding the output.
    drop(flushed);
    let (logged, returned) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        line(&buffer, "logged while the runtime shuts down");
        logged.send(()).unwrap();
    });
    returned
        .recv_timeout(Duration::from_secs(10))
        .expect("a line logged after the give-up returned while the output was stuck");
    // That line is lost, as README "Logs" says; the batch the thread held still arrives.
    out.open();
    wait_for("the batch", || out.text() == "the last line\n");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(out.text(), "the last line\n");
}
