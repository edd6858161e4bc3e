//! The differential harness against LangGraph's own server: `langgraph dev` (langgraph-api,
//! pinned in `tests/reference/requirements.txt`) serves `tests/reference/graphs.py`, this
//! server the same graphs written in Rust (`tests/support/reference.rs`), on SQLite and (feature
//! `postgres`, `AGENTSTATE_POSTGRES_URL`) on PostgreSQL with workers, all on 127.0.0.1; `tests/reference/driver.py` makes the same calls against both with the official
//! Python SDK and compares what comes back. A difference fails the test unless
//! `docs/divergences.md` lists it (and a listed one that no longer differs fails it too).
//!
//! `tests/js/reference.mjs` then does the same with the official JS SDK (where `npm ci` ran in
//! `tests/js`).
//!
//! Needs a Python with those requirements, named by `AGENTSTATE_LANGGRAPH_REF_PYTHON` (`.ci/run`
//! makes the venv and sets it). Without it the test prints one line and passes, except under CI
//! (`CI` set), where that is a failure. `AGENTSTATE_REFERENCE_ONLY` (scenario names, separated
//! by spaces) runs only those; `AGENTSTATE_REFERENCE_SHOW=1` prints both transcripts;
//! `AGENTSTATE_REFERENCE_URL` uses a `langgraph dev` already serving the graphs there.

#[path = "support/langgraph_dev.rs"]
mod langgraph_dev;
#[path = "support/reference.rs"]
mod reference;
#[cfg(feature = "postgres")]
#[path = "support/postgres.rs"]
mod support;

use agentstate_store::SqliteStore;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `langgraph dev` in a process group of its own, ended (with its children) when dropped.
struct LanggraphDev {
    child: std::process::Child,
    dir: PathBuf,
}

impl Drop for LanggraphDev {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = std::process::Command::new("kill")
            .args(["-TERM", "--", &group])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The files `langgraph dev` serves the reference graphs from: each of `tests/reference` and
/// its name in the server's directory (its config is `langgraph.json`).
const GRAPHS: [(&str, &str); 2] = [
    ("graphs.py", "graphs.py"),
    ("langgraph.json", "langgraph.json"),
];

/// Starts `langgraph dev` on `files` of `here` (each with its name in the server's directory:
/// [`GRAPHS`], ...), in a directory of its own (it keeps its state files there), and waits
/// until it answers `/ok`.
async fn langgraph_dev(
    python: &Path,
    here: &Path,
    files: &[(&str, &str)],
) -> (LanggraphDev, String) {
    let dir = std::env::temp_dir().join(format!("agentstate-reference-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    for (from, to) in files {
        std::fs::copy(here.join(from), dir.join(to)).unwrap();
    }
    let port = free_port();
    let child = langgraph_dev::spawn(python, &dir, port);
    let mut dev = LanggraphDev { child, dir };
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(status)) = dev.child.try_wait() {
            let log =
                std::fs::read_to_string(dev.dir.join("langgraph-dev.log")).unwrap_or_default();
            panic!("langgraph dev exited ({status}) before it served:\n{log}");
        }
        let ok = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok();
        if ok && http_ok(port).await {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "langgraph dev did not answer /ok within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Leave the directory's removal to the drop, the process to its group.
    let _ = &mut dev;
    (dev, url)
}

/// Whether `GET /ok` on the port answers 200.
async fn http_ok(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    answer.starts_with(b"HTTP/1.1 200")
}

/// What the drivers printed, and whether each found the servers alike.
struct Drove {
    python: std::process::Output,
    js: Option<std::process::Output>,
}

/// Runs both drivers against our server at `ours` and the reference at `reference`.
async fn drive(python: &Path, ours: &str, reference: &str) -> Drove {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference");
    let divergences = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/divergences.md");
    let mut driver = tokio::process::Command::new(python);
    driver
        .arg(here.join("driver.py"))
        .args([ours, reference])
        .arg(&divergences)
        .kill_on_drop(true);
    if let Ok(only) = std::env::var("AGENTSTATE_REFERENCE_ONLY") {
        driver.arg("--only").args(only.split_whitespace());
    }
    if std::env::var_os("AGENTSTATE_REFERENCE_SHOW").is_some() {
        driver.arg("--show");
    }
    let output = tokio::time::timeout(Duration::from_secs(900), driver.output())
        .await
        .expect("the driver finishes within 15 minutes")
        .expect("the driver runs");

    // The same with the official JS SDK, where `npm ci` installed it in tests/js.
    let js = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    let js_output = match js.join("node_modules/@langchain/langgraph-sdk").is_dir() {
        true => {
            let mut node = tokio::process::Command::new("node");
            node.arg(js.join("reference.mjs"))
                .args([ours, reference])
                .arg(&divergences)
                .current_dir(&js)
                .kill_on_drop(true);
            if std::env::var_os("AGENTSTATE_REFERENCE_SHOW").is_some() {
                node.arg("--show");
            }
            let run = tokio::time::timeout(Duration::from_secs(600), node.output());
            Some(
                run.await
                    .expect("the JS driver finishes within 10 minutes")
                    .expect("node runs"),
            )
        }
        false => {
            assert!(
                std::env::var_os("CI").is_none(),
                "the LangGraph JS SDK is not installed in tests/js under CI: .ci/run runs `npm ci` there"
            );
            println!(
                "skipped: the JS SDK's half of the differential harness (no `npm ci` in tests/js)"
            );
            None
        }
    };
    Drove {
        python: output,
        js: js_output,
    }
}

/// Fails unless both drivers found our server (on `backend`) answering as the reference does.
fn check(drove: &Drove, backend: &str) {
    let stdout = String::from_utf8_lossy(&drove.python.stdout);
    let stderr = String::from_utf8_lossy(&drove.python.stderr);
    println!("{backend}: {stdout}");
    assert!(
        drove.python.status.success(),
        "agentstate-server on {backend} answered otherwise than langgraph dev where docs/divergences.md does not say so (or a listed divergence is gone):\n{stdout}\n{stderr}"
    );
    if let Some(js) = &drove.js {
        let (stdout, stderr) = (
            String::from_utf8_lossy(&js.stdout),
            String::from_utf8_lossy(&js.stderr),
        );
        println!("{backend}: {stdout}");
        assert!(
            js.status.success(),
            "through the JS SDK, agentstate-server on {backend} answered otherwise than langgraph dev where docs/divergences.md does not say so (or a listed divergence is gone):\n{stdout}\n{stderr}"
        );
    }
}

/// The Python with `langgraph dev` (`AGENTSTATE_LANGGRAPH_REF_PYTHON`); `None`, with a line
/// saying that `what` is skipped, when it is not set (under CI, where it must be, a failure).
fn reference_python(what: &str) -> Option<PathBuf> {
    let python = std::env::var_os("AGENTSTATE_LANGGRAPH_REF_PYTHON").map(PathBuf::from);
    if python.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "AGENTSTATE_LANGGRAPH_REF_PYTHON is not set under CI: .ci/run installs langgraph dev"
        );
        println!("skipped: {what} (AGENTSTATE_LANGGRAPH_REF_PYTHON not set)");
    }
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_as_langgraph_dev_does() {
    let Some(python) = reference_python("the differential harness against langgraph dev") else {
        return;
    };
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference");
    let (_dev, reference_url) = match std::env::var("AGENTSTATE_REFERENCE_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let (dev, url) = langgraph_dev(&python, &here, &GRAPHS).await;
            (Some(dev), url)
        }
    };

