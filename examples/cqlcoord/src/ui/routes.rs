//! The dashboard's HTTP routes: pages, their JSON, and the two writes behind their guards.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use cql_workqueue::ItemId;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::model::{Sources, Watched, one_line};
use super::origin::PublicOrigin;
use super::queues::well_formed_id;

/// The page shell (both pages; its script tells them apart by the path).
const PAGE: &str = include_str!("page.html");
/// The page's script: renders the JSON and refreshes it.
const SCRIPT: &str = include_str!("app.js");
/// The page's style sheet.
const STYLE: &str = include_str!("style.css");

/// The header the page's script sets on every write. A page of another origin cannot send a
/// custom header without a CORS preflight, which this server never approves.
pub const CSRF_HEADER: &str = "x-cqlcoord-csrf";
/// The header carrying the write token (or the form field `token`).
pub const TOKEN_HEADER: &str = "x-cqlcoord-token";

/// Everything the handlers share.
pub struct UiState {
    /// What is read.
    pub sources: Sources,
    /// The write token; `None`: read-only.
    pub token: Option<String>,
    /// How often the page refreshes.
    pub refresh: Duration,
    /// Listening on a loopback address: requests must then name a loopback host (no DNS
    /// rebinding), or the public origin's.
    pub loopback: bool,
    /// `--public-origin`: where users reach the dashboard through a proxy. Writes whose
    /// `Origin` is this one are the page's own, and its host is taken as `Host`.
    pub public_origin: Option<PublicOrigin>,
    /// The Prometheus exposition, with `--metrics`.
    pub metrics: Option<PrometheusHandle>,
}

/// A refusal or failure: a JSON `{"error": ...}` for the API, a small page otherwise.
#[derive(Debug)]
pub struct UiError {
    status: StatusCode,
    message: String,
    json: bool,
}

impl UiError {
    fn new(status: StatusCode, message: impl Into<String>, json: bool) -> Self {
        UiError {
            status,
            message: message.into(),
            json,
        }
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        if self.json {
            return (self.status, Json(json!({"error": self.message}))).into_response();
        }
        let body = format!(
            "<!doctype html><meta charset=utf-8><title>{status}</title>\
             <link rel=stylesheet href=/static/style.css><main><h1>{status}</h1><p>{}</p>\
             <p><a href=/>Overview</a></p></main>",
            escape(&self.message),
            status = self.status
        );
        (self.status, Html(body)).into_response()
    }
}

/// Escapes text for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Headers on every answer: no page of another site may frame the dashboard (no
/// clickjacking of its buttons), the page loads nothing from elsewhere, content types are
/// taken as sent, and no address leaks in `Referer`.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    ("x-frame-options", "DENY"),
    (
        "content-security-policy",
        "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
];

async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The router, with the Host guard on every route and [`SECURITY_HEADERS`] on every answer.
pub fn router(state: Arc<UiState>) -> Router {
    let mut router = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route("/queue/{name}", get(queue_page))
        .route("/api/overview", get(overview))
        .route("/api/queues/{name}", get(queue_json))
        .route("/api/queues/{name}/dead/{id}/{action}", post(write))
        .route(
            "/static/app.js",
            get(|| async { asset("text/javascript", SCRIPT) }),
        )
        .route(
            "/static/style.css",
            get(|| async { asset("text/css", STYLE) }),
        );
    if state.metrics.is_some() {
        router = router.route("/metrics", get(metrics));
    }
    router
        .fallback(|| async { UiError::new(StatusCode::NOT_FOUND, "no such page", false) })
        .layer(middleware::from_fn_with_state(state.clone(), host_guard))
        .layer(middleware::from_fn(security_headers))
        .with_state(state)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, "no-cache"),
    ];
    (headers, body).into_response()
}

/// The host named by a `Host` header, without its port.
fn host_name(host: &str) -> &str {
    match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    }
}

