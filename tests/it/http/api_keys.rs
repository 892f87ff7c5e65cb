//! API keys: shown once, kept as their hash, acting as their user until revoked.

use actix_web::http::Method;
use condense::repo;
use serde_json::{json, Value};

use crate::api_test_on_both_databases;
use crate::common::api::{code, message, TestServer, ADMIN};

/// A request with the key in `X-Api-Key`, as the *arr applications send it.
async fn with_key_header(server: &TestServer, method: Method, path: &str, key: &str) -> (u16, Value) {
    let mut response = awc::Client::default()
        .request(method, server.url(path))
        .insert_header(("X-Api-Key", key))
        .insert_header(("Content-Type", "application/json"))
        .send_body("{}")
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.body().await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// API keys are shown once and kept as their hash, work in `X-Api-Key` and as the bearer
/// token, act as their user (a read-only key as a viewer), cannot become sessions or make
/// keys, stop at once when revoked, and go with their user.
async fn api_keys_act_as_their_user_and_stop_at_once_when_revoked(server: &TestServer) {
    let admin = server.login().await;
    let (status, full) = server.post("/api-keys", Some(&admin), &json!({"name": "sonarr", "scope": "admin"})).await;
    assert_eq!(status, 201, "{full}");
    let full_key = full["key"].as_str().unwrap().to_string();
    assert!(full_key.starts_with("ck_") && full_key.len() >= 40, "{full_key}");
    assert_eq!(
        (&full["scope"], &full["readOnly"], full["prefix"].as_str().map(|p| full_key.starts_with(p))),
        (&json!("admin"), &json!(false), Some(true))
    );
    let (status, read_only) =
        server.post("/api-keys", Some(&admin), &json!({"name": "grafana", "readOnly": true})).await;
    assert_eq!(status, 201, "{read_only}");
    let read_only_key = read_only["key"].as_str().unwrap().to_string();
    assert_eq!(read_only["scope"], "read", "readOnly is still taken, as a read key: {read_only}");
    let (status, body) = server.post("/api-keys", Some(&admin), &json!({"name": "  ", "scope": "read"})).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");
    // A scope is chosen, never defaulted; readOnly cannot contradict it.
    let (status, body) = server.post("/api-keys", Some(&admin), &json!({"name": "what for?"})).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");
    assert!(message(&body).contains("scope is required"), "{body}");
    let (status, body) =
        server.post("/api-keys", Some(&admin), &json!({"name": "x", "scope": "admin", "readOnly": true})).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");
    let (status, body) = server.post("/api-keys", Some(&admin), &json!({"name": "x", "scope": "root"})).await;
    assert_eq!(status, 422, "{body}");

    // Listed without the keys; stored as their hashes only.
    let (status, list) = server.get("/api-keys", Some(&admin)).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<(&str, &str, bool, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap(),
                k["scope"].as_str().unwrap(),
                k["readOnly"].as_bool().unwrap(),
                k["username"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(names, [("sonarr", "admin", false, ADMIN), ("grafana", "read", true, ADMIN)]);
    assert!(list[0]["lastUsedAt"].is_null(), "{list}");
    assert!(!list.to_string().contains(&full_key) && !list.to_string().contains(&read_only_key), "{list}");
    for (key, _) in repo::api_keys::list(server.db()).await.unwrap() {
        assert!(key.key_hash != full_key && key.key_hash != read_only_key && key.key_hash.len() == 64, "{key:?}");
    }

    // The full key acts as its administrator, in either place.
    assert_eq!(server.post("/queue/pause-all", Some(&full_key), &json!({})).await.0, 200);
    assert_eq!(with_key_header(server, Method::POST, "/api/queue/resume-all", &full_key).await.0, 200);
    assert_eq!(server.get("/settings", Some(&full_key)).await.0, 200);
    // The read-only key reads as a viewer and changes nothing.
    assert_eq!(with_key_header(server, Method::GET, "/jobs", &read_only_key).await.0, 200);
    let (status, body) = with_key_header(server, Method::POST, "/queue/pause-all", &read_only_key).await;
    assert_eq!((status, code(&body)), (403, "forbidden"), "{body}");
    assert_eq!(server.get("/settings", Some(&read_only_key)).await.0, 403);
    let (_, list) = server.get("/api-keys", Some(&admin)).await;
    assert!(list[0]["lastUsedAt"].is_string() && list[1]["lastUsedAt"].is_string(), "{list}");

    // A key is not a session, and makes no keys.
    for path in ["/auth/refresh", "/auth/logout", "/api-keys"] {
        let (status, body) = server.post(path, Some(&full_key), &json!({"name": "child"})).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    for garbage in ["ck_not-a-key-at-all", "not-a-key"] {
        let (status, body) = with_key_header(server, Method::GET, "/jobs", garbage).await;
        assert_eq!((status, code(&body)), (401, "unauthorized"), "{garbage}: {body}");
    }
    // Its changes are audited as its user, naming the key and the client.
    let (_, log) = server.get("/audit?pageSize=3", Some(&admin)).await;
    assert_eq!(
        (&log["items"][0]["username"], &log["items"][0]["route"], &log["items"][0]["apiKey"]),
        (&json!(ADMIN), &json!("/api-keys"), &json!({"id": full["id"], "name": "sonarr"})),
        "{log}"
    );
    assert_eq!(log["items"][0]["client"], "127.0.0.1", "{log}");

    // Revoked: refused from the next request on.
    let id = full["id"].as_i64().unwrap();
    assert_eq!(server.delete(&format!("/api-keys/{id}"), Some(&admin)).await.0, 204);
    let (status, body) = server.post("/queue/pause-all", Some(&full_key), &json!({})).await;
    assert_eq!((status, code(&body)), (401, "unauthorized"), "{body}");
    assert!(message(&body).contains("revoked"), "{body}");
    assert_eq!(server.delete(&format!("/api-keys/{id}"), Some(&admin)).await.0, 404);

    // A deleted user's keys go with it.
    let (status, _) = server
        .post(
            "/users",
            Some(&admin),
            &json!({"username": "keeper", "password": "keeper's long password", "role": "admin"}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, body) = server.login_as("keeper", "keeper's long password").await;
    let keeper = body["token"].as_str().unwrap().to_string();
    let (status, made) = server.post("/api-keys", Some(&keeper), &json!({"name": "keeper's", "scope": "read"})).await;
    assert_eq!(status, 201, "{made}");
    let keeper_key = made["key"].as_str().unwrap().to_string();
    assert_eq!(server.get("/jobs", Some(&keeper_key)).await.0, 200);
    assert_eq!(server.delete("/users/keeper", Some(&admin)).await.0, 204);
    assert_eq!(server.get("/jobs", Some(&keeper_key)).await.0, 401);
    let (_, list) = server.get("/api-keys", Some(&admin)).await;
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
}

api_test_on_both_databases!(api_keys_act_as_their_user_and_stop_at_once_when_revoked);
