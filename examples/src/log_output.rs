//! Where the reference server's log lines go: standard output, written by a thread of its own.
//!
//! At the default level every request logs its access line. Written straight to standard
//! output, each line would cost its request a `write` system call (and the stdout lock) on a
//! runtime worker thread. Here a logging thread only appends the formatted line to a shared,
//! bounded buffer; one writer thread takes the whole buffer at once and writes it with a single
//! call, so under load many lines share one system call and none happens on a worker thread.
//!
//! After each write the writer rests for [`LINGER`] before it takes the buffer again, and a
//! logging thread wakes it only when it waits for lines: under load, lines gather for a few
//! milliseconds and the server pays one wake-up and one `write` per batch instead of per line
//! (a wake-up per line cost each request more system time than the rest of its logging).
//!
//! The buffer holds at most [`BUFFER_BYTES`] (a few thousand lines). When it is full, because
//! standard output does not keep up, the logging thread waits for the writer to take the buffer
//! rather than dropping the line: these lines include the security events (failed logins,
//! revoked sessions, ...) that the core logs as its default event sink, which an operator may
//! rely on like an audit trail, and a full buffer means standard output is already the
//! bottleneck, where a direct write would block as well. Memory stays bounded either way.
//! [`Flush`] writes out what is left when the server stops.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Bytes the buffer holds before a logging thread waits for the writer (one line longer than
/// this still goes in, alone).
const BUFFER_BYTES: usize = 256 * 1024;

/// How long the writer rests after a write before taking the next batch: the most a line
/// waits behind a busy writer, and what bounds wake-ups and writes to a few hundred a second.
const LINGER: Duration = Duration::from_millis(5);

/// A `tracing_subscriber` writer appending each line to the shared buffer.
#[derive(Clone)]
pub(crate) struct LogOutput {
    shared: Arc<Shared>,
}

/// Stops the writer thread once every line buffered so far is written; dropping it does so.
pub(crate) struct Flush {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a line arrives in an empty buffer, and when the server stops.
    arrived: Condvar,
    /// Signalled when the writer took the buffer while a logging thread waited for room.
    room: Condvar,
}

#[derive(Default)]
struct State {
    buffer: Vec<u8>,
    /// Logging threads waiting for room: only then is `room` signalled.
    waiting: usize,
    /// Whether the writer waits for lines: only then is `arrived` signalled (signalling a
    /// condition variable nobody waits on still costs a system call).
    writer_waiting: bool,
    /// Set by [`Flush`]: lines are written directly from now on.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a buffer of whole lines: still fine to write.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts the writer thread over standard output. If the thread cannot be started, lines are
/// written directly.
pub(crate) fn stdout() -> (LogOutput, Flush) {
    start(io::stdout())
}

fn start(mut out: impl Write + Send + 'static) -> (LogOutput, Flush) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        arrived: Condvar::new(),
        room: Condvar::new(),
    });
    let writer = shared.clone();
    let thread = std::thread::Builder::new()
        .name("log-writer".to_owned())
        .spawn(move || write_until_closed(&writer, &mut out));
    let thread = match thread {
        Ok(thread) => Some(thread),
        Err(_) => {
            shared.lock().closed = true;
            None
        }
    };
    (
        LogOutput {
            shared: shared.clone(),
        },
        Flush { shared, thread },
    )
}

/// The writer thread: takes the whole buffer whenever it holds lines, writes it in one call.
fn write_until_closed(shared: &Shared, out: &mut impl Write) {
    let mut batch = Vec::new();
    loop {
        let closed = {
            let mut state = shared.lock();
            while state.buffer.is_empty() && !state.closed {
                state.writer_waiting = true;
                state = shared
                    .arrived
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                state.writer_waiting = false;
            }
            std::mem::swap(&mut state.buffer, &mut batch);
            if state.waiting > 0 {
                shared.room.notify_all();
            }
            state.closed
        };
        if !batch.is_empty() {
            // Nowhere to report a failing standard output; the lines are lost as they would be.
            let _ = out.write_all(&batch).and_then(|()| out.flush());
            batch.clear();
        }
        if closed {
            return;
        }
        // Unsignalled meanwhile: the lines of the next few milliseconds make one batch.
        std::thread::sleep(LINGER);
    }
}

impl Drop for Flush {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.arrived.notify_all();
        self.shared.room.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One line, handed over by [`LogOutput`].
pub(crate) struct Line<'a> {
    shared: &'a Shared,
}

impl Write for Line<'_> {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        let mut state = self.shared.lock();
        while !state.closed
            && !state.buffer.is_empty()
            && state.buffer.len() + line.len() > BUFFER_BYTES
        {
            state.waiting += 1;
            state = self
                .shared
                .room
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.waiting -= 1;
        }
        if state.closed {
            drop(state);
            return io::stdout().lock().write(line);
        }
        state.buffer.extend_from_slice(line);
        let wake_writer = std::mem::take(&mut state.writer_waiting);
        drop(state);
        // Once per batch: while the writer writes or rests, later lines join the buffer
        // silently.
        if wake_writer {
            self.shared.arrived.notify_one();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogOutput {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line {
            shared: &self.shared,
        }
    }
}

#[cfg(test)]
mod tests {
    use aggregation_core::testing::CapturedLog;

    use super::*;

    #[test]
    fn every_line_is_written_in_order_past_the_bound_and_after_the_flush() {
        use tracing_subscriber::fmt::MakeWriter as _;
        let out = CapturedLog::default();
        let (output, flush) = start(out.clone());
        let lines = 4 * BUFFER_BYTES / 16;
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let output = output.clone();
                std::thread::spawn(move || {
                    for n in 0..lines / 4 {
                        let line = format!("{thread} {n:>12}\n");
                        output
                            .make_writer()
                            .write_all(line.as_bytes())
                            .expect("written");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("no panic");
        }
        drop(flush);
        let written = String::from_utf8(out.take()).expect("utf-8");
        let mut next = [0_usize; 4];
        for line in written.lines() {
            let (thread, n) = line.split_once(' ').expect("a whole line");
            let thread: usize = thread.parse().expect("thread");
            assert_eq!(
                n.trim().parse::<usize>().expect("n"),
                next[thread],
                "in order"
            );
            next[thread] += 1;
        }
        assert_eq!(next, [lines / 4; 4], "none lost");
    }
}
