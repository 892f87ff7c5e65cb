//! The audit log: every change through the API, who made it and how it was answered.

use chrono::{DateTime, Duration, Utc};
use condense::domain::access::UserRole;
use serde_json::json;

use super::user_with_role;
use crate::api_test_on_both_databases;
use crate::common::api::{code, TestServer};

/// Every change made through the API is in the audit log with who, when, which route and
/// how it was answered, refusals included; reads are not; only administrators read it, and
/// it never holds a request's body (a password).
async fn changes_are_audited_and_only_administrators_read_the_log(server: &TestServer) {
    let admin = server.login().await;
    let operator = user_with_role(server, &admin, UserRole::Operator).await;
    let viewer = user_with_role(server, &admin, UserRole::Viewer).await;
    let started = Utc::now() - Duration::seconds(1);
    let secret = "a brand new secret phrase";
    let mut done = Vec::new();
    let (status, _) = server.post("/queue/pause-all", Some(&operator), &json!({})).await;
    assert_eq!(status, 200);
    done.push(("a-operator", "operator", "POST", "/queue/pause-all", "/queue/pause-all".to_string(), status));
    let (status, _) = server.post("/api/queue/resume-all", Some(&viewer), &json!({})).await;
    assert_eq!(status, 403);
    done.push(("a-viewer", "viewer", "POST", "/queue/resume-all", "/api/queue/resume-all".to_string(), status));
    // Reads are not changes: none of these is written down.
    for path in ["/queue/stats", "/jobs", "/users"] {
        let (status, _) = server.get(path, Some(&admin)).await;
        assert_eq!(status, 200, "{path}");
    }
    let (status, body) = server.put("/users/a-viewer/password", Some(&admin), &json!({"password": secret})).await;
    assert_eq!(status, 204, "{body}");
    done.push(("admin", "admin", "PUT", "/users/{username}/password", "/users/a-viewer/password".to_string(), status));
    let (status, _) = server.post("/jobs/999999/cancel", Some(&operator), &json!({})).await;
    assert!(status >= 400, "{status}");
    done.push(("a-operator", "operator", "POST", "/jobs/{id}/cancel", "/jobs/999999/cancel".to_string(), status));

    let (status, log) = server.get("/audit", Some(&admin)).await;
    assert_eq!(status, 200, "{log}");
    // The two users the admin created come first in time, then what was done above.
    assert_eq!(log["total"], 6, "{log}");
    let items = log["items"].as_array().unwrap();
    let seen: Vec<(String, String, String, String, String, u16)> = items
        .iter()
        .map(|e| {
            let text = |name: &str| e[name].as_str().unwrap().to_string();
            (
                text("username"),
                text("role"),
                text("method"),
                text("route"),
                text("path"),
                e["status"].as_u64().unwrap() as u16,
            )
        })
        .collect();
    let expected: Vec<(String, String, String, String, String, u16)> = done
        .iter()
        .rev()
        .map(|(user, role, method, route, path, status)| {
            (user.to_string(), role.to_string(), method.to_string(), route.to_string(), path.clone(), *status)
        })
        .collect();
    assert_eq!(seen[..4], expected[..], "newest first");
    for (entry, user) in items[4..].iter().zip(["a-viewer", "a-operator"]) {
        assert_eq!(
            (entry["username"].as_str(), entry["route"].as_str(), entry["status"].as_u64()),
            (Some("admin"), Some("/users"), Some(201)),
            "creating {user}: {entry}"
        );
    }
    for entry in &items[..4] {
        let at: DateTime<Utc> = entry["at"].as_str().unwrap().parse().unwrap();
        assert!(at >= started && at <= Utc::now(), "{entry}");
    }
    assert!(!log.to_string().contains(secret), "a request body reached the log: {log}");

    // One user's entries, and pages.
    let (status, mine) = server.get("/audit?user=a-operator", Some(&admin)).await;
    assert_eq!((status, mine["total"].as_u64()), (200, Some(2)), "{mine}");
    let (status, second) = server.get("/audit?page=2&pageSize=1", Some(&admin)).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["items"][0]["route"], "/users/{username}/password", "{second}");
    let (status, body) = server.get("/audit?page=0", Some(&admin)).await;
    assert_eq!((status, code(&body)), (400, "invalid_query"), "{body}");
    // Only administrators read it.
    let (status, body) = server.get("/api/audit", Some(&operator)).await;
    assert_eq!((status, code(&body)), (403, "forbidden"), "{body}");
    let (_, after) = server.get("/audit", Some(&admin)).await;
    assert_eq!(after["total"], 6, "reading the log is not a change: {after}");
}

