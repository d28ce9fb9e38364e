//! Polling with deadlines: the only way tests wait.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

/// What one poll saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress<T> {
    /// The condition holds; stop polling.
    Done(T),
    /// Not yet; the string says what was seen (reported on timeout).
    NotYet(String),
}

/// How often the helpers poll.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Polls `f` every [`POLL_INTERVAL`] until it returns `Done`, an error, or `timeout` passes; the
/// timeout error names `what` and the last state seen.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Progress<T>>>,
{
    let start = Instant::now();
    let deadline = start + timeout;
    loop {
        match f().await? {
            Progress::Done(t) => return Ok(t),
            Progress::NotYet(state) => {
                if Instant::now() >= deadline {
                    bail!("timed out after {timeout:?} waiting for {what}; last seen: {state}");
                }
            }
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Asserts that `f` keeps returning `Ok(())` on every poll for the whole `window` (an observation
/// window, e.g. "nothing gets bound"). Returns the first violation as an error naming `what`.
pub async fn holds_for<F, Fut>(what: &str, window: Duration, mut f: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<std::result::Result<(), String>>>,
{
    let start = Instant::now();
    loop {
        if let Err(violation) = f().await? {
            bail!(
                "expected {what} to hold for {window:?}, but after {:.1}s: {violation}",
                start.elapsed().as_secs_f64()
            );
        }
        if start.elapsed() >= window {
            return Ok(());
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// When set, [`Timer`] appends `<test>\t<seconds>` to the file it names (`tests/run` and
/// `tests/control-run` print the slowest tests from it).
pub const TIMES_FILE_ENV: &str = "MUSTER_E2E_TIMES";

/// Prints how long a test took when dropped (visible with `--nocapture`, and on failure), and
/// appends it to the file of [`TIMES_FILE_ENV`] when that is set.
pub struct Timer(pub &'static str, pub Instant);

impl Drop for Timer {
    fn drop(&mut self) {
        let secs = self.1.elapsed().as_secs_f64();
        // libtest runs each test on a thread named after it: the full name, whatever shorter
        // label the test gave its timer.
        let thread = std::thread::current();
        let name = thread.name().filter(|n| *n != "main").unwrap_or(self.0);
        eprintln!("e2e {name}: {secs:.1}s");
        if let Some(path) = std::env::var_os(TIMES_FILE_ENV).filter(|p| !p.is_empty()) {
            use std::io::Write;
            // One short write with O_APPEND: lines from tests running in parallel do not mix.
            let line = format!("{name}\t{secs:.1}\n");
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| f.write_all(line.as_bytes()));
            if let Err(e) = written {
                eprintln!("e2e {name}: cannot append to {path:?}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_for_reports_last_state() {
        let mut n = 0;
        let err = wait_for("n to reach 1000", Duration::from_millis(300), || {
            n += 1;
            let k = n;
            async move { Ok(Progress::<()>::NotYet(format!("n={k}"))) }
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("n to reach 1000") && err.contains("n="),
            "{err}"
        );
    }

    #[tokio::test]
    async fn holds_for_stops_at_first_violation() {
        let mut n = 0;
        let err = holds_for("n < 3", Duration::from_secs(10), || {
            n += 1;
            let k = n;
            async move { Ok(if k < 3 { Ok(()) } else { Err(format!("n={k}")) }) }
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("n=3"), "{err}");
    }
}
