//! The bundled chat page (`examples/web/dist`, built by `npm ci && npm run build` in
//! `examples/web`), served beside the API on the same origin: `/` is the page, `/assets/*` its
//! script and style sheet.

use axum::extract::Path as UrlPath;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::path::{Path, PathBuf};

/// Where the page's bundle is built.
pub fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/web/dist")
}

/// Whether the useStream page is built (`dist/chat.html` and its script).
#[allow(dead_code)] // the `chat` example's; the browser test bundles the pages itself
pub fn built(dist: &Path) -> bool {
    dist.join("chat.html").is_file() && dist.join("assets/chat.js").is_file()
}

/// `/` (the page) and `/assets/{file}` (its files) from `dist`, read at each request (a
/// rebuilt bundle is served without a restart).
pub fn routes(dist: PathBuf) -> Router {
    let page = dist.join("chat.html");
    let assets = dist.join("assets");
    Router::new()
        .route("/", get(move || file(page.clone())))
        .route(
            "/assets/{name}",
            get(move |UrlPath(name): UrlPath<String>| {
                let assets = assets.clone();
                async move {
                    // One plain file name: nothing outside the bundle's folder.
                    if name.contains(['/', '\\']) || name.starts_with('.') {
                        return StatusCode::NOT_FOUND.into_response();
                    }
                    file(assets.join(name)).await
                }
            }),
        )
}

/// A file of the bundle, with its content type; 404 if it is not there.
async fn file(path: PathBuf) -> Response {
    let kind = match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("map") => "application/json",
        _ => "application/octet-stream",
    };
    // Small files, read whole (a blocking read: an example, not a file server).
    match std::fs::read(&path) {
        Ok(bytes) => ([(header::CONTENT_TYPE, kind)], bytes).into_response(),
        Err(_) => (
            StatusCode::NOT_FOUND,
            format!(
                "{} is not built: `npm ci && npm run build` in examples/web",
                path.display()
            ),
        )
            .into_response(),
    }
}
