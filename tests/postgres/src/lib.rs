//! A throwaway PostgreSQL server for tests, from the distribution's own programs (Debian's
//! `postgresql` package, installed by `scripts/bootstrap.sh`): `initdb` into a temporary folder,
//! `pg_ctl` on a free loopback port, and a fresh database per test (`CREATE DATABASE`, dropped
//! again when the test's [`TestDatabase`] drops).
//!
//! One server serves the whole test binary: started at the first [`TestDatabase::create`] and
//! stopped when the process ends (its controlling shell reads our end of a pipe, which the
//! kernel closes then, however the process ends). Tests running as root (CI containers) run the
//! server as the `postgres` user the package creates, since `initdb` refuses root.

use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Mutex, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
};

/// The server's life, as a shell script (see the file).
const SERVER_SCRIPT: &str = include_str!("server.sh");

/// The PostgreSQL superuser the tests' URLs name.
const USER: &str = "kya";

/// A database of its own on the shared test server, dropped when this drops.
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
    url: String,
    server: &'static Server,
}

impl TestDatabase {
    /// Creates an empty database (starting the server first, once per test process).
    ///
    /// # Panics
    /// When PostgreSQL's programs are missing (run `scripts/bootstrap.sh`) or the server does
    /// not start: the panic says why.
    pub fn create() -> Self {
        Self::create_on(Server::shared())
    }

    /// Creates an empty database on a second test server, one that also speaks TLS with
    /// `certificate` and its `key` (PEM; the first call's pair serves the whole process, as the
    /// server is started once). Connections without TLS are still accepted, as with `ssl=on`.
    pub fn create_with_tls(certificate: &str, key: &str) -> Self {
        static TLS_SERVER: OnceLock<Server> = OnceLock::new();
        Self::create_on(TLS_SERVER.get_or_init(|| Server::start(Some((certificate, key)))))
    }

    fn create_on(server: &'static Server) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!("kya_test_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        server.psql(&format!("CREATE DATABASE {name}"));
        Self { url: server.url(&name), name, server }
    }

    /// `postgres://kya:<password>@127.0.0.1:<port>/<database>`: what `DATABASE_URL` takes.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's password for the tests' user (to check that it is never shown).
    pub fn password(&self) -> &str {
        &self.server.password
    }

    /// The one value `sql` returns, as psql prints it (say, whether the relayer's connections
    /// use TLS, from `pg_stat_ssl`).
    ///
    /// # Panics
    /// When `sql` fails: the panic gives psql's words.
    pub fn value(&self, sql: &str) -> String {
        let output = Command::new(self.server.bin.join("psql"))
            .args(["--no-psqlrc", "--tuples-only", "--no-align", "--set=ON_ERROR_STOP=1"])
            .args(["--dbname", &self.url, "--command", sql])
            .stdin(Stdio::null())
            .output()
            .expect("psql runs");
        assert!(output.status.success(), "{sql}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// A plain session of its own on this database (psql, kept open) that has run `sql` (say,
    /// `BEGIN; SELECT … FOR UPDATE`) and stays as it is, holding what it took, until dropped
    /// (its connection closes and the server rolls back what it left open): a daemon frozen
    /// inside a transaction, without timing games.
    ///
    /// # Panics
    /// When `sql` fails: the panic gives psql's words.
    pub fn hold(&self, sql: &str) -> Session {
        let mut child = Command::new(self.server.bin.join("psql"))
            .args(["--no-psqlrc", "--quiet", "--tuples-only", "--no-align", "--set=ON_ERROR_STOP=1"])
            .args(["--dbname", &self.url])
            // Taking what another session holds fails after 30 s (psql's words in the panic),
            // where it would wait for ever.
            .env("PGOPTIONS", "-c lock_timeout=30s")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("psql starts");
        let mut stdin = child.stdin.take().expect("piped");
        // The marker is a query's row, printed (and flushed, as every result is) once every
        // statement before it has run.
        writeln!(stdin, "{sql}\nSELECT 'kya-held';").expect("psql reads its input");
        // psql prints the statements' rows first; a failure ends it (ON_ERROR_STOP): end of file.
        let held = BufReader::new(child.stdout.take().expect("piped"))
            .lines()
            .map_while(Result::ok)
            .any(|line| line.trim() == "kya-held");
        if !held {
            drop(stdin);
            let mut errors = String::new();
            if let Some(mut stderr) = child.stderr.take() {
                let _ = stderr.read_to_string(&mut errors);
            }
            let _ = child.wait();
            panic!("{sql}: {errors}");
        }
        Session { child, _stdin: stdin }
    }
}

/// A psql session holding what it took ([`TestDatabase::hold`]); ended when dropped.
#[derive(Debug)]
pub struct Session {
    child: Child,
    _stdin: std::process::ChildStdin,
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // FORCE: a store of the test may still be connected (dropped after this, or leaked by a
        // failed test). A failure only leaves a database behind until the server goes.
        let _ = self.server.try_psql(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}

static SERVER: OnceLock<Server> = OnceLock::new();

/// The running server.
#[derive(Debug)]
struct Server {
    bin: PathBuf,
    port: u16,
    password: String,
    /// The controlling shell; its standard input is the pipe whose closing stops the server.
    control: Mutex<Child>,
}

impl Server {
    fn shared() -> &'static Self {
        SERVER.get_or_init(|| Self::start(None))
    }

    /// Starts a server; with TLS when given a certificate and its key (PEM).
    fn start(tls: Option<(&str, &str)>) -> Self {
        let bin = bin_dir();
        let password = random_password();
        let mut last_error = String::new();
        // A free port is taken by binding port 0 and letting it go; should another process
        // take it in between, the server fails to start and another port is tried.
        for _ in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("a free loopback port")
                .port();
            match launch(&bin, port, &password, tls) {
                Ok(control) => return Self { bin, port, password, control: Mutex::new(control) },
                Err(error) => last_error = error,
            }
        }
        panic!("the PostgreSQL test server did not start:\n{last_error}");
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://{USER}:{}@127.0.0.1:{}/{database}", self.password, self.port)
    }

    /// Runs one statement as the superuser; `Err` with psql's message.
    fn try_psql(&self, statement: &str) -> Result<(), String> {
        let output = Command::new(self.bin.join("psql"))
            .args(["--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--dbname", &self.url("postgres")])
            .args(["--command", statement])
            .stdin(Stdio::null())
            .output()
            .map_err(|error| format!("psql did not run: {error}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    fn psql(&self, statement: &str) {
        if let Err(error) = self.try_psql(statement) {
            panic!("{statement}: {error}");
        }
    }
}

impl Drop for Server {
    /// Only a server outside the shared static drops (statics never do): closing the pipe
    /// stops it, and the shell's exit means it is gone.
    fn drop(&mut self) {
        let control = self.control.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        drop(control.stdin.take());
        let _ = control.wait();
    }
}

/// Starts the controlling shell and waits for its `ready`; `Err` with what it printed.
fn launch(bin: &Path, port: u16, password: &str, tls: Option<(&str, &str)>) -> Result<Child, String> {
    let script_args = [bin.to_string_lossy().into_owned(), port.to_string(), password.to_owned()];
    let mut command = if running_as_root() {
        // runuser keeps the environment; the folder must be the user's own, under /tmp.
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--", "sh", "-c", SERVER_SCRIPT, "sh"]).env("TMPDIR", "/tmp");
        command
    } else {
        let mut command = Command::new("sh");
        command.args(["-c", SERVER_SCRIPT, "sh"]);
        command
    };
    if let Some((certificate, key)) = tls {
        command.env("KYA_PG_TLS_CERT", certificate).env("KYA_PG_TLS_KEY", key);
    }
    let mut child = command
        .args(&script_args)
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("the server's shell did not start: {error}"))?;
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped");
    let _ = BufReader::new(stdout).read_line(&mut line);
    if line.trim() == "ready" {
        return Ok(child);
    }
    let mut errors = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut errors);
    }
    let _ = child.wait();
    Err(errors)
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|proc| proc.uid() == 0)
}

