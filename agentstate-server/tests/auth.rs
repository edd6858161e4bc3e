//! Users kept apart: two users with bearer tokens over every route family (threads, their
//! state and history, runs created, listed, read, joined, streamed, cancelled and deleted,
//! copies, assistants, AG-UI), on SQLite and on PostgreSQL (with workers) when
//! `AGENTSTATE_POSTGRES_URL` is set. Neither reaches the other's threads and runs, answered as
//! LangGraph's `langgraph dev` answers them with an owner-only `auth.py`: what is another's is
//! missing (404), a thread id another's holds is taken (409); a request without a user's token
//! is refused (401).

#[path = "../examples/support/desk.rs"]
mod desk;
#[cfg(feature = "postgres")]
#[path = "support/postgres.rs"]
mod support;

use agentstate_server::Authorize;
use agentstate_server::{
    Access, Action, ApiError, BearerTokens, Decision, Identity, OwnerOnly, Resource, Server,
};
use agentstate_store::{RecordBackend, SqliteStore, Store};
use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::{json, Map, Value};
use tower::ServiceExt;

const ALICE: &str = "token-alice";
const BOB: &str = "token-bob";

fn users() -> BearerTokens {
    BearerTokens::new()
        .token(ALICE, Identity::new("alice").with_permission("write"))
        .token(BOB, Identity::new("bob"))
}

fn app<B: RecordBackend>(store: &Store<B>) -> Server {
    Server::builder(store)
        .assistant("desk", desk::graph().unwrap().durable(store))
        .authenticate(users())
        .build()
}

/// A request with bearer token `token` (none: no `Authorization` header), and other headers:
/// its status and body text.
async fn call(
    app: &Router,
    method: &str,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let request = request
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// A request of `token`'s user whose answer is JSON.
async fn json(
    app: &Router,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (status, text) = call(app, method, path, body, Some(token), &[]).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn ask(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]})
}

