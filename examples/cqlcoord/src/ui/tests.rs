//! The dashboard's routes called in-process (no socket) on the embedded stores: the write
//! guards, and the 4xx answers to bad input.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::{ItemId, QueueConfig, WorkQueue};
use tower::ServiceExt;

use super::routes::{CSRF_HEADER, TOKEN_HEADER};
use super::{Sources, UiState, Watched, router};

const TOKEN: &str = "0123456789abcdef-test-token";
const HOST: &str = "127.0.0.1:8080";

/// A dashboard showing the queue `jobs`, which holds one dead letter (returned).
async fn dashboard(token: Option<&str>) -> (Router, WorkQueue, ItemId) {
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
    let state = UiState {
        sources: Sources::new(watched, None, queues),
        token: token.map(str::to_owned),
        refresh: Duration::from_secs(2),
        loopback: true,
        metrics: None,
    };
    (router(Arc::new(state)), queue, id)
}

async fn dead(queue: &WorkQueue) -> Vec<ItemId> {
    let letters = queue.dead_letters().await.unwrap();
    letters.into_iter().map(|l| l.id).collect()
}

/// A POST to `path` with the given headers; the status and body.
async fn send(
    router: &Router,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", HOST);
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
