//! The dashboard's routes called in-process (no socket) on the embedded stores: the write
//! guards, the 4xx answers to bad input, the headers of every answer, and queue counts
//! behind a lagging cursor.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use cql_lease::{LeaseClient, MemoryStore, Timing};
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::store::QueueStore;
use cql_workqueue::{ItemId, QueueConfig, WorkQueue};
use serde_json::Value;
use tower::ServiceExt;

use super::routes::{CSRF_HEADER, SECURITY_HEADERS, TOKEN_HEADER};
use super::{PublicOrigin, Sources, UiState, Watched, router};

const TOKEN: &str = "0123456789abcdef-test-token";
const HOST: &str = "127.0.0.1:8080";

/// A loopback dashboard showing `watched` (its queues from `queues`), started with `token`
/// and `public_origin`, refreshing every 2 s.
fn ui(
    watched: Watched,
    leases: Option<LeaseClient>,
    queues: BTreeMap<String, WorkQueue>,
    token: Option<&str>,
    public_origin: Option<&str>,
) -> Router {
    let state = UiState {
        sources: Sources::new(watched, leases, queues, Duration::from_secs(1)),
        token: token.map(str::to_owned),
        refresh: Duration::from_secs(2),
        loopback: true,
        public_origin: public_origin.map(|o| PublicOrigin::parse(o).unwrap()),
        metrics: None,
    };
    router(Arc::new(state))
}

/// A dashboard showing the queue `jobs`, which holds one dead letter (returned).
async fn dashboard(token: Option<&str>) -> (Router, WorkQueue, ItemId) {
    dashboard_at(token, None).await
}