/// What `token`'s user finds with a thread search `search`: the threads' ids.
async fn found(app: &Router, token: &str, search: Value) -> Vec<String> {
    let (status, threads) = json(app, token, "POST", "/threads/search", Some(search)).await;
    assert_eq!(status, StatusCode::OK, "{threads}");
    let threads = threads.as_array().cloned().unwrap_or_default();
    threads
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Bob's request answered as LangGraph's server answers it for a thread of Alice's: `status`
/// and `detail`.
async fn refused(
    app: &Router,
    method: &str,
    path: &str,
    body: Option<Value>,
    status: StatusCode,
    detail: &str,
) {
    let (got, answer) = json(app, BOB, method, path, body).await;
    assert_eq!(
        (got, answer["detail"].as_str().unwrap_or_default()),
        (status, detail),
        "bob's {method} {path}: {answer}"
    );
}

/// The two-user scenario on `server`.
async fn two_users(server: &Server) {
    let app = &server.router();
    let not_found = StatusCode::NOT_FOUND;

    // No user, or no user's token: refused; the open routes stay open.
    let no_token = [
        (None, "carries no `Authorization` header (`Bearer <token>`)"),
        (Some("nobody"), "carries a bearer token that is no user's"),
    ];
    for (token, why) in no_token {
        let (status, body) =
            call(app, "POST", "/threads/search", Some(json!({})), token, &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        let detail = format!("the request to `/threads/search` {why}");
        assert_eq!(answer, json!({ "detail": detail }));
    }
    let (status, body) = call(
        app,
        "POST",
        "/threads",
        Some(json!({})),
        None,
        &[("authorization", "Basic abc")],
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    // Every route family: refused before anything is read.
    let families = [
        ("GET", "/threads/t-1"),
        ("GET", "/threads/t-1/state"),
        ("GET", "/threads/t-1/runs/r-1/stream"),
        ("POST", "/threads/t-1/runs/wait"),
        ("POST", "/runs/stream"),
        ("POST", "/assistants/search"),
        ("POST", "/agui/desk"),
        ("POST", "/store/items/search"),
        ("GET", "/nowhere"),
    ];
    for (method, path) in families {
        let (status, body) = call(app, method, path, Some(json!({})), None, &[]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {body}");
    }
    for path in ["/ok", "/info", "/openapi.json"] {
        let (status, _) = call(app, "GET", path, None, None, &[]).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }

    // Alice's thread (an owner she names is not taken: hers is stamped), a run of it waiting
    // at its interrupt, and a slow one running.
    let (status, thread) = json(
        app,
        ALICE,
        "POST",
        "/threads",
        Some(json!({"metadata": {"k": "v", "owner": "bob"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{thread}");
    assert_eq!(thread["metadata"], json!({"k": "v", "owner": "alice"}));
    let t = thread["thread_id"].as_str().unwrap().to_owned();
    let runs = format!("/threads/{t}/runs");
    let first = json!({"assistant_id": "desk", "input": ask("hi"),
        "config": {"configurable": {"langgraph_auth_user_id": "mallory", "x": 1}}});
    let (status, run) = json(app, ALICE, "POST", &runs, Some(first)).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    let r = run["run_id"].as_str().unwrap().to_owned();
    let (status, joined) = json(app, ALICE, "GET", &format!("{runs}/{r}/join"), None).await;
    assert_eq!(status, StatusCode::OK, "{joined}");
    assert!(joined["__interrupt__"].is_array(), "{joined}");
    // The run is hers, and names her to its graph as LangGraph's server does (not the user
    // the request named).
    let (_, run) = json(app, ALICE, "GET", &format!("{runs}/{r}"), None).await;
    assert_eq!(run["metadata"]["owner"], json!("alice"), "{run}");
    let configurable = &run["kwargs"]["config"]["configurable"];
    assert_eq!(
        configurable["langgraph_auth_user_id"],
        json!("alice"),
        "{run}"
    );
    assert_eq!(configurable["user_id"], json!("alice"));
    assert_eq!(configurable["langgraph_auth_permissions"], json!(["write"]));
    assert_eq!(
        configurable["langgraph_auth_user"],
        json!({"identity": "alice", "display_name": "alice", "is_authenticated": true, "permissions": ["write"]})
    );
    assert_eq!(configurable["x"], json!(1));
    let slow = json!({"assistant_id": "desk", "input": ask("slow one")});
    let (status, slow) = json(app, ALICE, "POST", &runs, Some(slow)).await;
    assert_eq!(status, StatusCode::OK, "{slow}");
    let s = slow["run_id"].as_str().unwrap().to_owned();

    // Bob reaches none of it, while it runs: every route answers as for a missing thread.
    let thread_missing = format!("Thread with ID {t} not found");
    let taken = format!("Thread with ID {t} already exists");
    let run_request = json!({"assistant_id": "desk", "input": ask("mine now")});
    let cases: Vec<(&str, String, Option<Value>, StatusCode, &str)> = vec![
        (
            "GET",
            format!("/threads/{t}"),
            None,
            not_found,
            &thread_missing,
        ),
        (
            "PATCH",
            format!("/threads/{t}"),
            Some(json!({"metadata": {"owner": "bob"}})),
            not_found,
            &thread_missing,
        ),
        (
            "POST",
            format!("/threads/{t}/copy"),
            None,
            not_found,
            &thread_missing,
        ),
        (
            "GET",
            format!("/threads/{t}/state"),
            None,
            not_found,
            &thread_missing,
        ),
        (
            "GET",
            format!("/threads/{t}/state/1"),
            None,
            not_found,
            &thread_missing,
        ),
        (
            "POST",
            format!("/threads/{t}/state"),
            Some(json!({"values": {"log": ["bob"]}})),
            not_found,
            &thread_missing,
        ),
        (
            "GET",
            format!("/threads/{t}/history"),
            None,
            not_found,
            &thread_missing,
        ),
        (
            "POST",
            format!("/threads/{t}/history"),
            Some(json!({})),
            not_found,
            &thread_missing,
        ),
        ("GET", runs.clone(), None, not_found, &thread_missing),
        (
            "GET",
            format!("{runs}/{r}"),
            None,
            not_found,
            &thread_missing,
        ),
        (
            "GET",
            format!("{runs}/{s}"),
            None,
            not_found,
            &thread_missing,
        ),
        (
            "GET",
            format!("{runs}/{s}/join"),
            None,
            not_found,
            "Thread not found",
        ),
        (
            "GET",
            format!("{runs}/{s}/stream"),
            None,
            not_found,
            "Not Found",
        ),
        (
            "POST",
            format!("{runs}/{s}/cancel"),
            None,
            not_found,
            "No runs found to cancel.",
        ),
        (
            "POST",
            format!("{runs}/{s}/cancel?action=rollback"),
            None,
            not_found,
            "No runs found to cancel.",
        ),
        (
            "DELETE",
            format!("{runs}/{r}"),
            None,
            not_found,
            "Not Found",
        ),
        (
            "POST",
            runs.clone(),
            Some(run_request.clone()),
            not_found,
            "Thread or assistant not found.",
        ),
        (
            "POST",
            format!("{runs}/stream"),
            Some(run_request.clone()),
            not_found,
            "Thread or assistant not found.",
        ),
        (
            "POST",
            format!("{runs}/wait"),
            Some(run_request.clone()),
            not_found,
            "Thread or assistant not found.",
        ),
        (
            "POST",
            format!("{runs}/wait"),
            Some(json!({"assistant_id": "desk", "if_not_exists": "create"})),
            not_found,
            "Thread or assistant not found.",
        ),
        (
            "POST",
            "/threads".to_owned(),
            Some(json!({"thread_id": t})),
            StatusCode::CONFLICT,
            &taken,
        ),
        (
            "POST",
            "/threads".to_owned(),
            Some(json!({"thread_id": t, "if_exists": "do_nothing"})),
            StatusCode::CONFLICT,
            &taken,
        ),
        (
            "DELETE",
            format!("/threads/{t}"),
            None,
            not_found,
            &thread_missing,
        ),
    ];
    for (method, path, body, status, detail) in cases {
        refused(app, method, &path, body, status, detail).await;
    }
    let agui =
        json!({"threadId": t, "runId": "bobs-run", "messages": [], "tools": [], "context": []});
    refused(
        app,
        "POST",
        "/agui/desk",
        Some(agui),
        not_found,
        "Thread or assistant not found.",
    )
    .await;
    assert_eq!(found(app, BOB, json!({})).await, Vec::<String>::new());
    assert_eq!(
        found(
            app,
            BOB,
            json!({"ids": [t], "metadata": {"owner": "alice"}})
        )
        .await,
        Vec::<String>::new()
    );
    let (_, count) = json(app, BOB, "POST", "/threads/count", Some(json!({}))).await;
    assert_eq!(count, json!(0));

    // Alice's run went on, untouched: she joins it, and her thread is as her runs left it.
    let (status, joined) = json(app, ALICE, "GET", &format!("{runs}/{s}/join"), None).await;
    assert_eq!(status, StatusCode::OK, "{joined}");
    assert!(joined["__interrupt__"].is_array(), "{joined}");
    let (status, got) = json(app, ALICE, "GET", &format!("/threads/{t}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (&got["metadata"]["owner"], &got["metadata"]["k"]),
        (&json!("alice"), &json!("v"))
    );
    let (_, listed) = json(app, ALICE, "GET", &runs, None).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    let (status, _) = json(app, ALICE, "GET", &format!("{runs}/{s}/stream"), None).await;
    assert_eq!(status, StatusCode::OK);
    // A patch does not change the owner; a copy is its user's.
    let (_, patched) = json(
        app,
        ALICE,
        "PATCH",
        &format!("/threads/{t}"),
        Some(json!({"metadata": {"owner": "bob", "p": 2}})),
    )
    .await;
    assert_eq!(
        (&patched["metadata"]["owner"], &patched["metadata"]["p"]),
        (&json!("alice"), &json!(2))
    );
    let (status, copy) = json(app, ALICE, "POST", &format!("/threads/{t}/copy"), None).await;
    assert_eq!(status, StatusCode::OK, "{copy}");
    assert_eq!(copy["metadata"]["owner"], json!("alice"));
    let c = copy["thread_id"].as_str().unwrap().to_owned();
    refused(
        app,
        "GET",
        &format!("/threads/{c}/state"),
        None,
        not_found,
        &format!("Thread with ID {c} not found"),
    )
    .await;

    // Bob's own: a thread a run creates, a stateless run, an AG-UI thread; each user lists
    // their own only.
    let bobs = "00000000-0000-4000-8000-00000000b0b5";
    let create = json!({"assistant_id": "desk", "input": ask("hello"), "if_not_exists": "create"});
    let (status, waited) = json(
        app,
        BOB,
        "POST",
        &format!("/threads/{bobs}/runs/wait"),
        Some(create),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{waited}");
    let stateless = json!({"assistant_id": "desk", "input": ask("hello")});
    let (status, waited) = json(app, BOB, "POST", "/runs/wait", Some(stateless)).await;
    assert_eq!(status, StatusCode::OK, "{waited}");
    let agui = json!({"threadId": "bobs-agui", "runId": "bobs-agui-1", "messages": [], "tools": [], "context": []});
    let (status, body) = call(app, "POST", "/agui/desk", Some(agui), Some(BOB), &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut bob_has = found(app, BOB, json!({})).await;
    bob_has.sort();
    assert_eq!(bob_has, [bobs, "bobs-agui"]);
    let (_, got) = json(app, BOB, "GET", "/threads/bobs-agui", None).await;
    assert_eq!(got["metadata"]["owner"], json!("bob"), "{got}");
    let mut alice_has = found(app, ALICE, json!({})).await;
    alice_has.sort();
    let mut hers = vec![t.clone(), c.clone()];
    hers.sort();
    assert_eq!(alice_has, hers);
    let (_, count) = json(app, ALICE, "POST", "/threads/count", Some(json!({}))).await;
    assert_eq!(count, json!(2));
    for path in ["/threads/bobs-agui", &format!("/threads/{bobs}/runs")] {
        let (status, _) = json(app, ALICE, "GET", path, None).await;
        assert_eq!(status, not_found, "alice's GET {path}");
    }

    // The served graphs' assistants are everyone's.
    for token in [ALICE, BOB] {
        let (status, assistants) =
            json(app, token, "POST", "/assistants/search", Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(assistants[0]["graph_id"], json!("desk"), "{assistants}");
        let (status, _) = json(app, token, "GET", "/assistants/desk/graph", None).await;
        assert_eq!(status, StatusCode::OK);
    }

    // Alice cleans up: her runs and thread are hers to delete; Bob's are not.
    let (status, _) = json(app, ALICE, "DELETE", &format!("{runs}/{r}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = json(app, ALICE, "DELETE", &format!("/threads/{bobs}"), None).await;
    assert_eq!(status, not_found);
    let (status, _) = json(app, ALICE, "DELETE", &format!("/threads/{t}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = json(app, BOB, "GET", &format!("/threads/{bobs}"), None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_are_kept_apart_on_sqlite() {
    let store = SqliteStore::open_in_memory().unwrap();
    two_users(&app(&store)).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_users_are_kept_apart_on_postgresql_with_workers() {
    use agentstate_store::PostgresStore;
    let what = "users kept apart on PostgreSQL";
    let Some((url, options)) = support::database("agentstate_auth", what) else {
        return;
    };
    let schema = options.schema.clone();
    let store = PostgresStore::connect_with(&url, options).await.unwrap();
    let server = Server::builder(&store)
        .assistant("desk", desk::graph().unwrap().durable(&store))
        .authenticate(users())
        .workers(2)
        .worker_timing(
            std::time::Duration::from_millis(200),
            std::time::Duration::from_secs(1),
        )
        .build();
    let workers = server.start_workers().unwrap();
    two_users(&server).await;
    workers.shutdown().await;
    support::drop_schema(&url, &schema).await;
}

/// A rule of one's own (nobody deletes threads; readers listed in a thread's metadata read it)
/// over an authenticator closure, and the API key beside the users.
#[tokio::test]
async fn rules_of_ones_own_and_the_api_key_both_apply() {
    let store = SqliteStore::open_in_memory().unwrap();
    let rule = |access: &Access<'_>, metadata: &mut Map<String, Value>| {
        let reader = agentstate_server::Filter::new()
            .contains("readers", json!(access.user.identity.as_str()));
        match (access.resource, access.action) {
            (Resource::Threads, Action::Delete) => Decision::Deny,
            (Resource::Threads, Action::Read) => match OwnerOnly.authorize(access, metadata) {
                Decision::Only(mine) => {
                    Decision::Only(agentstate_server::Filter::any_of([mine, reader]))
                }
                other => other,
            },
            _ => OwnerOnly.authorize(access, metadata),
        }
    };
    let app = Server::builder(&store)
        .assistant("desk", desk::graph().unwrap().durable(&store))
        .api_key("k")
        .authenticate(|parts: &Parts| {
            let user = parts
                .headers
                .get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            async move {
                user.map(Identity::new)
                    .ok_or_else(|| ApiError::unauthorized("no `x-user`"))
            }
        })
        .authorize(rule)
        .build()
        .router();
    // The key first, then the user.
    let headers = [("x-user", "alice")];
    let (status, body) = call(&app, "POST", "/threads", Some(json!({})), None, &headers).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("no API key"), "{body}");
    let headers = [("x-api-key", "k")];
    let (status, body) = call(&app, "POST", "/threads", Some(json!({})), None, &headers).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::UNAUTHORIZED, r#"{"detail":"no `x-user`"}"#)
    );
    // With both: `user`'s request.
    let by = |user: &'static str, method: &'static str, path: String, body: Option<Value>| {
        let app = app.clone();
        async move {
            let headers = [("x-api-key", "k"), ("x-user", user)];
            call(&app, method, &path, body, None, &headers).await
        }
    };
    let created = json!({"metadata": {"readers": ["bob"]}});
    let (status, body) = by("alice", "POST", "/threads".into(), Some(created)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let thread: Value = serde_json::from_str(&body).unwrap();
    let path = format!("/threads/{}", thread["thread_id"].as_str().unwrap());
    // Bob reads it (a reader), but does not change it; carol does neither; nobody deletes.
    let patch = Some(json!({"metadata": {}}));
    for (user, method, body, status) in [
        ("bob", "GET", None, StatusCode::OK),
        ("bob", "PATCH", patch, StatusCode::NOT_FOUND),
        ("carol", "GET", None, StatusCode::NOT_FOUND),
        ("alice", "GET", None, StatusCode::OK),
    ] {
        let (got, answer) = by(user, method, path.clone(), body).await;
        assert_eq!(got, status, "{user}'s {method}: {answer}");
    }
    let (status, body) = by("alice", "DELETE", path.clone(), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let t = &path["/threads/".len()..];
    assert_eq!(
        body,
        format!(r#"{{"detail":"user `alice` may not delete threads (`{t}`)"}}"#)
    );
}
