//! Child processes with their output in a log file, free ports, and a tiny HTTP/1.1 client.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A child process whose stdout and stderr go to `log_path`. Dropping it sends SIGKILL and reaps
/// it, unless it was [`detach`](ManagedProcess::detach)ed (whatever its [`Lifetime`]).
#[derive(Debug)]
pub struct ManagedProcess {
    name: String,
    log_path: PathBuf,
    child: Option<Child>,
    pid: u32,
    detached: bool,
}

/// How a process is tied to the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Dies with the spawning thread (PR_SET_PDEATHSIG) and is killed on drop.
    Attached,
    /// Own process group, survives the harness once detached (for `muster-local up`).
    Detached,
}

impl ManagedProcess {
    /// Spawns `cmd`, appending its stdout and stderr to `log_path`.
    pub fn spawn(
        name: &str,
        mut cmd: Command,
        log_path: &Path,
        lifetime: Lifetime,
    ) -> Result<Self> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .with_context(|| format!("opening log {}", log_path.display()))?;
        let log2 = log.try_clone()?;
        cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
        // Own process group: a Ctrl-C at the terminal goes to the harness, which then cleans up.
        cmd.process_group(0);
        if lifetime == Lifetime::Attached {
            // SAFETY: prctl is async-signal-safe; this runs in the child between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name} ({program})"))?;
        Ok(Self {
            name: name.to_string(),
            log_path: log_path.to_path_buf(),
            pid: child.id(),
            child: Some(child),
            detached: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// `Err` with the exit status and the log tail when the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            bail!("{} was already stopped", self.name);
        };
        match child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(anyhow!(
                "{} exited early ({status}); last lines of {}:\n{}",
                self.name,
                self.log_path.display(),
                tail(&self.log_path, 40)
            )),
        }
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log_path, n)
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL.
    pub fn terminate(&mut self, grace: Duration) {
        if let Some(mut child) = self.child.take() {
            signal(self.pid, libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Leaves the process running when this handle is dropped.
    pub fn detach(mut self) -> u32 {
        self.detached = true;
        self.child.take();
        self.pid
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        if !self.detached {
            self.kill();
        }
    }
}

/// Sends `sig` to `pid`; false if the process does not exist.
pub fn signal(pid: u32, sig: i32) -> bool {
    // SAFETY: kill(2) with a concrete pid.
    unsafe { libc::kill(pid as libc::pid_t, sig) == 0 }
}

/// SIGSTOP to `pid` (`what` names it in errors): the process keeps its connections and state
/// but does nothing until the returned guard thaws it (or is dropped).
pub fn freeze(pid: u32, what: &'static str) -> Result<Frozen> {
    if !signal(pid, libc::SIGSTOP) {
        bail!("SIGSTOP to {what} ({pid}) failed");
    }
    Ok(Frozen {
        pid: Some(pid),
        what,
    })
}

/// A process stopped by [`freeze`]: SIGCONT on [`thaw`](Frozen::thaw) or drop.
#[derive(Debug)]
pub struct Frozen {
    pid: Option<u32>,
    what: &'static str,
}

impl Frozen {
    pub fn thaw(mut self) -> Result<()> {
        if let Some(pid) = self.pid.take() {
            if !signal(pid, libc::SIGCONT) {
                bail!("SIGCONT to {} ({pid}) failed", self.what);
            }
        }
        Ok(())
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            signal(pid, libc::SIGCONT);
        }
    }
}

/// True if a process with this pid exists (and is not a zombie we could see).
pub fn pid_alive(pid: u32) -> bool {
    if !signal(pid, 0) {
        return false;
    }
    // A zombie still answers kill(0); check /proc state.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The last `n` lines of a file (empty string if unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    let _ = f.seek(SeekFrom::Start(start));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// The ports [`free_port`] picks from: 20000..32000, below the kernel's ephemeral range.
const PORTS: std::ops::Range<u16> = 20000..32000;

/// With these set (by `tests/e2e-run`, which runs one test process per slot at a time), the
/// process picks its ports from slot `MUSTER_E2E_PORT_SLOT` of `MUSTER_E2E_PORT_SLOTS` equal parts
/// of [`PORTS`]: test processes running side by side never pick the same port, even between one's
/// pick and its server's bind.
pub const PORT_SLOT_ENV: &str = "MUSTER_E2E_PORT_SLOT";
pub const PORT_SLOTS_ENV: &str = "MUSTER_E2E_PORT_SLOTS";

/// The part of [`PORTS`] this process picks from (all of it unless the slot variables are set).
fn port_range() -> std::ops::Range<u16> {
    let var = |name| std::env::var(name).ok().and_then(|v| v.parse::<u16>().ok());
    match (var(PORT_SLOT_ENV), var(PORT_SLOTS_ENV)) {
        (Some(slot), Some(slots)) if slot < slots => slot_range(slot, slots),
        _ => PORTS,
    }
}

fn slot_range(slot: u16, slots: u16) -> std::ops::Range<u16> {
    let width = (PORTS.end - PORTS.start) / slots;
    let start = PORTS.start + slot * width;
    start..start + width
}

/// A free TCP port on 127.0.0.1, below the kernel's ephemeral range (so an outgoing connection
/// cannot grab it between now and the moment the server binds it), never handed out twice by
/// this process, and from this process's own slot of ports when `tests/e2e-run` gave it one.
pub fn free_port() -> Result<u16> {
    let mut guard = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let used = guard.get_or_insert_with(HashSet::new);
    let range = port_range();
    let width = u64::from(range.end - range.start);
    let mut state = seed();
    for _ in 0..2000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let port = range.start + (state % width) as u16;
        if used.contains(&port) {
            continue;
        }
        if TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok() {
            used.insert(port);
            return Ok(port);
        }
    }
    bail!("no free port found in {range:?} on 127.0.0.1")
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    (nanos ^ ((std::process::id() as u64) << 32)) | 1
}

/// A random lowercase alphanumeric string (names of temp dirs and tokens).
pub fn random_string(len: usize) -> String {
    let mut state = seed() ^ (random_counter() << 17);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b"abcdefghijklmnopqrstuvwxyz0123456789"[(state % 36) as usize] as char
        })
        .collect()
}

fn random_counter() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static C: AtomicU64 = AtomicU64::new(1);
    C.fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Plain-HTTP GET against 127.0.0.1:`port` (`Connection: close`). Returns status and body.
pub async fn http_get(port: u16, path: &str, timeout: Duration) -> Result<(u16, String)> {
    tokio::time::timeout(timeout, async {
        let mut s = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        parse_http_response(&buf, port, path)
    })
    .await
    .map_err(|_| anyhow!("GET 127.0.0.1:{port}{path} timed out after {timeout:?}"))?
}

/// Status and body of a whole HTTP/1.1 response (`Connection: close`; chunked or not).
pub(crate) fn parse_http_response(buf: &[u8], port: u16, path: &str) -> Result<(u16, String)> {
    let text = String::from_utf8_lossy(buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| anyhow!("bad HTTP response from 127.0.0.1:{port}{path}: {head:?}"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((status, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_slots_are_disjoint_and_inside_the_range() {
        for slots in [1u16, 2, 3, 7, 16] {
            let ranges: Vec<_> = (0..slots).map(|s| slot_range(s, slots)).collect();
            for (i, r) in ranges.iter().enumerate() {
                assert!(
                    r.start >= PORTS.start && r.end <= PORTS.end && !r.is_empty(),
                    "{r:?}"
                );
                if let Some(next) = ranges.get(i + 1) {
                    assert!(r.end <= next.start, "{r:?} overlaps {next:?}");
                }
            }
        }
    }
}