/// [`dashboard`] with `--public-origin`.
async fn dashboard_at(
    token: Option<&str>,
    public_origin: Option<&str>,
) -> (Router, WorkQueue, ItemId) {
    let store = Arc::new(MemoryQueueStore::new());
    let config = QueueConfig {
        max_attempts: 1,
        ..QueueConfig::default()
    };
    let queue = WorkQueue::new(store, "jobs", config).unwrap();
    let id = queue.enqueue("poison").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(job) = queue.claim("w").await.unwrap() {
            job.fail("boom").await.unwrap();
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never claimed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(dead(&queue).await, vec![id.clone()]);
    let watched = Watched {
        queues: vec!["jobs".to_owned()],
        ..Watched::default()
    };
    let queues = BTreeMap::from([("jobs".to_owned(), queue.clone())]);
    let router = ui(watched, None, queues, token, public_origin);
    (router, queue, id)
}

async fn dead(queue: &WorkQueue) -> Vec<ItemId> {
    let letters = queue.dead_letters().await.unwrap();
    letters.into_iter().map(|l| l.id).collect()
}

/// A request to `path` with the given headers (`Host` is [`HOST`] unless one is given); the
/// status and body.
async fn send(
    router: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut request = Request::builder().method(method).uri(path);
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request = request.header("host", HOST);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn requeue_path(id: &ItemId) -> String {
    format!("/api/queues/jobs/dead/{id}/requeue")
}

/// Started without a write token, the dashboard refuses every write with 403, even one that
/// carries a token and the page's header, and the dead letter stays.
#[tokio::test]
async fn a_read_only_dashboard_refuses_writes_and_writes_nothing() {
    let (router, queue, id) = dashboard(None).await;
    let headers = [(CSRF_HEADER, "1"), (TOKEN_HEADER, TOKEN)];
    let (status, body) = send(&router, "POST", &requeue_path(&id), &headers).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("read-only"), "{body}");
    let purge = format!("/api/queues/jobs/dead/{id}/purge");
    assert_eq!(
        send(&router, "POST", &purge, &headers).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(dead(&queue).await, vec![id]);
}

/// A write with a wrong or missing token is refused with 403 and changes nothing.
#[tokio::test]
async fn a_write_with_a_wrong_or_missing_token_is_refused() {
    let (router, queue, id) = dashboard(Some(TOKEN)).await;
    for headers in [
        vec![
            (CSRF_HEADER, "1"),
            (TOKEN_HEADER, "0123456789abcdef-test-tokem"),
        ],
        vec![(CSRF_HEADER, "1"), (TOKEN_HEADER, "short")],
        vec![(CSRF_HEADER, "1")],
    ] {
        let (status, body) = send(&router, "POST", &requeue_path(&id), &headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{headers:?}: {body}");
        assert!(body.contains("token"), "{body}");
    }
    assert_eq!(dead(&queue).await, vec![id]);
}

/// A write without the page's own header (what a form posted from another site looks like),
/// or from another origin, is refused with 403 even with the right token.
#[tokio::test]
async fn a_write_without_the_csrf_header_or_from_another_origin_is_refused() {
    let (router, queue, id) = dashboard(Some(TOKEN)).await;
    for headers in [
        vec![(TOKEN_HEADER, TOKEN)],
        vec![(CSRF_HEADER, "yes"), (TOKEN_HEADER, TOKEN)],
        vec![
            (CSRF_HEADER, "1"),
            (TOKEN_HEADER, TOKEN),
            ("origin", "http://evil.example"),
        ],
    ] {
        let (status, body) = send(&router, "POST", &requeue_path(&id), &headers).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{headers:?}: {body}");
        assert!(body.contains("cross-site"), "{body}");
    }
    assert_eq!(dead(&queue).await, vec![id]);
}

/// With the right token and the page's header (and its own origin), Requeue puts the dead
/// letter back in the queue; a second Requeue of it answers 404.
#[tokio::test]
async fn the_right_token_and_header_requeue_a_dead_letter() {
    let (router, queue, id) = dashboard(Some(TOKEN)).await;
    let headers = [
        (CSRF_HEADER, "1"),
        (TOKEN_HEADER, TOKEN),
        ("origin", "http://127.0.0.1:8080"),
    ];
    let (status, body) = send(&router, "POST", &requeue_path(&id), &headers).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("requeued"), "{body}");
    assert!(dead(&queue).await.is_empty());
    let job = queue.claim("w").await.unwrap().expect("the requeued item");
    assert_eq!(job.id(), &id);
    let (status, _) = send(&router, "POST", &requeue_path(&id), &headers).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// A queue the dashboard does not show answers 404 (page and API), a name over the
/// library's limit 400, and a malformed item id 400: never a 500.
#[tokio::test]
async fn unknown_queues_huge_names_and_malformed_ids_get_clear_4xx_answers() {
    let (router, _queue, id) = dashboard(Some(TOKEN)).await;
    let (status, body) = send(&router, "GET", "/queue/other", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body.starts_with("<!doctype html>") && body.contains("--queue NAME"),
        "{body}"
    );
    assert_eq!(
        send(&router, "GET", "/api/queues/other", &[]).await.0,
        StatusCode::NOT_FOUND
    );
    let huge = "q".repeat(cql_lease::MAX_NAME_LEN + 1);
    let (status, body) = send(&router, "GET", &format!("/queue/{huge}"), &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("queue name"), "{body}");
    let headers = [(CSRF_HEADER, "1"), (TOKEN_HEADER, TOKEN)];
    let path = format!("/api/queues/{huge}/dead/{id}/requeue");
    assert_eq!(
        send(&router, "POST", &path, &headers).await.0,
        StatusCode::BAD_REQUEST
    );
    let (status, body) = send(
        &router,
        "POST",
        "/api/queues/jobs/dead/not-an-id/requeue",
        &headers,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("malformed item id"), "{body}");
    assert_eq!(
        send(&router, "GET", "/no/such/page", &[]).await.0,
        StatusCode::NOT_FOUND
    );
}

/// On a loopback listener a request naming another host (DNS rebinding) is refused.
#[tokio::test]
async fn a_request_for_another_host_name_is_refused_on_loopback() {
    let (router, _queue, _id) = dashboard(None).await;
    let request = Request::builder()
        .uri("/api/overview")
        .header("host", "attacker.example:8080")
        .body(Body::empty())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let (status, body) = send(&router, "GET", "/api/overview", &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"dead\":1"), "{body}");
}

/// The token may also come as the form field `token` (the page's header still required):
/// Purge with it deletes the dead letter for good.
#[tokio::test]
async fn the_token_as_a_form_field_with_the_csrf_header_purges_a_dead_letter() {
    let (router, queue, id) = dashboard(Some(TOKEN)).await;
    let request = Request::builder()
        .method("POST")
        .uri(format!("/api/queues/jobs/dead/{id}/purge"))
        .header("host", HOST)
        .header(CSRF_HEADER, "1")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(format!("token={TOKEN}")))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(dead(&queue).await.is_empty());
    assert!(
        queue.claim("w").await.unwrap().is_none(),
        "a purged item was claimed"
    );
}

/// The JSON of `GET path`, which must answer 200.
async fn get_json(router: &Router, path: &str) -> Value {
    let (status, body) = send(router, "GET", path, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Jobs pushed while the queue's cursor is half an hour behind (workers down, thirty empty
/// one-minute buckets between it and now) are all counted, with their age and how far the
/// cursor lags: those buckets and the slices around now fit in one refresh's reads.
#[tokio::test]
async fn jobs_pushed_while_the_cursor_is_half_an_hour_behind_are_all_counted() {
    let store = Arc::new(MemoryQueueStore::new());
    let half_an_hour_ago = cql_workqueue::clock::now_micros() - 30 * 60 * 1_000_000;
    store
        .advance_cursor("jobs", half_an_hour_ago)
        .await
        .unwrap();
    let queue = WorkQueue::new(store, "jobs", QueueConfig::default()).unwrap();
    for job in ["a", "b", "c"] {
        queue.enqueue(job).await.unwrap();
    }
    let watched = Watched {
        queues: vec!["jobs".to_owned()],
        ..Watched::default()
    };
    let queues = BTreeMap::from([("jobs".to_owned(), queue)]);
    let router = ui(watched, None, queues, None, None);
    let overview = get_json(&router, "/api/overview").await;
    let jobs = &overview["queues"][0];
    assert_eq!(jobs["available"], 3, "{jobs}");
    assert_eq!(jobs["complete"], true, "{jobs}");
    assert!(
        jobs["oldest_available_age_secs"].as_f64().unwrap() < 60.0,
        "{jobs}"
    );
    let lag = jobs["cursor_lag_secs"].as_f64().unwrap();
    assert!((1800.0..1860.0).contains(&lag), "{jobs}");
}

/// Behind a TLS proxy at `--public-origin https://dash.example` that keeps the Host, a write
/// from that origin is taken; without the flag the same request is refused (403), and the
/// flag does not let in another origin.
#[tokio::test]
async fn a_write_through_a_tls_proxy_is_taken_only_from_the_public_origin() {
    let from = |host, origin| {
        [
            ("host", host),
            ("origin", origin),
            (CSRF_HEADER, "1"),
            (TOKEN_HEADER, TOKEN),
        ]
    };
    let proxied = from("dash.example", "https://dash.example");
    let (router, queue, id) = dashboard(Some(TOKEN)).await;
    let (status, body) = send(&router, "POST", &requeue_path(&id), &proxied).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // A proxy that sets the Host to the dashboard's own address.
    let rewritten = from(HOST, "https://dash.example");
    let (status, body) = send(&router, "POST", &requeue_path(&id), &rewritten).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(dead(&queue).await, vec![id]);

    for headers in [proxied, rewritten] {
        let (router, _queue, id) = dashboard_at(Some(TOKEN), Some("https://dash.example")).await;
        let (status, body) = send(&router, "POST", &requeue_path(&id), &headers).await;
        assert_eq!(status, StatusCode::OK, "{headers:?}: {body}");
        let (status, _) = send(&router, "GET", "/", &[("host", "dash.example")]).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (router, _queue, id) = dashboard_at(Some(TOKEN), Some("https://dash.example")).await;
    let other = from("dash.example", "https://evil.example");
    let (status, body) = send(&router, "POST", &requeue_path(&id), &other).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = send(&router, "GET", "/", &[("host", "evil.example")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

/// Every answer (the page, its JSON, a refusal) forbids framing and content sniffing and
/// sends no referrer.
#[tokio::test]
async fn every_answer_forbids_framing_and_sniffing_and_sends_no_referrer() {
    let (router, _queue, _id) = dashboard(None).await;
    for (path, host) in [
        ("/", HOST),
        ("/api/overview", HOST),
        ("/api/overview", "attacker.example"),
    ] {
        let request = Request::builder()
            .uri(path)
            .header("host", host)
            .body(Body::empty())
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        for (name, value) in SECURITY_HEADERS {
            assert_eq!(response.headers()[name], value, "{path} ({host}): {name}");
        }
    }
    let csp = SECURITY_HEADERS[1].1;
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'self'"),
        "{csp}"
    );
}

/// A lease's holder shows by its declared owner; the holder id (what `lease release
/// --holder-id` takes) is not served.
#[tokio::test]
async fn the_overview_shows_a_holder_without_its_holder_id() {
    let client = LeaseClient::new(Arc::new(MemoryStore::new()), Timing::default()).unwrap();
    let lease = client.acquire("slot", "alice", None, None).await.unwrap();
    let watched = Watched {
        leases: vec!["slot".to_owned()],
        ..Watched::default()
    };
    let router = ui(watched, Some(client), BTreeMap::new(), None, None);
    let overview = get_json(&router, "/api/overview").await;
    let slot = &overview["leases"][0];
    assert_eq!(slot["holder"], "alice", "{slot}");
    let text = overview.to_string();
    assert!(!text.contains("holder_id"), "{text}");
    assert!(!text.contains(lease.holder_id()), "{text}");
}