/// The folder of `initdb`, `pg_ctl` and `psql`: `KYA_POSTGRES_BIN` if set, else the newest of
/// Debian's `/usr/lib/postgresql/<version>/bin` (not on `PATH` there), else `PATH`'s.
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KYA_POSTGRES_BIN") {
        return PathBuf::from(dir);
    }
    let debian =
        std::fs::read_dir("/usr/lib/postgresql").into_iter().flatten().flatten().filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        });
    if let Some((_, bin)) = debian.max_by_key(|(version, _)| *version) {
        return bin;
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path).find(|dir| dir.join("initdb").exists() && dir.join("pg_ctl").exists())
    });
    on_path.unwrap_or_else(|| {
        panic!("PostgreSQL's initdb and pg_ctl are not installed: run scripts/bootstrap.sh (it installs Debian's postgresql)")
    })
}

/// A password for this server only: std's randomly keyed hasher, twice (no RNG crate needed).
fn random_password() -> String {
    use std::hash::{BuildHasher, Hasher};
    let word = || std::collections::hash_map::RandomState::new().build_hasher().finish();
    format!("pw{:016x}{:016x}", word(), word())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one value `sql` returns in `url`'s database, as psql prints it; `Err`: psql's error.
    fn value(url: &str, sql: &str) -> Result<String, String> {
        let output = Command::new(Server::shared().bin.join("psql"))
            .args(["--no-psqlrc", "--tuples-only", "--no-align", "--dbname", url, "--command", sql])
            .output()
            .unwrap();
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    #[test]
    fn each_test_gets_its_own_database_behind_a_password_and_it_goes_when_dropped() {
        let first = TestDatabase::create();
        let second = TestDatabase::create();
        assert_ne!(first.url(), second.url());
        for database in [&first, &second] {
            assert_eq!(value(database.url(), "SELECT current_database()").unwrap(), database.name);
        }
        let wrong = first.url().replace(first.password(), "wrong");
        let refused = value(&wrong, "SELECT 1").unwrap_err();
        assert!(refused.contains("password authentication failed"), "{refused}");

        let name = first.name.clone();
        let count = format!("SELECT COUNT(*) FROM pg_database WHERE datname = '{name}'");
        let admin = Server::shared().url("postgres");
        assert_eq!(value(&admin, &count).unwrap(), "1");
        drop(first);
        assert_eq!(value(&admin, &count).unwrap(), "0");
    }
}
