//! Worker processes of the multi-process tests (`chaos`, `schedules_pg`, `flow_stress_pg`,
//! `flow_stress_sqlite`): start a few, kill one with SIGKILL and start another in its
//! place, freeze one with SIGSTOP (past its lease) and let it go on with SIGCONT, collect
//! their stdout lines, and stop them all when the test ends, even when it fails. Each kill,
//! freeze and thaw is logged with the wall-clock time and the process id, so an observer
//! can tell until when a process could have been doing anything.
//!
//! The worker's side: [`parent_pid`] and [`serve_until_orphaned`], so a worker whose test
//! went away stops by itself.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A xorshift generator: the tests print its seed, so a failing schedule of kills can be
/// read back.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded from the clock.
    pub fn from_clock() -> Rng {
        Rng(now_us() | 1)
    }

    /// The seed it started from (printed by the tests).
    pub fn seed(&self) -> u64 {
        self.0
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The number in environment variable `name`, or `default` when it is unset or not a
/// number.
pub fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Microseconds since the Unix epoch on this machine's wall clock (the clock every
/// process of a test shares).
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    now_us() / 1000
}

/// What the test did to a worker process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strike {
    /// SIGKILL: the process did nothing after `at`.
    Killed,
    /// SIGSTOP.
    Frozen,
    /// SIGCONT after a freeze.
    Thawed,
}

/// One [`Strike`], when (microseconds since the epoch, taken after the signal was
/// delivered for a kill, before it was sent for a thaw) and to which process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incident {
    /// What was done.
    pub what: Strike,
    /// The process id.
    pub pid: u32,
    /// When, in microseconds since the Unix epoch.
    pub at_us: u64,
}

/// Builds the arguments of the `n`th process started (from 1).
type Args = Box<dyn FnMut(usize) -> Vec<String>>;

/// A set of worker processes of one program.
pub struct Workers {
    program: PathBuf,
    args: Args,
    capture: bool,
    children: Vec<Child>,
    lines: Arc<Mutex<Vec<String>>>,
    incidents: Vec<Incident>,
    started: usize,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("program", &self.program)
            .field("pids", &self.pids())
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

impl Workers {
    /// Starts `count` processes of `program` (a test gets it from
    /// `env!("CARGO_BIN_EXE_name")`), the `n`th (from 1, counting replacements) with the
    /// arguments `args(n)`. With `capture`, their stdout lines are kept ([`Workers::lines`]);
    /// otherwise stdout is discarded. Stderr is kept to report a worker that stopped on its
    /// own.
    pub fn start(
        program: impl Into<PathBuf>,
        count: usize,
        capture: bool,
        args: impl FnMut(usize) -> Vec<String> + 'static,
    ) -> Workers {
        let mut workers = Workers {
            program: program.into(),
            args: Box::new(args),
            capture,
            children: Vec::with_capacity(count),
            lines: Arc::default(),
            incidents: Vec::new(),
            started: 0,
        };
        for _ in 0..count {
            let child = workers.spawn();
            workers.children.push(child);
        }
        workers
    }

    fn spawn(&mut self) -> Child {
        self.started += 1;
        let args = (self.args)(self.started);
        let mut child = Command::new(&self.program)
            .args(&args)
            .stdout(if self.capture {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program.display()));
        if let Some(stdout) = child.stdout.take() {
            let lines = Arc::clone(&self.lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        child
    }

    /// How many processes run at once.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// How many processes were started in all, replacements included.
    pub fn started(&self) -> usize {
        self.started
    }

    /// The process ids of the current processes.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Every stdout line so far, of every process (when captured).
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Every kill, freeze and thaw so far, in order.
    pub fn incidents(&self) -> &[Incident] {
        &self.incidents
    }

    /// Waits until `count` stdout lines start with `prefix` (for example one `ready` line
    /// per worker); panics after `within` or when a worker stopped on its own.
    pub fn wait_for_lines(&mut self, prefix: &str, count: usize, within: Duration) {
        let until = Instant::now() + within;
        loop {
            let seen = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.starts_with(prefix))
                .count();
            if seen >= count {
                return;
            }
            self.check_alive();
            assert!(
                Instant::now() < until,
                "{seen} of {count} lines `{prefix}` from the workers"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Panics, with the worker's stderr, when a worker stopped on its own: only the test
    /// stops them.
    pub fn check_alive(&mut self) {
        for child in &mut self.children {
            if let Some(status) = child.try_wait().unwrap() {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                panic!("a worker stopped on its own ({status}): {stderr}");
            }
        }
    }

    /// Kills worker `i` with SIGKILL, waits for it, and starts another in its place.
    /// Returns the killed process's id.
    pub fn kill(&mut self, i: usize) -> u32 {
        let pid = self.children[i].id();
        let _ = self.children[i].kill();
        let _ = self.children[i].wait();
        self.incidents.push(Incident {
            what: Strike::Killed,
            pid,
            at_us: now_us(),
        });
        self.children[i] = self.spawn();
        pid
    }

    /// Kills a worker picked by `rng` (and replaces it); returns its index.
    pub fn kill_any(&mut self, rng: &mut Rng) -> usize {
        let victim = rng.below(self.len() as u64) as usize;
        self.kill(victim);
        victim
    }

    /// A worker other than `i`, picked by `rng` (there must be two at least).
    pub fn other_than(&self, i: usize, rng: &mut Rng) -> usize {
        (i + 1 + rng.below(self.len() as u64 - 1) as usize) % self.len()
    }

    /// Freezes worker `i` with SIGSTOP: it does nothing until [`Workers::thaw`].
    pub fn freeze(&mut self, i: usize) {
        let pid = self.children[i].id();
        self.signal(pid, "-STOP");
        self.incidents.push(Incident {
            what: Strike::Frozen,
            pid,
            at_us: now_us(),
        });
    }

    /// Lets a frozen worker `i` go on with SIGCONT.
    pub fn thaw(&mut self, i: usize) {
        let pid = self.children[i].id();
        self.incidents.push(Incident {
            what: Strike::Thawed,
            pid,
            at_us: now_us(),
        });
        self.signal(pid, "-CONT");
    }

    fn signal(&self, pid: u32, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Kills every worker (a frozen one too) and waits for them.
    pub fn stop_all(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The id of the process that started this one (read from `/proc/self/stat`; 0 when it
/// cannot be read).
pub fn parent_pid() -> u32 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Keeps a worker process up (its engine drives runs in the background) until the process
/// that started it (`parent`, read with [`parent_pid`] when the worker started) is gone, or
/// for `at_most`.
pub async fn serve_until_orphaned(parent: u32, at_most: Duration) {
    let started = Instant::now();
    while parent_pid() == parent && started.elapsed() < at_most {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A PostgreSQL worker process's store: the test's schema on its server, with four
/// connections and a ten-second connect timeout.
pub async fn pg_store(
    url: &str,
    schema: &str,
) -> Result<workflow_postgres::PgStore, workflow_core::store::StoreError> {
    let options = workflow_postgres::PgOptions {
        schema: schema.to_owned(),
        max_connections: 4,
        connect_timeout: Duration::from_secs(10),
        ..workflow_postgres::PgOptions::default()
    };
    workflow_postgres::PgStore::connect_with(url, options).await
}
