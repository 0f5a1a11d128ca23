//! A PostgreSQL primary and a streaming standby of the test's own, made from the machine's
//! PostgreSQL binaries (`initdb`, `pg_basebackup`, `pg_ctl`) on free ports and data
//! directories under a temporary directory: for the failover and restart tests
//! (`tests/tests/failover_pg.rs`). Run as the `postgres` user when the tests run as root
//! (the server refuses to run as root).
//!
//! The binaries are found in `PG_BIN`, or else the newest `/usr/lib/postgresql/*/bin`.
//! Where there are none, [`Cluster::start`] prints one line saying the test is skipped and
//! returns `None`; under `CI=true` it fails instead.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How the standby replicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// `synchronous_standby_names = '*'`, `synchronous_commit = on`: a commit is
    /// acknowledged once the standby has it.
    Synchronous,
    /// The default: a commit is acknowledged once the primary has it.
    Asynchronous,
}

/// One server: its data directory and port.
#[derive(Debug, Clone)]
pub struct Node {
    /// `primary` or `standby`.
    pub name: &'static str,
    /// The data directory.
    pub data: PathBuf,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

/// A primary and its standby, stopped (immediately) when dropped.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    as_postgres: bool,
    /// The server that was primary at the start.
    pub primary: Node,
    /// The streaming standby.
    pub standby: Node,
}

fn skip(test: &str, why: &str) -> Option<Cluster> {
    if workflow_postgres::testing::in_ci() {
        panic!("{test}: {why} (CI=true: the failover tests must run; set PG_BIN)");
    }
    println!("skipped {test}: {why}");
    None
}