/// On a loopback listener, a request must name a loopback host, or the `--public-origin`'s
/// host (and port): a page of another site whose name was made to resolve to 127.0.0.1
/// (DNS rebinding) is refused.
async fn host_guard(State(state): State<Arc<UiState>>, request: Request, next: Next) -> Response {
    if state.loopback {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok());
        let public =
            host.is_some_and(|h| state.public_origin.as_ref().is_some_and(|p| p.is_host(h)));
        let local = public
            || host.map(host_name).is_some_and(|h| {
                h == "localhost"
                    || h.parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            });
        if !local {
            let json = request.uri().path().starts_with("/api/");
            return UiError::new(
                StatusCode::FORBIDDEN,
                "the Host header must name this machine (localhost or a loopback address) \
                 or the --public-origin's host",
                json,
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// A queue name from a path: 400 when it cannot be a name, 404 when it is not watched.
fn watched_queue(state: &UiState, name: &str, json: bool) -> Result<(), UiError> {
    if let Err(e) = cql_lease::check_name(name) {
        return Err(UiError::new(
            StatusCode::BAD_REQUEST,
            format!("bad queue name: {}", queue_words(&e.to_string())),
            json,
        ));
    }
    if !state.sources.queues.contains_key(name) {
        return Err(UiError::new(
            StatusCode::NOT_FOUND,
            format!("the queue {name:?} is not shown here (start `cqlcoord ui` with --queue NAME)"),
            json,
        ));
    }
    Ok(())
}

async fn queue_page(
    State(state): State<Arc<UiState>>,
    Path(name): Path<String>,
) -> Result<Html<&'static str>, UiError> {
    watched_queue(&state, &name, false)?;
    Ok(Html(PAGE))
}

/// The settings every JSON answer carries for the page.
fn page_settings(state: &UiState, mut value: Value, cost: String) -> Value {
    value["refresh_ms"] = json!(u64::try_from(state.refresh.as_millis()).unwrap_or(u64::MAX));
    value["writable"] = json!(state.token.is_some());
    value["cost"] = json!(cost);
    value
}

async fn overview(State(state): State<Arc<UiState>>) -> Json<Value> {
    let cost = state.sources.watched.cost_text();
    Json(page_settings(&state, state.sources.overview().await, cost))
}

async fn queue_json(
    State(state): State<Arc<UiState>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, UiError> {
    watched_queue(&state, &name, true)?;
    match state.sources.queue(&name).await {
        Some(Ok(value)) => Ok(Json(page_settings(
            &state,
            value,
            Watched::queue_cost_text(),
        ))),
        Some(Err(e)) => Err(UiError::new(StatusCode::BAD_GATEWAY, e, true)),
        None => Err(UiError::new(StatusCode::NOT_FOUND, "no such queue", true)),
    }
}

async fn metrics(State(state): State<Arc<UiState>>) -> Response {
    match &state.metrics {
        Some(handle) => {
            let headers = [(header::CONTENT_TYPE, "text/plain; version=0.0.4")];
            (headers, handle.render()).into_response()
        }
        None => UiError::new(StatusCode::NOT_FOUND, "no such page", false).into_response(),
    }
}

/// The guards of a write, in order: the dashboard takes writes at all (started with a token),
/// the request comes from the page itself (the custom header, and `Origin`, when sent, naming
/// the `Host` or being the `--public-origin`), and it carries the token (header or form
/// field; compared in constant time).
fn allow_write(
    state: &UiState,
    headers: &HeaderMap,
    form: Option<&Form<HashMap<String, String>>>,
) -> Result<(), UiError> {
    let refuse = |message: &str| Err(UiError::new(StatusCode::FORBIDDEN, message, true));
    let Some(expected) = &state.token else {
        return refuse("read-only: this dashboard was started without --write-token");
    };
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if text(CSRF_HEADER) != Some("1") {
        return refuse(
            "cross-site request refused: writes come from the dashboard's own page \
             (header X-CQLCOORD-CSRF: 1)",
        );
    }
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let host = text(header::HOST.as_str()).unwrap_or_default();
        let own = origin
            .strip_prefix("http://")
            .is_some_and(|authority| authority == host)
            || state
                .public_origin
                .as_ref()
                .is_some_and(|p| p.is_origin(origin));
        if !own {
            return refuse("cross-site request refused: the Origin is not this dashboard");
        }
    }
    let given =
        text(TOKEN_HEADER).or_else(|| form.and_then(|f| f.get("token").map(String::as_str)));
    let matches = given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes())));
    if !matches {
        return refuse(
            "wrong or missing write token (header X-CQLCOORD-TOKEN, or form field token)",
        );
    }
    Ok(())
}

/// The queue and item a write names, checked (400 / 404) after the guards.
fn target(state: &UiState, name: &str, id: &str) -> Result<ItemId, UiError> {
    watched_queue(state, name, true)?;
    if !well_formed_id(id) {
        return Err(UiError::new(
            StatusCode::BAD_REQUEST,
            "malformed item id (an id is `{20 digits}-{32 hex digits}` or `u:KEY`)",
            true,
        ));
    }
    Ok(ItemId::from_stored(id.to_owned()))
}

type WriteForm = Result<Form<HashMap<String, String>>, FormRejection>;

/// `POST /api/queues/NAME/dead/ID/requeue|purge`, behind [`allow_write`].
async fn write(
    State(state): State<Arc<UiState>>,
    Path((name, id, action)): Path<(String, String, String)>,
    headers: HeaderMap,
    form: WriteForm,
) -> Result<Json<Value>, UiError> {
    allow_write(&state, &headers, form.ok().as_ref())?;
    let id = target(&state, &name, &id)?;
    let queue = state
        .sources
        .queues
        .get(&name)
        .ok_or_else(|| UiError::new(StatusCode::NOT_FOUND, "no such queue", true))?;
    let (done, verb) = match action.as_str() {
        "requeue" => (queue.requeue_dead(&id).await, "requeued"),
        "purge" => (queue.purge_dead(&id).await, "purged"),
        _ => {
            let message = "no such action (requeue or purge)";
            return Err(UiError::new(StatusCode::NOT_FOUND, message, true));
        }
    };
    state.sources.forget(&name).await;
    match done {
        Ok(true) => Ok(Json(json!({"id": id.as_str(), "outcome": verb}))),
        Ok(false) => Err(UiError::new(
            StatusCode::NOT_FOUND,
            format!("{id} is not a dead letter of {name:?}"),
            true,
        )),
        Err(e) => Err(UiError::new(StatusCode::BAD_GATEWAY, one_line(&e), true)),
    }
}

/// A name check's message about a queue: the library checks every name as a lease's.
pub(super) fn queue_words(message: &str) -> String {
    message.replacen("lease name", "queue name", 1)
}
