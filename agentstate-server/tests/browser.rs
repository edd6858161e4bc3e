//! The example chat pages (`examples/web`) in headless Chromium, clicked through as a person
//! would by `playwright-core` scripts (`examples/web/e2e`), with screenshots saved under
//! `target/browser-screenshots/` (CI keeps them):
//!
//! - the useStream page (`@langchain/langgraph-sdk` 1.15.0's React hook) served with the help
//!   desk graph on one origin, as the `chat` example serves it: a message and its answer
//!   streamed in, the approval (Approve, then Reject on a second turn), a reload (the
//!   conversation back), a run stopped (and cancelled on the server) and continued, a run
//!   rejoined after a reload, an answer regenerated and its branch switcher; and the same page on another
//!   origin, which the server lets in with [`ServerBuilder::cors_origins`];
//! - CopilotKit's chat (`@copilotkit/react-core` 1.74.0) behind CopilotKit's runtime
//!   (`@copilotkit/runtime` 1.75.0, in node: `examples/web/copilotkit.mjs`) on the AG-UI
//!   endpoint: a streamed answer, a frontend tool run by the page and the answer to its result
//!   (a second turn), an approval (`useInterrupt`) approved.
//!
//! The README's screenshot (`agentstate-server/docs/chat.png`) is this test's
//! `chat/chat-second-turn.png`.
//!
//! Without a browser, requests to the router check `cors_origins` and `cors_permissive`'s
//! answers.
//!
//! Each script prints `ok <check>` or `fail <check>: <why>`; the test expects exactly the
//! checks below to pass and the known server gaps (`*_GAPS`, each saying why) to fail, so a
//! fixed gap fails the test until it is moved to the checks.
//!
//! Needs `npm ci` in `examples/web` (the test bundles the pages itself, `node build.mjs`) and
//! Chromium (`/usr/bin/chromium`, Debian's `chromium`, or the one `AGENTSTATE_CHROMIUM`
//! names); `.ci/run` installs both. Without them the test prints one line and passes, except
//! under CI (`CI` set), where that is a failure.
//!
//! [`ServerBuilder::cors_origins`]: agentstate_server::ServerBuilder::cors_origins

#[path = "../examples/support/concierge.rs"]
mod concierge;
#[path = "../examples/support/desk.rs"]
mod desk;
#[path = "../examples/support/page.rs"]
mod page;

use agentstate_server::Server;
use agentstate_store::SqliteStore;
use axum::serve::ListenerExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The useStream page's checks that pass, in the order its script runs them.
const CHAT_CHECKS: &[&str] = &[
    "answer_streamed_in",
    "thread_in_the_address",
    "approval_shown",
    "approval_question",
    "approve",
    "second_turn_reject",
    "reload_shows_history",
    "stop",
    "continue_after_stop",
    "reload_rejoins_a_run",
    "approve_after_rejoin",
    "regenerate",
    "branch_switcher",
    "other_origin",
];

/// The useStream page's checks that fail, for the server's reasons: none.
const CHAT_GAPS: &[&str] = &[];

/// CopilotKit's chat's checks that pass, in the order its script runs them.
const COPILOT_CHECKS: &[&str] = &[
    "answer_streamed_in",
    "frontend_tool",
    "frontend_tool_result_answered",
    "approval_shown",
    "approve",
];

/// CopilotKit's chat's checks that fail, for the server's reasons: none.
const COPILOT_GAPS: &[&str] = &[];

fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/web")
}

fn chromium() -> PathBuf {
    std::env::var_os("AGENTSTATE_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"))
}

/// Where the screenshots go: `target/browser-screenshots/<page>` (the target directory
/// `CARGO_TARGET_DIR` names, if set).
fn screenshots(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let dir = target.join("browser-screenshots").join(name);
    std::fs::create_dir_all(&dir).expect("the screenshot directory");
    dir
}

/// Whether the node modules and Chromium are there and the pages are bundled (once per test
/// binary); if not, under CI a failure, otherwise one line.
fn ready() -> bool {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let missing = if !web_dir().join("node_modules/playwright-core").exists() {
        Some("the pages' node modules (`npm ci` in agentstate-server/examples/web)")
    } else if !chromium().exists() {
        Some("Chromium (`apt-get install chromium`, or AGENTSTATE_CHROMIUM)")
    } else {
        None
    };
    if let Some(what) = missing {
        assert!(
            std::env::var_os("CI").is_none(),
            "under CI the browser tests need {what}"
        );
        println!("skipped: the browser tests need {what}");
        return false;
    }
    let built = BUILT.get_or_init(|| {
        let output = std::process::Command::new("node")
            .arg("build.mjs")
            .current_dir(web_dir())
            .output()
            .map_err(|e| format!("node does not run: {e}"))?;
        match output.status.success() {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&output.stderr).into_owned()),
        }
    });
    if let Err(e) = built {
        panic!("the pages do not bundle (`node build.mjs` in examples/web):\n{e}");
    }
    true
}

/// Runs `node e2e/<script> args...` in `examples/web`; the checks it passed and those it
/// failed (each with its line).
async fn drive(script: &str, args: &[&str]) -> (Vec<String>, Vec<String>) {
    let run = tokio::process::Command::new("node")
        .arg(format!("e2e/{script}"))
        .args(args)
        .env("AGENTSTATE_CHROMIUM", chromium())
        .current_dir(web_dir())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .unwrap_or_else(|_| panic!("{script} finishes within three minutes"))
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{stderr}"
    );
    let passed = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .map(str::to_owned)
        .collect();
    let failed = stdout
        .lines()
        .filter(|l| l.starts_with("fail "))
        .map(str::to_owned)
        .collect();
    (passed, failed)
}

