//! The machine's side of an experiment: work directories, free ports, waiting for a service,
//! plain HTTP probes, timestamps, the loopback subnet a run uses and the report files it leaves.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};

use crate::procs;

/// The virtual host every system serves.
pub const HOST: &str = "app.example.com";

/// The three files every lab command leaves: the results as JSON, and their two renderings.
pub(crate) fn write_report_files(
    out: &Path,
    results: &impl serde::Serialize,
    markdown: String,
    html: String,
) -> anyhow::Result<()> {
    let write = |name: &str, content: String| {
        let path = out.join(name);
        std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))
    };
    write(
        "results.json",
        serde_json::to_string_pretty(results)? + "\n",
    )?;
    write("report.md", markdown)?;
    write("report.html", html)?;
    Ok(())
}

/// A private working directory (configs, logs, sockets), removed at the end.
pub(crate) struct WorkDir(pub(crate) PathBuf);

impl WorkDir {
    pub(crate) fn new() -> anyhow::Result<WorkDir> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!("sluice-lab-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // nginx's workers run as nobody when started as root and must reach their temp dirs.
        set_mode_755(&dir)?;
        procs::remove_on_interrupt(Some(dir.clone()));
        Ok(WorkDir(dir))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::env::var_os("SLUICE_LAB_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub(crate) fn set_mode_755(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", dir.display()))
}

/// A free TCP port on 127.0.0.1 (bound and released; the small race is acceptable here).
pub(crate) fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Polls `check` every 50 ms until it returns true, fails, or `limit` passes.
pub(crate) fn wait_until(
    limit: Duration,
    mut check: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        if check()? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("not ready within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True if `GET path` on `addr` answers 200 within a second.
pub(crate) fn http_get_ok(addr: SocketAddr, path: &str) -> bool {
    let attempt = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head)?;
        Ok(head.starts_with(b"HTTP/1.1 200"))
    };
    attempt().unwrap_or(false)
}

/// True if `GET path` with `Host: host` on `addr` answers 200 within a second.
pub(crate) fn http_get_host_ok(addr: SocketAddr, host: &str, path: &str) -> bool {
    let attempt = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head)?;
        Ok(head.starts_with(b"HTTP/1.1 200"))
    };
    attempt().unwrap_or(false)
}

/// Two octets for this lab's pod subnet (127.A.B.x), from the pid and clock.
pub(crate) fn subnet_seed() -> [u8; 2] {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let mix = nanos ^ std::process::id().wrapping_mul(2_654_435_761);
    [
        u8::try_from(10 + mix % 200).unwrap_or(10),
        u8::try_from((mix >> 8) % 50).unwrap_or(0),
    ]
}

/// (year, month, day, hour, minute, second) in UTC.
fn civil(time: SystemTime) -> (i32, u8, u8, u8, u8, u8) {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let utc = i64::try_from(secs)
        .ok()
        .and_then(|secs| time::OffsetDateTime::from_unix_timestamp(secs).ok())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    (
        utc.year(),
        u8::from(utc.month()),
        utc.day(),
        utc.hour(),
        utc.minute(),
        utc.second(),
    )
}

pub(crate) fn iso_timestamp(time: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(time);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

pub(crate) fn compact_timestamp(time: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(time);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_763_688_000); // 2025-11-21T01:20:00Z
        assert_eq!(iso_timestamp(t), "2025-11-21T01:20:00Z");
        assert_eq!(compact_timestamp(UNIX_EPOCH), "19700101T000000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(iso_timestamp(leap), "2000-02-29T00:00:00Z");
    }
}