api_test_on_both_databases!(changes_are_audited_and_only_administrators_read_the_log);

/// `GET /audit` filters by user, API key and action in the database, over the whole log:
/// an entry far past the latest 500 is found, the total counts every match, and pages
/// walk the matches. A filter the document does not allow is refused.
async fn the_audit_log_is_filtered_by_user_key_and_action_over_the_whole_log(server: &TestServer) {
    use condense::repo::audit::{append, NewEntry};
    let admin = server.login().await;
    let (status, made) = server.post("/api-keys", Some(&admin), &json!({"name": "sonarr", "scope": "admin"})).await;
    assert_eq!(status, 201, "{made}");
    let (key, key_id) = (made["key"].as_str().unwrap().to_string(), made["id"].as_i64().unwrap());
    // The oldest: a pause signed in, then 600 entries of the key (written as the middleware
    // writes them), then one pause made with the key through the API.
    let (status, _) = server.post("/queue/pause-all", Some(&admin), &json!({})).await;
    assert_eq!(status, 200);
    for n in 0..600 {
        let entry = NewEntry {
            username: "admin".into(),
            role: UserRole::Admin,
            method: "POST".into(),
            route: "/jobs/{id}/cancel".into(),
            path: format!("/jobs/{n}/cancel"),
            status: 404,
            key: Some((i32::try_from(key_id).unwrap(), "sonarr".into())),
            client: None,
        };
        append(server.db(), entry).await.unwrap();
    }
    let (status, _) = server.post("/queue/pause-all", Some(&key), &json!({})).await;
    assert_eq!(status, 200);

    let total = |path: String| matches(server, &admin, path);
    // Signed in, pausing: the one entry behind 601 newer ones.
    let (n, items) = total("/audit?key=none&action=POST%20/queue/pause-all".into()).await;
    assert_eq!(n, 1, "{items:?}");
    assert_eq!((items[0]["apiKey"].is_null(), items[0]["path"].as_str()), (true, Some("/queue/pause-all")));
    // The key's pause, and the key's entries in all (its creation was signed in).
    let (n, items) = total(format!("/audit?key={key_id}&action=POST+%2Fqueue%2Fpause-all")).await;
    assert_eq!((n, items[0]["apiKey"]["id"].as_i64()), (1, Some(key_id)));
    assert_eq!(total(format!("/audit?key={key_id}")).await.0, 601);
    assert_eq!(total("/audit?action=POST%20/queue/pause-all".into()).await.0, 2);
    assert_eq!(total("/audit?action=POST%20/jobs/%7Bid%7D/cancel&user=admin&key=none".into()).await.0, 0);
    assert_eq!(total("/audit?action=POST%20/jobs/%7Bid%7D/cancel&user=admin".into()).await.0, 600);
    assert_eq!(total("/audit?action=POST%20/jobs/%7Bid%7D/cancel&user=nobody".into()).await.0, 0);
    // An id no key can have matches nothing; empty values keep everything.
    assert_eq!(total("/audit?key=9999999999".into()).await.0, 0);
    assert_eq!(total("/audit?key=&action=&user=".into()).await.0, 603);
    // Pages walk the matches, newest first.
    let (n, items) = total("/audit?action=POST%20/jobs/%7Bid%7D/cancel&page=2&pageSize=500".into()).await;
    assert_eq!((n, items.len(), items[0]["path"].as_str()), (600, 100, Some("/jobs/99/cancel")));
    // Values the document refuses are refused, naming what is allowed.
    for bad in ["key=some", "key=-1", "key=12345678901", "action=pause", "action=post%20/x", "action=POST%20x"] {
        let (status, body) = server.get(&format!("/audit?{bad}"), Some(&admin)).await;
        assert_eq!((status, code(&body)), (400, "invalid_query"), "{bad}: {body}");
    }
    let (status, body) = server.get(&format!("/audit?user={}", "u".repeat(65)), Some(&admin)).await;
    assert_eq!((status, code(&body)), (400, "invalid_query"), "{body}");
}

api_test_on_both_databases!(the_audit_log_is_filtered_by_user_key_and_action_over_the_whole_log);

/// `GET path` as `token`: the page's total and items.
async fn matches(server: &TestServer, token: &str, path: String) -> (u64, Vec<serde_json::Value>) {
    let (status, page) = server.get(&path, Some(token)).await;
    assert_eq!(status, 200, "{path}: {page}");
    (page["total"].as_u64().unwrap(), page["items"].as_array().unwrap().clone())
}