/// Asserts that exactly `checks` passed and `gaps` failed.
fn expect(
    page: &str,
    (passed, failed): (Vec<String>, Vec<String>),
    checks: &[&str],
    gaps: &[&str],
) {
    let fixed: Vec<&String> = passed
        .iter()
        .filter(|c| gaps.contains(&c.as_str()))
        .collect();
    assert!(
        fixed.is_empty(),
        "{page}: the known gaps {fixed:?} pass now: move them to the checks"
    );
    assert_eq!(
        passed, checks,
        "{page}: the checks that passed\n{failed:#?}"
    );
    let failed: Vec<&str> = failed
        .iter()
        .map(|l| l["fail ".len()..].split(':').next().unwrap_or_default())
        .collect();
    assert_eq!(failed, gaps, "{page}: the checks that failed");
}

/// Serves `app` on `listener` (with `TCP_NODELAY`, as `Server::serve` does).
fn serve(listener: tokio::net::TcpListener, app: axum::Router) {
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usestream_page_in_a_browser() {
    if !ready() {
        return;
    }
    // The page with the API (the `chat` example's origin), and the page alone on another
    // origin, whose requests the server lets in.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (url, other) = (
        format!("http://{}", listener.local_addr().unwrap()),
        format!("http://{}", elsewhere.local_addr().unwrap()),
    );
    let store = SqliteStore::open_in_memory().unwrap();
    let server = Server::builder(&store)
        .assistant("desk", desk::graph().unwrap().durable(&store))
        .cors_origins([&other])
        .build();
    serve(listener, page::routes(page::dist()).merge(server.router()));
    serve(elsewhere, page::routes(page::dist()));

    let shots = screenshots("chat");
    let other_page = format!("{other}/?api={url}");
    let results = drive(
        "chat.mjs",
        &[&format!("{url}/"), shots.to_str().unwrap(), &other_page],
    )
    .await;
    expect("the useStream page", results, CHAT_CHECKS, CHAT_GAPS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilotkits_chat_in_a_browser() {
    if !ready() {
        return;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let store = SqliteStore::open_in_memory().unwrap();
    let server = Server::builder(&store)
        .assistant("concierge", concierge::graph().unwrap().durable(&store))
        .build();
    serve(listener, server.router());

    // CopilotKit's runtime and its page, in node, on a free port it prints.
    let mut runtime = tokio::process::Command::new("node")
        .args(["copilotkit.mjs", &url, "0"])
        .current_dir(web_dir())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs copilotkit.mjs");
    let mut lines = BufReader::new(runtime.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the runtime starts within 30 s")
        .unwrap()
        .expect("the runtime prints its URL");
    let page_url = line
        .rsplit(' ')
        .next()
        .filter(|u| u.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in `{line}`"))
        .to_owned();

    let shots = screenshots("copilotkit");
    let results = drive(
        "copilot.mjs",
        &[&format!("{page_url}/"), &url, shots.to_str().unwrap()],
    )
    .await;
    runtime.kill().await.ok();
    expect("CopilotKit's chat", results, COPILOT_CHECKS, COPILOT_GAPS);
}

/// Without a browser: `cors_origins` answers a preflight and a request from its origins, with
/// the response headers exposed (the SDKs read `Content-Location`), and gives other origins no
/// CORS header; `cors_permissive` answers any origin.
#[tokio::test]
async fn cors_origins_lets_in_only_its_origins() {
    use axum::body::Body;
    use axum::http::{header, Method, Request};
    use tower::ServiceExt;

    let store = SqliteStore::open_in_memory().unwrap();
    let graph = || desk::graph().unwrap().durable(&store);
    let preflight = |origin: &str| {
        Request::builder()
            .method(Method::OPTIONS)
            .uri("/threads")
            .header(header::ORIGIN, origin)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(
                header::ACCESS_CONTROL_REQUEST_HEADERS,
                "content-type,x-api-key",
            )
            .body(Body::empty())
            .unwrap()
    };
    let allowed = |response: &axum::response::Response| {
        response
            .headers()
            .get(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .map(|v| v.to_str().unwrap().to_owned())
    };

    let server = Server::builder(&store)
        .assistant("desk", graph())
        .cors_origins(["http://localhost:5173", "https://chat.example.com"])
        .build();
    let answer = server
        .router()
        .oneshot(preflight("https://chat.example.com"))
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{answer:?}");
    assert_eq!(
        allowed(&answer).as_deref(),
        Some("https://chat.example.com")
    );
    let methods = answer.headers()[header::ACCESS_CONTROL_ALLOW_METHODS]
        .to_str()
        .unwrap();
    assert!(methods.contains("POST") || methods == "*", "{methods}");
    let answer = server
        .router()
        .oneshot(preflight("https://elsewhere.example.com"))
        .await
        .unwrap();
    assert_eq!(allowed(&answer), None, "another origin is not let in");

    let request = Request::builder()
        .method(Method::POST)
        .uri("/threads")
        .header(header::ORIGIN, "http://localhost:5173")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .unwrap();
    let answer = server.router().oneshot(request).await.unwrap();
    assert!(answer.status().is_success(), "{answer:?}");
    assert_eq!(allowed(&answer).as_deref(), Some("http://localhost:5173"));
    assert_eq!(answer.headers()[header::ACCESS_CONTROL_EXPOSE_HEADERS], "*");

    let server = Server::builder(&store)
        .assistant("desk", graph())
        .cors_permissive()
        .build();
    let answer = server
        .router()
        .oneshot(preflight("http://any.example"))
        .await
        .unwrap();
    assert_eq!(allowed(&answer).as_deref(), Some("*"));
}