    // On SQLite, runs carried out in the serving process.
    let store = SqliteStore::open_in_memory().unwrap();
    let server = reference::server(&store).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ours_url = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(server.serve(listener));
    let drove = drive(&python, &ours_url, &reference_url).await;
    serving.abort();
    check(&drove, "SQLite");

    // On PostgreSQL, runs queued in the database and carried out by the workers.
    #[cfg(feature = "postgres")]
    on_postgres(&python, &reference_url).await;
}

/// The same drivers against the server on PostgreSQL (a schema of its own) with workers: every
/// run on a thread goes through the run queue (`AGENTSTATE_POSTGRES_URL`; without it one line,
/// except under CI, where that is a failure).
#[cfg(feature = "postgres")]
async fn on_postgres(python: &Path, reference_url: &str) {
    use agentstate_store::PostgresStore;
    let what = "the differential harness on PostgreSQL";
    let Some((url, options)) = support::database("agentstate_reference", what) else {
        return;
    };
    let schema = options.schema.clone();
    let store = PostgresStore::connect_with(&url, options).await.unwrap();
    let server = reference::server(&store).workers(4).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ours_url = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(server.serve(listener));
    let drove = drive(python, &ours_url, reference_url).await;
    serving.abort();
    let _ = serving.await;
    drop(store);
    support::drop_schema(&url, &schema).await;
    check(&drove, "PostgreSQL");
}

/// Users kept apart, as `langgraph dev` keeps them with an owner-only `auth.py`
/// (`tests/reference/auth.py`, served with `langgraph-auth.json`): `auth_driver.py` makes the
/// same requests as two users (and none) against both servers, on SQLite here with
/// `BearerTokens` and `OwnerOnly`, and compares the answers step by step; a difference fails the
/// test unless `docs/divergences.md` lists it (its section "Users kept apart").
/// `AGENTSTATE_REFERENCE_AUTH_URL` uses a `langgraph dev` already serving them there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_kept_apart_as_langgraph_dev_keeps_them() {
    use agentstate_server::{BearerTokens, Identity};
    let Some(python) = reference_python("custom auth against langgraph dev") else {
        return;
    };
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference");
    let files = [
        ("graphs.py", "graphs.py"),
        ("auth.py", "auth.py"),
        ("langgraph-auth.json", "langgraph.json"),
    ];
    let (_dev, reference_url) = match std::env::var("AGENTSTATE_REFERENCE_AUTH_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let (dev, url) = langgraph_dev(&python, &here, &files).await;
            (Some(dev), url)
        }
    };
    let store = SqliteStore::open_in_memory().unwrap();
    let users = BearerTokens::new()
        .token(
            "token-alice",
            Identity::new("alice").with_permission("write"),
        )
        .token("token-bob", Identity::new("bob"));
    let server = reference::server(&store).authenticate(users).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ours_url = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(server.serve(listener));
    let divergences = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/divergences.md");
    let driver = tokio::process::Command::new(&python)
        .arg(here.join("auth_driver.py"))
        .args([&ours_url, &reference_url])
        .arg(&divergences)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), driver)
        .await
        .expect("the auth driver finishes within 5 minutes")
        .expect("the auth driver runs");
    serving.abort();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    println!("{stdout}");
    assert!(
        output.status.success(),
        "agentstate-server kept users apart otherwise than langgraph dev where docs/divergences.md does not say so (or a listed divergence is gone):\n{stdout}\n{stderr}"
    );
}
