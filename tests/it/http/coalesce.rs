//! Shared reads (`http::coalesce`): identical requests share one database read, never one
//! that began before them.

use condense::domain::access::UserRole;
use condense::domain::job::JobStatus;
use serde_json::{json, Value};

use super::{insert_job, user_with_role};
use crate::api_test_on_both_databases;
use crate::common::api::TestServer;

/// Identical requests that wait together share one database read (`http::coalesce`), but
/// none is answered from a read that began before it arrived: under a steady load of the
/// same `/jobs` page, `/queue/stats`, `/system/dashboard` and the same user's token, each
/// write is seen by the read that follows it, and a revoked token is refused from the next
/// request on.
async fn shared_reads_see_every_write_made_before_them(server: &TestServer) {
    let admin = server.login().await;
    let viewer = user_with_role(server, &admin, UserRole::Viewer).await;
    // A long page, so that each read takes a while and the load keeps one running: a
    // request served by a read that began before it would see the state before its write.
    let id = insert_job(server, None, "shared.mkv", JobStatus::Queued, 1_000).await;
    for i in 0..400 {
        insert_job(server, None, &format!("other-{i:03}.mkv"), JobStatus::Queued, 1_000).await;
    }
    let page_path: &'static str = "/jobs?pageSize=500";
    let stop = std::cell::Cell::new(false);
    let hammer = |path: &'static str| {
        let (stop, viewer) = (&stop, &viewer);
        async move {
            // A kept-alive connection of its own: requests follow each other closely.
            let client = awc::Client::default();
            let mut answered = 0;
            while !stop.get() {
                let request = client.get(server.url(path)).insert_header(("Authorization", format!("Bearer {viewer}")));
                if let Ok(mut response) = request.send().await {
                    let _ = response.body().limit(16 << 20).await;
                }
                answered += 1;
            }
            answered
        }
    };
    let paths = [page_path, "/queue/stats", "/system/dashboard"];
    let hammers = futures_util::future::join_all((0..24).map(|i| hammer(paths[i % paths.len()])));
    let checks = async {
        let status_in = |page: &Value| {
            let job = page["items"].as_array().unwrap().iter().find(|job| job["id"] == id).cloned();
            job.unwrap()["status"].as_str().unwrap().to_string()
        };
        for round in 0..25 {
            for (action, status, paused) in [("pause", "PAUSED", 1), ("resume", "QUEUED", 0)] {
                let (code, body) = server.post(&format!("/jobs/{id}/{action}"), Some(&admin), &json!({})).await;
                assert_eq!(code, 200, "{action}: {body}");
                let (code, page) = server.get(page_path, Some(&admin)).await;
                assert_eq!(code, 200, "{page}");
                assert_eq!(status_in(&page), status, "round {round}: the list after {action} came from an older read");
                let (code, stats) = server.get("/queue/stats", Some(&admin)).await;
                assert_eq!(code, 200, "{stats}");
                assert_eq!(stats["paused"], paused, "round {round}: the counts after {action} came from an older read");
                let (code, dashboard) = server.get("/system/dashboard", Some(&admin)).await;
                assert_eq!(code, 200, "{dashboard}");
                assert_eq!(
                    dashboard["queue"]["paused"], paused,
                    "round {round}: the dashboard after {action} was older"
                );
            }
        }
        // The viewer's requests keep coming; from its logout on, each is refused.
        let (code, body) = server.post("/auth/logout", Some(&viewer), &json!({})).await;
        assert_eq!(code, 204, "{body}");
        for path in paths {
            let (code, body) = server.get(path, Some(&viewer)).await;
            assert_eq!(code, 401, "{path} after the logout: {body}");
        }
        stop.set(true);
    };
    let (answered, ()) = futures_util::future::join(hammers, checks).await;
    assert!(answered.iter().all(|&n| n > 0), "{answered:?}");
}
api_test_on_both_databases!(shared_reads_see_every_write_made_before_them);