fn find_bin() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("PG_BIN").map(PathBuf::from) {
        return bin.join("initdb").exists().then_some(bin);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// Runs `future` to its end on a thread and runtime of its own (callable from inside a
/// runtime or outside one).
fn blocking<F: std::future::Future>(future: impl FnOnce() -> F + Send) -> F::Output
where
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(future())
            })
            .join()
            .expect("the blocking thread")
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl Cluster {
    /// Makes and starts a primary and a standby streaming from it, or `None` (with a line
    /// saying why) where the binaries are missing.
    pub fn start(test: &str, replication: Replication) -> Option<Cluster> {
        let Some(bin) = find_bin() else {
            return skip(
                test,
                "no PostgreSQL binaries (initdb) in PG_BIN or /usr/lib/postgresql/*/bin",
            );
        };
        let as_postgres = is_root();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("wf-cluster-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        if as_postgres {
            let status = Command::new("chown")
                .args(["postgres:postgres", &dir.display().to_string()])
                .status()
                .expect("chown");
            assert!(status.success(), "chown the cluster's directory");
        }
        let cluster = Cluster {
            primary: Node {
                name: "primary",
                data: dir.join("primary"),
                port: free_port(),
            },
            standby: Node {
                name: "standby",
                data: dir.join("standby"),
                port: free_port(),
            },
            bin,
            dir,
            as_postgres,
        };
        cluster.init(replication);
        Some(cluster)
    }

    fn init(&self, replication: Replication) {
        let primary = &self.primary;
        self.run_ok(
            "initdb",
            &[
                "-D",
                &primary.data.display().to_string(),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        let sync = match replication {
            Replication::Synchronous => {
                "synchronous_standby_names = '*'\nsynchronous_commit = on\n"
            }
            Replication::Asynchronous => "",
        };
        // fsync off: a killed server loses nothing the machine's page cache holds, which
        // is what these tests kill; the machine itself stays up.
        self.append(
            &primary.data.join("postgresql.conf"),
            &format!(
                "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
                 wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\nfsync = off\n\
                 max_connections = 60\nwal_keep_size = '256MB'\nwal_retrieve_retry_interval = '200ms'\n{sync}",
                primary.port,
                self.dir.display()
            ),
        );
        self.start_node(primary);
        self.run_ok(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &primary.port.to_string(),
                "-U",
                "postgres",
                "-D",
                &self.standby.data.display().to_string(),
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ],
        );
        self.append(
            &self.standby.data.join("postgresql.conf"),
            &format!("port = {}\n", self.standby.port),
        );
        self.start_node(&self.standby);
        self.wait_streaming(Duration::from_secs(30));
    }

    fn append(&self, file: &Path, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(file)
            .expect("open the configuration");
        f.write_all(text.as_bytes())
            .expect("write the configuration");
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path).args(args);
            command
        } else {
            let mut command = Command::new(path);
            command.args(args);
            command
        }
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.command(program, args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"))
    }

    fn run_ok(&self, program: &str, args: &[&str]) {
        let out = self.run(program, args);
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts `node` and waits until it accepts connections.
    pub fn start_node(&self, node: &Node) {
        let log = self.dir.join(format!("{}.log", node.name));
        self.run_ok(
            "pg_ctl",
            &[
                "-D",
                &node.data.display().to_string(),
                "-l",
                &log.display().to_string(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
    }

    /// Stops `node` at once, as a crash would (`pg_ctl stop -m immediate`).
    pub fn stop_immediate(&self, node: &Node) {
        let _ = self.run(
            "pg_ctl",
            &[
                "-D",
                &node.data.display().to_string(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
    }

    /// Stops `node` cleanly (`pg_ctl stop -m fast`).
    pub fn stop_fast(&self, node: &Node) {
        self.run_ok(
            "pg_ctl",
            &[
                "-D",
                &node.data.display().to_string(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    /// Kills `node`'s postmaster with SIGKILL (its backends exit once they notice).
    pub fn kill(&self, node: &Node) {
        let pid = std::fs::read_to_string(node.data.join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next().map(str::to_owned))
            .expect("the postmaster's pid");
        let status = Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .expect("kill(1)");
        assert!(status.success());
    }

    /// Promotes the standby and waits until it accepts writes. A promoted server has no
    /// standby of its own, so it stops waiting for one (`synchronous_standby_names`), as
    /// an operator's failover would.
    pub fn promote(&self) {
        blocking(|| self.set(&self.standby, "synchronous_standby_names = ''"));
        self.run_ok(
            "pg_ctl",
            &[
                "-D",
                &self.standby.data.display().to_string(),
                "-w",
                "-t",
                "60",
                "promote",
            ],
        );
    }

    /// `ALTER SYSTEM SET <setting>` on `node`, then reloads its configuration.
    async fn set(&self, node: &Node, setting: &str) {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.node_url(node))
            .await
            .expect("connect to the server");
        for sql in [
            format!("ALTER SYSTEM SET {setting}"),
            "SELECT pg_reload_conf()".to_owned(),
        ] {
            sqlx::raw_sql(&sql)
                .execute(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        let _ = conn.close().await;
    }

    /// After a failover: the old primary's data is replaced by a base backup of the
    /// promoted server and started as its standby, and the two swap names, so the cluster
    /// can fail over again (the long mode).
    pub fn rebuild_old_primary_as_standby(&mut self, replication: Replication) {
        let _ = std::fs::remove_dir_all(&self.primary.data);
        self.run_ok(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.standby.port.to_string(),
                "-U",
                "postgres",
                "-D",
                &self.primary.data.display().to_string(),
                "-R",
                "-X",
                "stream",
                "--no-sync",
            ],
        );
        let sync = match replication {
            Replication::Synchronous => "synchronous_standby_names = '*'",
            Replication::Asynchronous => "synchronous_standby_names = ''",
        };
        self.append(
            &self.primary.data.join("postgresql.auto.conf"),
            &format!(
                "port = {}\nsynchronous_standby_names = ''\n",
                self.primary.port
            ),
        );
        std::mem::swap(&mut self.primary, &mut self.standby);
        self.primary.name = "primary";
        self.standby.name = "standby";
        self.start_node(&self.standby);
        blocking(|| self.set(&self.primary, sync));
        self.wait_streaming(Duration::from_secs(30));
    }

    /// A URL naming both servers, as libpq writes it, with `schema`.
    pub fn url(&self, schema: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write&schema={schema}",
            self.primary.port, self.standby.port
        )
    }

    /// A URL of one server.
    pub fn node_url(&self, node: &Node) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", node.port)
    }

    /// The first column of the first row of `sql` on `node`, as text, over a connection of
    /// its own.
    pub async fn query(&self, node: &Node, sql: &str) -> Result<String, sqlx::Error> {
        use sqlx::{Connection, Row};
        let mut conn = sqlx::PgConnection::connect(&self.node_url(node)).await?;
        let row = sqlx::query(sql).fetch_one(&mut conn).await?;
        let value: String = row.try_get(0)?;
        let _ = conn.close().await;
        Ok(value)
    }

    /// Waits until the primary streams to the standby.
    pub fn wait_streaming(&self, within: Duration) {
        let until = Instant::now() + within;
        loop {
            let streaming = blocking(|| {
                self.query(
                    &self.primary,
                    "SELECT count(*)::text FROM pg_stat_replication WHERE state = 'streaming'",
                )
            });
            if matches!(streaming.as_deref(), Ok("1")) {
                return;
            }
            assert!(
                Instant::now() < until,
                "the standby never streamed: {streaming:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the standby replayed everything the primary wrote so far.
    pub async fn wait_replayed(&self, within: Duration) {
        let until = Instant::now() + within;
        let target = self
            .query(&self.primary, "SELECT pg_current_wal_lsn()::text")
            .await
            .expect("the primary's position");
        loop {
            let caught_up = self
                .query(
                    &self.standby,
                    &format!("SELECT (pg_last_wal_replay_lsn() >= '{target}'::pg_lsn)::text"),
                )
                .await;
            if matches!(caught_up.as_deref(), Ok("true")) {
                return;
            }
            assert!(
                Instant::now() < until,
                "the standby never caught up: {caught_up:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in [&self.primary, &self.standby] {
            if node.data.join("postmaster.pid").exists() {
                self.stop_immediate(node);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
