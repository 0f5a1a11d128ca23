//! The processes behind a [`Browser`](crate::Browser): finding (and, for tests, installing)
//! Debian's `chromedriver` and `chromium`, starting chromedriver in a process group of its
//! own, finding a page's Chromium processes by their profile directory, and killing them.
//!
//! Every Chromium process a page starts carries `--user-data-dir=<its profile>` on its
//! command line and stays in chromedriver's process group, except Chromium's crash
//! handler, which leaves the group; it is started with the browser's scratch directory on
//! its command line (as `XDG_CONFIG_HOME`), so it is found by that. It exits by itself
//! when its Chromium ends gracefully, which is why pages end with SIGTERM first.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::error::Failure;

/// Where chromedriver is: `$CHROMEDRIVER`, else `chromedriver` on the `PATH`.
pub fn find_chromedriver() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMEDRIVER") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("chromedriver"))
            .find(|path| path.is_file())
    })
}

/// Where Chromium's binary is: `$CHROMIUM`, else Debian's (the binary itself, not the
/// `/usr/bin/chromium` wrapper script, whose flags would start crash reporting).
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    [
        "/usr/lib/chromium/chromium",
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|path| path.is_file())
}

/// Makes sure chromedriver and Chromium are there: when either is missing and this runs as
/// root on a machine with `apt-get`, installs Debian's `chromium` and `chromium-driver`
/// (never a downloaded browser). Meant for tests and CI, so that `cargo test` needs no
/// set-up; a service should have them installed by its image instead.
pub fn ensure_installed() -> Result<PathBuf, Failure> {
    if let (Some(driver), Some(_)) = (find_chromedriver(), find_chromium()) {
        return Ok(driver);
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if root && Path::new("/usr/bin/apt-get").is_file() {
        tracing::warn!("installing Debian's chromium and chromium-driver with apt-get");
        let status = Command::new("sh")
            .arg("-c")
            .arg("apt-get update -qq && apt-get install -y -qq chromium chromium-driver")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status();
        if !status.as_ref().is_ok_and(|status| status.success()) {
            tracing::warn!(?status, "apt-get could not install chromium");
        }
    }
    match (find_chromedriver(), find_chromium()) {
        (Some(driver), Some(_)) => Ok(driver),
        _ => Err(not_installed()),
    }
}

pub(crate) fn not_installed() -> Failure {
    Failure::NotInstalled(
        "chromedriver or Chromium is not installed: install Debian's `chromium` and \
         `chromium-driver` (apt-get install chromium chromium-driver), or set CHROMEDRIVER \
         and CHROMIUM"
            .into(),
    )
}

/// A running chromedriver, leader of its own process group; everything it starts is
/// killed with it.
#[derive(Debug)]
pub(crate) struct Driver {
    child: Child,
    pub(crate) port: u16,
}

impl Driver {
    /// Starts chromedriver on a free loopback port, in a new process group, with `tmp`
    /// as its temporary directory.
    pub(crate) fn spawn(path: &Path, tmp: &Path) -> Result<Driver, Failure> {
        use std::os::unix::process::CommandExt as _;
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0")
                .map_err(|e| Failure::Launch(format!("no free port: {e}")))?;
            probe
                .local_addr()
                .map_err(|e| Failure::Launch(e.to_string()))?
                .port()
        };
        let child = Command::new(path)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .env("TMPDIR", tmp)
            .env("XDG_CONFIG_HOME", tmp.join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| Failure::Launch(format!("cannot start {}: {e}", path.display())))?;
        Ok(Driver { child, port })
    }

    /// The process group (chromedriver's pid).
    pub(crate) fn group(&self) -> u32 {
        self.child.id()
    }

    /// Whether chromedriver still runs (reaps it if not).
    pub(crate) fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        kill_group(self.group());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills a process group with SIGKILL.
pub(crate) fn kill_group(group: u32) {
    let _ = Command::new("kill")
        .arg("-KILL")
        .arg("--")
        .arg(format!("-{group}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Kills processes with SIGKILL.
pub(crate) fn kill(pids: &[u32]) {
    signal("-KILL", pids);
}

/// Asks processes to end (SIGTERM): Chromium shuts down, and its crash handler with it.
pub(crate) fn terminate(pids: &[u32]) {
    signal("-TERM", pids);
}

fn signal(signal: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg(signal)
        .args(pids.iter().map(u32::to_string))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A live (not zombie) process, as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its pid.
    pub pid: u32,
    /// Its process group.
    pub group: u32,
    /// Its command line, arguments joined by spaces.
    pub command: String,
    /// Its resident memory in KiB.
    pub rss_kib: u64,
    /// Its proportional share of memory in KiB (shared pages divided among their users),
    /// where the kernel reports it.
    pub pss_kib: Option<u64>,
}

/// Every live process on the machine (Linux `/proc`), without zombies.
pub fn processes() -> Vec<ProcessInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(process)
        .collect()
}

fn process(pid: u32) -> Option<ProcessInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`: comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    let _ppid = fields.next()?;
    let group = fields.next()?.parse().ok()?;
    let command = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let command = String::from_utf8_lossy(&command)
        .split('\0')
        .filter(|arg| !arg.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kib = kib(&status, "VmRSS:").unwrap_or(0);
    let pss_kib = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|rollup| kib(&rollup, "Pss:"));
    Some(ProcessInfo {
        pid,
        group,
        command,
        rss_kib,
        pss_kib,
    })
}

fn kib(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|value| value.parse().ok())
}

/// The live processes of a page: those started with its profile directory.
pub fn processes_of(profile: &Path) -> Vec<ProcessInfo> {
    let marker = format!("--user-data-dir={}", profile.display());
    processes()
        .into_iter()
        .filter(|p| p.command.split(' ').any(|arg| arg == marker))
        .collect()
}

/// The live processes whose command line mentions `path` (a browser's scratch directory:
/// its pages' processes and their crash handlers).
pub fn processes_mentioning(path: &Path) -> Vec<ProcessInfo> {
    let marker = path.display().to_string();
    processes()
        .into_iter()
        .filter(|p| p.command.contains(&marker))
        .collect()
}

/// Ends a page's Chromium: SIGTERM to its browser process (so it shuts down with its
/// crash handler), then, after at most `grace`, SIGKILL to whatever is left.
pub(crate) fn end_chromium(profile: &Path, grace: std::time::Duration) {
    let marker = format!("--user-data-dir={}", profile.display());
    let ours = || processes_of(profile);
    let main: Vec<u32> = ours()
        .iter()
        .filter(|p| !p.command.contains(" --type="))
        .map(|p| p.pid)
        .collect();
    terminate(&main);
    let started = std::time::Instant::now();
    while !ours().is_empty() && started.elapsed() < grace {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left: Vec<u32> = ours().iter().map(|p| p.pid).collect();
    if !left.is_empty() {
        tracing::warn!(%marker, left = left.len(), "Chromium did not end in time; killed");
        kill(&left);
    }
}

/// The live processes of a process group.
pub fn processes_in_group(group: u32) -> Vec<ProcessInfo> {
    processes()
        .into_iter()
        .filter(|p| p.group == group)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_found_with_its_memory() {
        let me = std::process::id();
        let found = processes().into_iter().find(|p| p.pid == me).unwrap();
        assert!(found.rss_kib > 0);
        assert!(
            found.command.contains("workflow_browser"),
            "{}",
            found.command
        );
        assert!(processes_in_group(found.group).iter().any(|p| p.pid == me));
    }

    #[test]
    fn a_killed_group_is_gone() {
        use std::os::unix::process::CommandExt as _;
        let mut child = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let group = child.id();
        assert_eq!(processes_in_group(group).len(), 1);
        kill_group(group);
        let _ = child.wait();
        assert!(processes_in_group(group).is_empty());
    }
}
