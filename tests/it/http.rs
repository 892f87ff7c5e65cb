//! The REST API over a real socket (`TestServer`): authentication on every endpoint, login
//! and its rate limit, each resource's reads, writes and validation, on SQLite and
//! PostgreSQL, under both the bare and the /api prefix.

use actix_web::http::Method;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Duration, Utc};
use condense::domain::access::UserRole;
use condense::domain::job::JobStatus;
use condense::domain::license::Tier;
use condense::domain::node::{NodeRole, NodeStatus};
use condense::http::{endpoints, Access};
use condense::license::LicensePayload;
use condense::repo;
use serde_json::{json, Value};

use crate::api_test_on_both_databases;
use crate::common::api::{
    code, concrete, message, TestServer, ADMIN, ADMIN_PASSWORD, CLUSTER_TOKEN, JWT_SECRET, PREFIXES, TRUSTED_PROXY,
};

/// A 404 or 405 from the router, not from a handler: the route is not registered.
fn is_unrouted(status: u16, body: &Value) -> bool {
    (status == 404 && body["error"]["message"].as_str().is_some_and(|m| m.starts_with("no route")))
        || (status == 405 && code(body) == "method_not_allowed")
}

fn token_with(secret: &str, claims: &Value) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

// ---------------------------------------------------------------- authentication

#[actix_web::test]
async fn every_endpoint_but_health_and_login_needs_a_token() {
    let server = TestServer::sqlite().await;
    let mut token = server.login().await;
    for endpoint in endpoints() {
        for prefix in PREFIXES {
            let path = format!("{prefix}{}", concrete(endpoint.path));
            let body = matches!(endpoint.method, Method::POST | Method::PUT).then(|| json!({}));
            let what = format!("{} {path}", endpoint.method);

            let (status, headers, bytes) = server
                .send(
                    endpoint.method.clone(),
                    &path,
                    None,
                    body.as_ref().map(|b| ("application/json", serde_json::to_vec(b).unwrap())),
                )
                .await;
            let reply: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            match endpoint.access {
                Access::Token => {
                    assert_eq!(status, 401, "{what} without a token: {reply}");
                    assert_eq!(code(&reply), "unauthorized", "{what}");
                    assert!(message(&reply).contains("Authorization: Bearer"), "{what}: {reply}");
                    assert_eq!(headers.get("www-authenticate").unwrap(), "Bearer", "{what}");
                }
                Access::Public => assert_ne!(status, 401, "{what} is public: {reply}"),
            }

            let (status, reply) = server.call(endpoint.method.clone(), &path, Some(&token), body.as_ref()).await;
            assert_ne!(status, 401, "{what} with a token: {reply}");
            assert!(status < 500, "{what} with a token: {status} {reply}");
            assert!(!is_unrouted(status, &reply), "{what} is not routed: {status} {reply}");
            if endpoint.path == "/auth/logout" {
                // It revoked the token.
                token = server.login().await;
            }
        }
    }
    server.finish().await;
}

#[actix_web::test]
async fn expired_forged_unsigned_and_garbage_tokens_are_refused_everywhere() {
    let server = TestServer::sqlite().await;
    let valid = server.login().await;
    let now = Utc::now().timestamp();
    let expired = token_with(JWT_SECRET, &json!({"sub": ADMIN, "iat": now - 7200, "exp": now - 3600}));
    let wrong_key =
        token_with("another-secret-another-secret-0000", &json!({"sub": ADMIN, "iat": now, "exp": now + 3600}));
    let header_none = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(json!({"sub": ADMIN, "iat": now, "exp": now + 3600}).to_string());
    let alg_none = format!("{header_none}.{payload}.");
    let [head, _, signature] = valid.split('.').collect::<Vec<_>>()[..] else { panic!("{valid}") };
    let other_payload = URL_SAFE_NO_PAD.encode(json!({"sub": "root", "iat": now, "exp": now + 86400}).to_string());
    let tampered = format!("{head}.{other_payload}.{signature}");
    let hs512 = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS512),
        &json!({"sub": ADMIN, "iat": now, "exp": now + 3600}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .unwrap();
    let unknown_user = token_with(JWT_SECRET, &json!({"sub": "ghost", "uid": 999_999, "iat": now, "exp": now + 3600}));
    // Signed and current, but from before tokens named the user's id: bound to nothing.
    let unbound = token_with(JWT_SECRET, &json!({"sub": ADMIN, "iat": now, "exp": now + 3600}));

    let cases: Vec<(&str, String, &str)> = vec![
        ("expired", format!("Bearer {expired}"), "expired"),
        ("wrong key", format!("Bearer {wrong_key}"), "signature"),
        ("alg none", format!("Bearer {alg_none}"), "malformed"),
        ("tampered", format!("Bearer {tampered}"), "signature"),
        ("HS512", format!("Bearer {hs512}"), "HS256"),
        ("garbage", "Bearer not-a-token".to_string(), "malformed"),
        ("unknown user", format!("Bearer {unknown_user}"), "no longer exists"),
        ("no user id", format!("Bearer {unbound}"), "names no user id"),
        ("basic scheme", "Basic YWRtaW46cGFzc3dvcmQ=".to_string(), "Bearer <token>"),
        ("empty bearer", "Bearer ".to_string(), "Bearer <token>"),
        ("bare token", valid.clone(), "Bearer <token>"),
    ];
    for endpoint in endpoints().into_iter().filter(|e| e.access == Access::Token) {
        for prefix in PREFIXES {
            let path = format!("{prefix}{}", concrete(endpoint.path));
            for (name, authorization, expected) in &cases {
                let mut response = awc::Client::default()
                    .request(endpoint.method.clone(), server.url(&path))
                    .insert_header(("Authorization", authorization.as_str()))
                    .send()
                    .await
                    .unwrap();
                let body: Value = serde_json::from_slice(&response.body().await.unwrap()).unwrap();
                let what = format!("{} {path} with {name}", endpoint.method);
                assert_eq!(response.status().as_u16(), 401, "{what}: {body}");
                assert_eq!(code(&body), "unauthorized", "{what}");
                assert!(message(&body).contains(expected), "{what}: {body}");
            }
        }
    }
    // The valid token still works in the header.
    assert_eq!(server.get("/libraries", Some(&valid)).await.0, 200);
    server.finish().await;
}

/// Logs in a new user with `role` (created by the admin through the API); its token.
async fn user_with_role(server: &TestServer, admin: &str, role: UserRole) -> String {
    let name = format!("a-{role}");
    let password = "the password of a role";
    let (status, body) =
        server.post("/users", Some(admin), &json!({"username": name, "password": password, "role": role})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["role"], role.as_str());
    let (status, body) = server.login_as(&name, password).await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_string()
}

/// Every route under both prefixes, called by every role: a role below the route table's
/// gets 403 before anything else is looked at, a role at or above it is never refused.
#[actix_web::test]
async fn every_route_answers_every_role_as_the_route_table_says() {
    let server = TestServer::sqlite().await;
    let admin = server.login().await;
    let mut tokens = vec![(UserRole::Admin, admin.clone())];
    for role in [UserRole::Operator, UserRole::Viewer] {
        tokens.push((role, user_with_role(&server, &admin, role).await));
    }
    let mut refused = 0;
    for endpoint in endpoints().into_iter().filter(|e| e.access == Access::Token) {
        for prefix in PREFIXES {
            let path = format!("{prefix}{}", concrete(endpoint.path));
            let body = matches!(endpoint.method, Method::POST | Method::PUT).then(|| json!({}));
            for (role, token) in &mut tokens {
                let (status, reply) = server.call(endpoint.method.clone(), &path, Some(token), body.as_ref()).await;
                let what = format!("{} {path} as {role} (needs {})", endpoint.method, endpoint.role);
                if role.allows(endpoint.role) {
                    assert!(status != 401 && status != 403 && status < 500, "{what}: {status} {reply}");
                    assert!(!is_unrouted(status, &reply), "{what} is not routed: {status} {reply}");
                } else {
                    assert_eq!(status, 403, "{what}: {reply}");
                    assert_eq!(code(&reply), "forbidden", "{what}");
                    assert!(message(&reply).contains(endpoint.role.as_str()), "{what}: {reply}");
                    refused += 1;
                }
                if endpoint.path == "/auth/logout" {
                    // It revoked the token: a new one for the same user.
                    let name = if *role == UserRole::Admin { ADMIN.to_string() } else { format!("a-{role}") };
                    let password = if *role == UserRole::Admin { ADMIN_PASSWORD } else { "the password of a role" };
                    let (status, body) = server.login_as(&name, password).await;
                    assert_eq!(status, 200, "{body}");
                    *token = body["token"].as_str().unwrap().to_string();
                }
            }
        }
    }
    assert!(refused > 40, "{refused}");
    // The feed is the viewer's too, on every mount.
    for (role, token) in &tokens {
        for path in ["/ws", "/api/ws", "/"] {
            let (response, _) =
                awc::Client::new().ws(format!("{}?token={token}", server.url(path))).connect().await.unwrap();
            assert_eq!(response.status().as_u16(), 101, "{path} as {role}");
        }
    }
    server.finish().await;
}

/// A role change takes effect at once: the user's older tokens are revoked. The last
/// administrator cannot be demoted or deleted.
#[actix_web::test]
async fn a_role_change_revokes_the_users_tokens_and_an_admin_always_remains() {
    let server = TestServer::sqlite().await;
    let admin = server.login().await;
    let viewer = user_with_role(&server, &admin, UserRole::Viewer).await;
    assert_eq!(server.post("/queue/pause-all", Some(&viewer), &json!({})).await.0, 403);
    let (status, body) = server.put("/users/a-viewer/role", Some(&admin), &json!({"role": "operator"})).await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = server.post("/queue/pause-all", Some(&viewer), &json!({})).await;
    assert_eq!(status, 401, "{body}");
    assert!(message(&body).contains("revoked"), "{body}");
    let (status, body) = server.login_as("a-viewer", "the password of a role").await;
    assert_eq!(status, 200, "{body}");
    let operator = body["token"].as_str().unwrap().to_string();
    assert_eq!(server.post("/queue/pause-all", Some(&operator), &json!({})).await.0, 200);
    assert_eq!(server.post("/queue/resume-all", Some(&operator), &json!({})).await.0, 200);
    assert_eq!(server.get("/users", Some(&operator)).await.0, 403);
    let (status, users) = server.get("/users", Some(&admin)).await;
    assert_eq!(status, 200);
    let roles: Vec<(&str, &str)> = users
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["username"].as_str().unwrap(), u["role"].as_str().unwrap()))
        .collect();
    assert_eq!(roles, [(ADMIN, "admin"), ("a-viewer", "operator")]);

    // The only administrator stays one.
    let (status, body) = server.put(&format!("/users/{ADMIN}/role"), Some(&admin), &json!({"role": "viewer"})).await;
    assert_eq!((status, code(&body)), (409, "conflict"), "{body}");
    assert!(message(&body).contains("last administrator"), "{body}");
    let (status, body) = server.delete(&format!("/users/{ADMIN}"), Some(&admin)).await;
    assert_eq!((status, code(&body)), (409, "conflict"), "{body}");
    assert_eq!(server.get("/users", Some(&admin)).await.0, 200, "the refused change revoked nothing");
    let (status, body) = server.put("/users/a-viewer/role", Some(&admin), &json!({"role": "superuser"})).await;
    assert_eq!(status, 422, "{body}");
    // A user created without a role is a viewer.
    let (status, body) =
        server.post("/users", Some(&admin), &json!({"username": "plain", "password": "long enough password"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["role"], "viewer");
    server.finish().await;
}

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

/// Anyone signed in changes their own password by giving the current one: every older token
/// of theirs is refused, the new password logs in; a wrong current password changes nothing.
/// `/auth/me` names the caller and the role it acts with.
#[actix_web::test]
async fn users_change_their_own_password_and_see_who_they_are() {
    let server = TestServer::sqlite().await;
    let admin = server.login().await;
    let viewer = user_with_role(&server, &admin, UserRole::Viewer).await;
    let (status, me) = server.get("/auth/me", Some(&viewer)).await;
    assert_eq!(
        (status, me),
        (200, json!({"username": "a-viewer", "role": "viewer", "apiKey": false, "keyScope": null}))
    );
    let change = |current: &str, new: &str| json!({"currentPassword": current, "newPassword": new});
    let (status, body) =
        server.put("/auth/password", Some(&viewer), &change("not it", "a new and long passphrase")).await;
    assert_eq!((status, code(&body)), (403, "forbidden"), "{body}");
    assert_eq!(server.get("/auth/me", Some(&viewer)).await.0, 200, "a refused change revoked nothing");
    let (status, body) = server.put("/auth/password", Some(&viewer), &change("the password of a role", "short")).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");
    let (status, body) = server
        .put("/auth/password", Some(&viewer), &change("the password of a role", "a new and long passphrase"))
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = server.get("/auth/me", Some(&viewer)).await;
    assert_eq!(status, 401, "the old token still works: {body}");
    assert_eq!(server.login_as("a-viewer", "the password of a role").await.0, 401);
    assert_eq!(server.login_as("a-viewer", "a new and long passphrase").await.0, 200);
    server.finish().await;
}

/// A Sonarr import, as Sonarr sends it with the key in the URL, makes the file a job at once,
/// after the path mapping, ahead of the older QUEUED jobs; the connection test answers 200;
/// a file in no library is refused with the reason; only an operator's key is taken, and
/// never a login token in the URL. A user raises or lowers a job the same way.
#[actix_web::test]
async fn an_arr_import_is_queued_ahead_of_the_backlog() {
    let server = TestServer::sqlite().await;
    let admin = server.login().await;
    let (_dir, paths) = media_dirs(&["tv"]);
    let show = std::path::Path::new(&paths[0]).join("Show");
    std::fs::create_dir_all(&show).unwrap();
    for name in ["e1.mkv", "e2.mkv", "e3.mkv"] {
        std::fs::write(show.join(name), b"not looked at before an encode").unwrap();
    }
    let (status, library) = server
        .post(
            "/libraries",
            Some(&admin),
            &json!({"name": "TV", "paths": [paths[0]], "encoder": "libx265", "quality": 28, "watch": false}),
        )
        .await;
    assert_eq!(status, 201, "{library}");
    let (status, report) = server.post(&format!("/libraries/{}/scan", library["id"]), Some(&admin), &json!({})).await;
    assert_eq!(status, 200, "{report}");
    let backlog = repo::jobs::queued_next(server.db(), 10).await.unwrap();
    assert_eq!(backlog.len(), 3, "{backlog:?}");
    std::fs::write(show.join("e9.mkv"), b"imported just now").unwrap();

    let (status, mappings) = server
        .put("/settings/arr", Some(&admin), &json!({"pathMappings": [{"from": "/data/tv", "to": paths[0]}]}))
        .await;
    assert_eq!(status, 200, "{mappings}");
    let (_, key) = server.post("/api-keys", Some(&admin), &json!({"name": "sonarr", "scope": "integration"})).await;
    let key = key["key"].as_str().unwrap().to_string();
    let sonarr = |event: &str, path: &str| {
        json!({
            "eventType": event,
            "instanceName": "Sonarr",
            "series": {"id": 1, "title": "Show", "path": "/data/tv/Show", "tvdbId": 1},
            "episodes": [{"id": 9, "episodeNumber": 9, "seasonNumber": 1, "title": "Nine"}],
            "episodeFile": {"id": 9, "relativePath": "e9.mkv", "path": path},
            "isUpgrade": false
        })
    };
    let hook = |query: String, body: Value| {
        let server = &server;
        async move { server.post(&format!("/integrations/arr{query}"), None, &body).await }
    };
    let (status, answer) = hook(format!("?apikey={key}"), sonarr("Test", "")).await;
    assert_eq!((status, &answer["outcome"]), (200, &json!("test")), "{answer}");
    let (status, answer) = hook(format!("?apikey={key}"), sonarr("Download", "/data/tv/Show/e9.mkv")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "queued", "{answer}");
    let local = show.join("e9.mkv").display().to_string();
    assert_eq!(answer["path"], local.as_str(), "{answer}");
    assert_eq!(answer["job"]["priority"], 5, "{answer}");
    // Next in line, ahead of the three queued before it.
    let order: Vec<String> =
        repo::jobs::queued_next(server.db(), 10).await.unwrap().into_iter().map(|job| job.file_name).collect();
    let before: Vec<String> = backlog.iter().map(|job| job.file_name.clone()).collect();
    assert_eq!(order[0], "e9.mkv");
    assert_eq!(order[1..], before[..], "the backlog keeps its order behind it");
    // A user lowers it back, and raises another.
    let id = answer["job"]["id"].as_i64().unwrap();
    let (status, lowered) = server.post(&format!("/jobs/{id}/priority"), Some(&admin), &json!({"priority": -1})).await;
    assert_eq!((status, &lowered["priority"]), (200, &json!(-1)), "{lowered}");
    let e3 = backlog.iter().find(|job| job.file_name == "e3.mkv").unwrap().id;
    assert_eq!(server.post(&format!("/jobs/{e3}/priority"), Some(&admin), &json!({"priority": 10})).await.0, 200);
    let order: Vec<String> =
        repo::jobs::queued_next(server.db(), 10).await.unwrap().into_iter().map(|job| job.file_name).collect();
    let mut expected = vec!["e3.mkv".to_string()];
    expected.extend(before.iter().filter(|name| *name != "e3.mkv").cloned());
    expected.push("e9.mkv".to_string());
    assert_eq!(order, expected);
    let (status, body) = server.post(&format!("/jobs/{id}/priority"), Some(&admin), &json!({"priority": 11})).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");

    // Refusals: a file in no library, an event naming no file.
    let (status, body) = hook(format!("?apikey={key}"), sonarr("Download", "/elsewhere/x.mkv")).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");
    assert!(message(&body).contains("is not a media file in any library"), "{body}");
    let (status, body) = hook(format!("?apikey={key}"), json!({"eventType": "Download"})).await;
    assert_eq!(status, 422, "{body}");
    let (status, answer) = hook(format!("?apikey={key}"), sonarr("Grab", "")).await;
    assert_eq!((status, &answer["outcome"]), (200, &json!("ignored")), "{answer}");
    // Who may call it: an integration or operate key; never a login token in the URL, nor a
    // read key.
    assert_eq!(hook(format!("?apikey={admin}"), sonarr("Test", "")).await.0, 401);
    assert_eq!(hook(String::new(), sonarr("Test", "")).await.0, 401);
    let (_, read_only) = server.post("/api-keys", Some(&admin), &json!({"name": "ro", "readOnly": true})).await;
    let read_only = read_only["key"].as_str().unwrap();
    assert_eq!(hook(format!("?apikey={read_only}"), sonarr("Test", "")).await.0, 403);
    // The query key is for the integrations only.
    assert_eq!(server.get(&format!("/jobs?apikey={key}"), None).await.0, 401);
    server.finish().await;
}

/// Query strings end up in proxies' and servers' logs: a token there is read on the
/// WebSocket routes only (tests/it/actions.rs connects to each with one).
#[actix_web::test]
async fn a_token_in_the_query_string_is_refused_except_on_the_websocket() {
    let server = TestServer::sqlite().await;
    let valid = server.login().await;
    let mut checked = 0;
    for endpoint in endpoints().into_iter().filter(|e| e.access == Access::Token && !e.websocket) {
        for prefix in PREFIXES {
            let path = format!("{prefix}{}?token={valid}", concrete(endpoint.path));
            let body = matches!(endpoint.method, Method::POST | Method::PUT).then(|| json!({}));
            let (status, reply) = server.call(endpoint.method.clone(), &path, None, body.as_ref()).await;
            let what = format!("{} {path}", endpoint.method);
            assert_eq!(status, 401, "{what}: {reply}");
            assert!(message(&reply).contains("Authorization: Bearer"), "{what}: {reply}");
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked}");
    server.finish().await;
}

fn claims_of(token: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap()
}

/// A password change revokes every token of the user (a stolen one included), and a
/// logout every token of the caller, refreshed ones too.
async fn password_change_and_logout_revoke_older_tokens(server: &TestServer) {
    let stolen = server.login().await;
    let own = server.login().await;
    assert_eq!(server.get("/libraries", Some(&stolen)).await.0, 200);
    let new_password = "another password, long enough";
    let (status, body) =
        server.put(&format!("/users/{ADMIN}/password"), Some(&own), &json!({"password": new_password})).await;
    assert_eq!(status, 204, "{body}");
    for (name, token) in [("stolen", &stolen), ("own", &own)] {
        for prefix in PREFIXES {
            let (status, body) = server.get(&format!("{prefix}/libraries"), Some(token)).await;
            assert_eq!(status, 401, "{name}: {body}");
            assert!(message(&body).contains("revoked"), "{name}: {body}");
            let (status, body) = server.post(&format!("{prefix}/auth/refresh"), Some(token), &json!({})).await;
            assert_eq!(status, 401, "{name} refreshed: {body}");
        }
        let ws = awc::Client::new().ws(format!("{}?token={token}", server.url("/ws"))).connect().await;
        assert!(
            matches!(ws, Err(awc::error::WsClientError::InvalidResponseStatus(s)) if s.as_u16() == 401),
            "{name}: the feed took a revoked token"
        );
    }
    let (status, body) = server.login_as(ADMIN, new_password).await;
    assert_eq!(status, 200, "{body}");
    let fresh = body["token"].as_str().unwrap().to_string();
    assert_eq!(server.get("/libraries", Some(&fresh)).await.0, 200);
    let (status, body) = server.post("/auth/refresh", Some(&fresh), &json!({})).await;
    assert_eq!(status, 200, "{body}");
    let refreshed = body["token"].as_str().unwrap().to_string();

    let (status, body) = server.post("/api/auth/logout", Some(&fresh), &json!({})).await;
    assert_eq!(status, 204, "{body}");
    for token in [&fresh, &refreshed] {
        let (status, body) = server.get("/libraries", Some(token)).await;
        assert_eq!(status, 401, "{body}");
        assert!(message(&body).contains("revoked"), "{body}");
    }
    let (status, body) = server.login_as(ADMIN, new_password).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.get("/libraries", Some(body["token"].as_str().unwrap())).await.0, 200);
}
api_test_on_both_databases!(password_change_and_logout_revoke_older_tokens);

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

#[actix_web::test]
async fn refresh_never_carries_a_session_past_its_maximum_lifetime() {
    const MAX_HOURS: i64 = 720;
    let server = TestServer::sqlite().await;
    let now = Utc::now().timestamp();
    // A login starts a session; refreshes keep its start.
    let token = server.login().await;
    let started = claims_of(&token)["auth_time"].as_i64().unwrap();
    assert!((started - now).abs() <= 5, "{started} vs {now}");
    let (status, body) = server.post("/auth/refresh", Some(&token), &json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(claims_of(body["token"].as_str().unwrap())["auth_time"].as_i64(), Some(started));

    // A session a minute short of the maximum: the new token ends with the session.
    let ends = now + 60;
    let late = token_with(
        JWT_SECRET,
        &json!({"sub": ADMIN, "uid": 1, "iat": now, "exp": now + 3600, "ver": 0, "auth_time": ends - MAX_HOURS * 3600}),
    );
    let (status, body) = server.post("/auth/refresh", Some(&late), &json!({})).await;
    assert_eq!(status, 200, "{body}");
    let refreshed = claims_of(body["token"].as_str().unwrap());
    assert_eq!(refreshed["exp"].as_i64(), Some(ends), "{refreshed}");
    let expires_at: DateTime<Utc> = DateTime::parse_from_rfc3339(body["expiresAt"].as_str().unwrap()).unwrap().into();
    assert_eq!(expires_at.timestamp(), ends);

    // Past the maximum: no new token, whatever the old one's own expiry.
    let over = token_with(
        JWT_SECRET,
        &json!({"sub": ADMIN, "uid": 1, "iat": now, "exp": now + 3600, "ver": 0, "auth_time": now - MAX_HOURS * 3600 - 1}),
    );
    for prefix in PREFIXES {
        let (status, body) = server.post(&format!("{prefix}/auth/refresh"), Some(&over), &json!({})).await;
        assert_eq!(status, 401, "{body}");
        assert_eq!(code(&body), "unauthorized");
        assert!(message(&body).contains("maximum lifetime"), "{body}");
    }
    server.finish().await;
}

async fn login_and_refresh(server: &TestServer) {
    let (status, wrong_password) = server.login_as(ADMIN, "not the password").await;
    assert_eq!(status, 401, "{wrong_password}");
    assert_eq!(code(&wrong_password), "unauthorized");
    let (status, unknown_user) = server.login_as("nobody", ADMIN_PASSWORD).await;
    assert_eq!(status, 401, "{unknown_user}");
    // The same answer: it does not tell which usernames exist.
    assert_eq!(unknown_user, wrong_password);

    for prefix in PREFIXES {
        let before = Utc::now();
        let (status, body) = server
            .post(&format!("{prefix}/auth/login"), None, &json!({"username": ADMIN, "password": ADMIN_PASSWORD}))
            .await;
        assert_eq!(status, 200, "{body}");
        let token = body["token"].as_str().unwrap().to_string();
        let expires_at: DateTime<Utc> =
            DateTime::parse_from_rfc3339(body["expiresAt"].as_str().unwrap()).unwrap().into();
        let ttl = expires_at - before;
        assert!((ttl - Duration::hours(12)).num_seconds().abs() <= 5, "{ttl}");
        // The token's claims are what the brief promises: sub, iat, exp.
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert_eq!(claims["sub"], ADMIN);
        assert_eq!(claims["exp"].as_i64().unwrap(), expires_at.timestamp());
        assert!(claims["iat"].is_i64());

        let (status, refreshed) = server.post(&format!("{prefix}/auth/refresh"), Some(&token), &json!({})).await;
        assert_eq!(status, 200, "{refreshed}");
        let new_token = refreshed["token"].as_str().unwrap();
        assert!(refreshed["expiresAt"].as_str().unwrap() >= body["expiresAt"].as_str().unwrap());
        assert_eq!(server.get(&format!("{prefix}/users"), Some(new_token)).await.0, 200);
        let (status, body) = server.post(&format!("{prefix}/auth/refresh"), None, &json!({})).await;
        assert_eq!((status, code(&body)), (401, "unauthorized"));
    }
}
api_test_on_both_databases!(login_and_refresh);

#[actix_web::test]
async fn failed_logins_slow_down_for_that_client_and_user() {
    let server = TestServer::sqlite().await;
    for attempt in 1..=3 {
        let (status, body) = server.login_as(ADMIN, &format!("wrong password {attempt}")).await;
        assert_eq!(status, 401, "attempt {attempt}: {body}");
    }
    // Slowed now: even the right password waits, on both prefixes.
    let (status, body) = server.login_as(ADMIN, ADMIN_PASSWORD).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(code(&body), "too_many_requests");
    assert!(message(&body).contains("try again in 1 seconds"), "{body}");
    let (status, body) =
        server.post("/api/auth/login", None, &json!({"username": ADMIN, "password": ADMIN_PASSWORD})).await;
    assert_eq!((status, code(&body)), (429, "too_many_requests"));
    // Another username from this client is not slowed, nor this one from another client.
    assert_eq!(server.login_as("someone-else", "whatever-it-is").await.0, 401);
    assert_eq!(login_from(&server, "127.0.0.3", None, ADMIN, ADMIN_PASSWORD).await, 200);
    // After the wait, the right password gets in.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(server.login_as(ADMIN, ADMIN_PASSWORD).await.0, 200);
    // Tokens issued before keep working: only logins are limited.
    let grant =
        condense::security::Grant { user_id: 1, username: ADMIN, version: 0, session_started: Utc::now().timestamp() };
    let token = condense::security::issue_token(JWT_SECRET, &grant, 1, 720, Utc::now()).unwrap().0;
    assert_eq!(server.get("/users", Some(&token)).await.0, 200);
    server.finish().await;
}

#[actix_web::test]
async fn a_successful_login_clears_the_failures() {
    let server = TestServer::sqlite().await;
    for _ in 0..2 {
        assert_eq!(server.login_as(ADMIN, "wrong password").await.0, 401);
    }
    server.login().await;
    for _ in 0..3 {
        assert_eq!(server.login_as(ADMIN, "wrong password").await.0, 401);
    }
    assert_eq!(server.login_as(ADMIN, ADMIN_PASSWORD).await.0, 429);
    server.finish().await;
}

/// POST /auth/login over a connection from `source` (a loopback address), with an
/// X-Forwarded-For header when given; the status code.
async fn login_from(server: &TestServer, source: &str, forwarded_for: Option<&str>, user: &str, password: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let target: std::net::SocketAddr = server.url("").trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(target).await.unwrap();
    let body = json!({"username": user, "password": password}).to_string();
    let header = forwarded_for.map(|value| format!("X-Forwarded-For: {value}\r\n")).unwrap_or_default();
    let request = format!(
        "POST /auth/login HTTP/1.1\r\nHost: condense\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{header}Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let response = String::from_utf8_lossy(&response);
    response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or_else(|| panic!("{response}"))
}

/// Three wrong passwords from `source` (as `forwarded_for`, when given) for the admin, then
/// at once a fourth attempt with the right one: its status. The wait after the third failure
/// is a second from its answer, far longer than the next request takes.
async fn right_password_after_three_failures(server: &TestServer, source: &str, forwarded_for: [&str; 4]) -> u16 {
    for (attempt, forwarded) in forwarded_for.iter().take(3).enumerate() {
        let status = login_from(server, source, Some(*forwarded).filter(|f| !f.is_empty()), ADMIN, "wrong").await;
        assert_eq!(status, 401, "attempt {attempt} from {source} as {forwarded:?}");
    }
    login_from(server, source, Some(forwarded_for[3]).filter(|f| !f.is_empty()), ADMIN, ADMIN_PASSWORD).await
}

/// The lockout the hard per-username lock allowed: anyone could keep `admin` out for ever.
#[actix_web::test]
async fn a_hundred_failed_logins_from_one_address_do_not_stop_the_user_from_another() {
    let server = TestServer::sqlite().await;
    let mut refused = 0;
    for attempt in 0..100 {
        let status = login_from(&server, "127.0.0.3", None, ADMIN, &format!("guess {attempt}")).await;
        assert!(status == 401 || status == 429, "{status}");
        refused += u32::from(status == 429);
    }
    assert!(refused >= 90, "the attacker was not slowed: {refused} refusals of 100");
    // The real user, from their own address, at once.
    assert_eq!(login_from(&server, "127.0.0.1", None, ADMIN, ADMIN_PASSWORD).await, 200);
    assert_eq!(server.login_as(ADMIN, ADMIN_PASSWORD).await.0, 200);
    server.finish().await;
}

/// Behind a trusted proxy (the test server trusts 127.0.0.2) each forwarded client is
/// counted apart; from any other peer the header is ignored, so a client cannot dodge the
/// limit by forging it.
/// 1,000 failed logins from one IPv6 /64, each from another address in it (behind the
/// trusted proxy): slowed after the first few; the real user, from another network, logs in
/// at once; the failures are in the audit log with the client's address.
#[actix_web::test]
async fn a_thousand_failed_logins_from_one_64_do_not_stop_the_real_user() {
    let server = TestServer::sqlite().await;
    let mut refused = 0;
    for n in 0..1000u32 {
        let attacker = format!("2001:db8:bad:1:{:x}:{:x}::1", n >> 8, n & 0xff);
        let status = login_from(&server, TRUSTED_PROXY, Some(&attacker), ADMIN, &format!("guess {n}")).await;
        assert!(status == 401 || status == 429, "{status}");
        refused += u32::from(status == 429);
    }
    assert!(refused >= 980, "the /64 was not slowed: {refused} refusals of 1000");
    assert_eq!(login_from(&server, TRUSTED_PROXY, Some("2001:db8:600d::7"), ADMIN, ADMIN_PASSWORD).await, 200);
    let token = server.login().await;
    let (_, log) = server.get("/audit?pageSize=500", Some(&token)).await;
    let failed: Vec<&Value> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["route"] == "/auth/login" && entry["status"] == 401)
        .collect();
    assert_eq!(failed.len(), 1000 - refused as usize, "{log}");
    for entry in failed {
        assert!(entry["client"].as_str().is_some_and(|c| c.starts_with("2001:db8:bad:1:")), "{entry}");
        assert_eq!(entry["username"], ADMIN, "{entry}");
    }
    server.finish().await;
}

#[actix_web::test]
async fn forwarded_for_names_the_client_only_behind_a_trusted_proxy() {
    use crate::common::api::TRUSTED_PROXY;
    let server = TestServer::sqlite().await;
    // Through the proxy: the forwarded client is slowed...
    let one = "203.0.113.7";
    assert_eq!(right_password_after_three_failures(&server, TRUSTED_PROXY, [one; 4]).await, 429);
    // ...and read from the header's right end: an entry forged left of it changes nothing.
    let forged = "203.0.113.9, 203.0.113.7";
    assert_eq!(login_from(&server, TRUSTED_PROXY, Some(forged), ADMIN, ADMIN_PASSWORD).await, 429);
    // Another client behind the same proxy is not.
    assert_eq!(login_from(&server, TRUSTED_PROXY, Some("203.0.113.8"), ADMIN, ADMIN_PASSWORD).await, 200);

    // An untrusted peer naming a new client in every request is still counted as itself.
    let forged = ["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"];
    assert_eq!(right_password_after_three_failures(&server, "127.0.0.4", forged).await, 429);
    server.finish().await;
}

// ---------------------------------------------------------------- request bodies

/// Actions (refresh, logout, job and queue actions, scans, a notification's test) take no
/// body; the rest take JSON.
fn takes_body(path: &str) -> bool {
    path != "/auth/refresh"
        && path != "/auth/logout"
        && !path.starts_with("/jobs/{id}/")
        && !path.starts_with("/queue/")
        && !path.ends_with("/scan")
        && !path.ends_with("/forecast")
        && !path.ends_with("/revoke")
        && !path.ends_with("/test")
}

#[actix_web::test]
async fn malformed_json_unknown_fields_and_wrong_types_are_client_errors() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let with_body: Vec<_> = endpoints()
        .into_iter()
        .filter(|e| matches!(e.method, Method::POST | Method::PUT) && takes_body(e.path))
        .collect();
    assert!(with_body.len() >= 7, "{with_body:?}");
    for endpoint in with_body {
        for prefix in PREFIXES {
            let path = format!("{prefix}{}", endpoint.path.replace("{id}", "1").replace("{username}", ADMIN));
            let what = format!("{} {path}", endpoint.method);
            // serde reads a body front to back: an unknown field met before the syntax error
            // is reported as such (422), so the malformed bodies here fail before any field.
            let cases: [(&str, &[u8], u16, &str); 6] = [
                ("application/json", b"{\"nam", 400, "malformed_json"),
                ("application/json", b"{,}", 400, "malformed_json"),
                ("application/json", b"not json at all", 400, "malformed_json"),
                ("application/json", b"{\"surprise\": true}", 422, "invalid_body"),
                ("application/json", b"[1, 2, 3]", 422, "invalid_body"),
                ("text/plain", b"{}", 400, "unsupported_content_type"),
            ];
            for (content_type, bytes, expected_status, expected_code) in cases {
                let (status, _, reply) = server
                    .send(endpoint.method.clone(), &path, Some(&token), Some((content_type, bytes.to_vec())))
                    .await;
                let reply: Value = serde_json::from_slice(&reply).unwrap();
                let sent = String::from_utf8_lossy(bytes);
                assert_eq!(status, expected_status, "{what} {sent}: {reply}");
                assert_eq!(code(&reply), expected_code, "{what} {sent}");
            }
        }
    }
    // Wrong types of known fields.
    for (path, body) in [
        ("/auth/login", json!({"username": 1, "password": "x"})),
        ("/libraries", json!({"name": "x", "paths": "/not/a/list"})),
        ("/users", json!({"username": "x", "password": false})),
    ] {
        let (status, reply) = server.post(path, Some(&token), &body).await;
        assert_eq!((status, code(&reply)), (422, "invalid_body"), "{path} {body}: {reply}");
    }
    for (path, body) in [
        ("/settings", json!({"jobTimeoutHours": "a day"})),
        ("/settings", json!({"keepOriginals": "yes"})),
        ("/license", json!({"key": 42})),
    ] {
        let (status, reply) = server.put(path, Some(&token), &body).await;
        assert_eq!((status, code(&reply)), (422, "invalid_body"), "{path} {body}: {reply}");
    }
    server.finish().await;
}

#[actix_web::test]
async fn unknown_routes_and_methods_answer_json_errors() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    for prefix in PREFIXES {
        let (status, body) = server.get(&format!("{prefix}/no/such/thing"), Some(&token)).await;
        assert_eq!((status, code(&body)), (404, "not_found"), "{body}");
        let (status, body) = server.call(Method::PATCH, &format!("{prefix}/libraries"), Some(&token), None).await;
        assert_eq!((status, code(&body)), (405, "method_not_allowed"), "{body}");
        // Without a token, a protected path answers 401 whatever the method.
        let (status, _) = server.call(Method::PATCH, &format!("{prefix}/libraries"), None, None).await;
        assert_eq!(status, 401);
    }
    server.finish().await;
}

// ---------------------------------------------------------------- libraries

fn media_dirs(names: &[&str]) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let paths = names
        .iter()
        .map(|name| {
            let path = dir.path().join(name);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::canonicalize(&path).unwrap().display().to_string()
        })
        .collect();
    (dir, paths)
}

const LIBRARY_FIELDS: [&str; 17] = [
    "qualityMode",
    "targetVmaf",
    "maxSizePercent",
    "keepDolbyVision",
    "keepModifiedTime",
    "id",
    "name",
    "paths",
    "targetCodec",
    "encoder",
    "quality",
    "preset",
    "watch",
    "enabled",
    "createdAt",
    "updatedAt",
    "lastScanAt",
];

/// A linked node that is up and runs the CPU encoder and `encoder`, decoding on `decoder`.
fn node_with(name: &str, encoder: &str, decoder: &str) -> repo::nodes::NodeFacts {
    repo::nodes::NodeFacts {
        name: name.into(),
        role: NodeRole::Linked,
        address: format!("{name}.lan"),
        gpu: None,
        cores: 8,
        memory_total: 16 << 30,
        max_jobs: 2,
        encoders: vec!["libx265".into(), encoder.into()],
        decoders: vec![decoder.into()],
    }
}

async fn libraries_crud(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let (dir, paths) = media_dirs(&["movies", "shows", "anime"]);
    // A symlink is stored as the folder it points to.
    let link = dir.path().join("link-to-movies");
    std::os::unix::fs::symlink(&paths[0], &link).unwrap();

    let (status, hevc) =
        server.post("/libraries", token, &json!({"name": "Movies", "paths": [link.display().to_string()]})).await;
    assert_eq!(status, 201, "{hevc}");
    let mut keys: Vec<&str> = hevc.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = LIBRARY_FIELDS.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    assert_eq!(hevc["paths"], json!([paths[0]]));
    assert_eq!(
        (&hevc["targetCodec"], &hevc["encoder"], &hevc["quality"], &hevc["preset"]),
        (&json!("hevc"), &json!("libx265"), &json!(28), &json!("medium"))
    );
    assert_eq!((&hevc["watch"], &hevc["enabled"], &hevc["lastScanAt"]), (&json!(true), &json!(true), &Value::Null));

    let (status, av1) = server
        .post(
            "/api/libraries",
            token,
            &json!({"name": "Shows", "paths": [paths[1]], "targetCodec": "av1", "watch": false}),
        )
        .await;
    assert_eq!(status, 201, "{av1}");
    assert_eq!(
        (&av1["encoder"], &av1["quality"], &av1["preset"], &av1["watch"]),
        (&json!("libsvtav1"), &json!(35), &json!("8"), &json!(false))
    );
    // A hardware encoder no node runs is refused with what is missing; once a node that is
    // up reports it, a library may use it.
    let body = json!({"name": "Anime", "paths": [paths[2]], "encoder": "hevc_nvenc", "quality": 0});
    let (status, refused) = server.post("/libraries", token, &body).await;
    assert_eq!((status, code(&refused)), (422, "validation_failed"), "{refused}");
    assert_eq!(
        message(&refused),
        "encoder hevc_nvenc cannot be used: no node runs it: it needs an NVIDIA GPU whose driver opens NVENC"
    );
    repo::nodes::upsert(server.db(), node_with("gpu", "hevc_nvenc", "nvidia")).await.unwrap();
    // The codec follows the encoder when only the encoder is given.
    let (status, nvenc) = server
        .post(
            "/libraries",
            token,
            &json!({"name": "Anime", "paths": [paths[2]], "encoder": "hevc_nvenc", "quality": 0}),
        )
        .await;
    assert_eq!(status, 201, "{nvenc}");
    assert_eq!((&nvenc["targetCodec"], &nvenc["quality"], &nvenc["preset"]), (&json!("hevc"), &json!(0), &json!("p5")));

    let (status, taken) = server.post("/libraries", token, &json!({"name": "Movies", "paths": [paths[1]]})).await;
    assert_eq!((status, code(&taken)), (409, "conflict"), "{taken}");

    for prefix in PREFIXES {
        let (status, list) = server.get(&format!("{prefix}/libraries"), token).await;
        assert_eq!(status, 200);
        let names: Vec<&str> = list.as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Movies", "Shows", "Anime"]);
        let (status, mut one) = server.get(&format!("{prefix}/libraries/{}", hevc["id"]), token).await;
        assert_eq!(status, 200);
        // A new library is scanned at once (in the background): the scan time may already
        // differ from the creation answer; nothing else may.
        one["lastScanAt"] = hevc["lastScanAt"].clone();
        assert_eq!(one, hevc);
    }

    // Partial updates: each field alone keeps the others.
    let id = hevc["id"].as_i64().unwrap();
    let (status, renamed) = server.put(&format!("/libraries/{id}"), token, &json!({"name": "  Films  "})).await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["name"], "Films");
    assert_eq!((&renamed["paths"], &renamed["encoder"]), (&hevc["paths"], &hevc["encoder"]));
    assert!(renamed["updatedAt"].as_str().unwrap() >= hevc["updatedAt"].as_str().unwrap());
    let (status, changed) = server
        .put(
            &format!("/api/libraries/{id}"),
            token,
            &json!({"targetCodec": "av1", "encoder": "libaom-av1", "quality": 60, "preset": "4", "watch": false, "enabled": false, "paths": [paths[0], format!("{}/", paths[2])], "name": null}),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(
        (&changed["targetCodec"], &changed["encoder"], &changed["quality"], &changed["preset"]),
        (&json!("av1"), &json!("libaom-av1"), &json!(60), &json!("4"))
    );
    assert_eq!(
        (&changed["watch"], &changed["enabled"], &changed["name"]),
        (&json!(false), &json!(false), &json!("Films"))
    );
    assert_eq!(changed["paths"], json!([paths[0], paths[2]]));
    let (status, same) = server.put(&format!("/libraries/{id}"), token, &json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(same["name"], "Films");
    let (status, clash) = server.put(&format!("/libraries/{id}"), token, &json!({"name": "Shows"})).await;
    assert_eq!((status, code(&clash)), (409, "conflict"), "{clash}");

    let (status, body) = server.delete(&format!("/libraries/{id}"), token).await;
    assert_eq!(status, 204, "{body}");
    for prefix in PREFIXES {
        let (status, body) = server.get(&format!("{prefix}/libraries/{id}"), token).await;
        assert_eq!((status, code(&body)), (404, "not_found"));
        let (status, body) = server.delete(&format!("{prefix}/libraries/{id}"), token).await;
        assert_eq!((status, code(&body)), (404, "not_found"));
        let (status, body) = server.put(&format!("{prefix}/libraries/{id}"), token, &json!({"watch": true})).await;
        assert_eq!((status, code(&body)), (404, "not_found"));
        for bad_id in ["abc", "1.5", "-", "99999999999999"] {
            let (status, body) = server.get(&format!("{prefix}/libraries/{bad_id}"), token).await;
            assert_eq!((status, code(&body)), (404, "not_found"), "{bad_id}");
        }
    }
}
api_test_on_both_databases!(libraries_crud);

#[actix_web::test]
async fn library_fields_are_validated() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let token = Some(token.as_str());
    let (dir, paths) = media_dirs(&["a", "a/inner", "b"]);
    let file = dir.path().join("file.mkv");
    std::fs::write(&file, b"x").unwrap();
    let file = file.display().to_string();
    let a = paths[0].clone();
    let many: Vec<String> = (0..33).map(|n| format!("/tmp/{n}")).collect();

    let cases: Vec<(Value, &str)> = vec![
        (json!({"name": "", "paths": [a]}), "name"),
        (json!({"name": "   ", "paths": [a]}), "name"),
        (json!({"name": "x".repeat(101), "paths": [a]}), "name"),
        (json!({"name": "tab\tname", "paths": [a]}), "name"),
        (json!({"name": "x", "paths": []}), "paths"),
        (json!({"name": "x", "paths": many}), "paths"),
        (json!({"name": "x", "paths": ["relative/dir"]}), "paths[0]"),
        (json!({"name": "x", "paths": [""]}), "paths[0]"),
        (json!({"name": "x", "paths": [a, "/no/such/folder/anywhere"]}), "paths[1]"),
        (json!({"name": "x", "paths": [file]}), "paths[0]"),
        (json!({"name": "x", "paths": [a, paths[1]]}), "paths[1]"),
        (json!({"name": "x", "paths": [a, a]}), "paths[1]"),
        (json!({"name": "x", "paths": [a], "targetCodec": "h264"}), "targetCodec"),
        (json!({"name": "x", "paths": [a], "encoder": "libx264"}), "encoder"),
        (json!({"name": "x", "paths": [a], "targetCodec": "av1", "encoder": "libx265"}), "encoder"),
        (json!({"name": "x", "paths": [a], "targetCodec": "hevc", "encoder": "libsvtav1"}), "encoder"),
        (json!({"name": "x", "paths": [a], "quality": 52}), "quality"),
        (json!({"name": "x", "paths": [a], "targetCodec": "av1", "quality": 64}), "quality"),
        (json!({"name": "x", "paths": [a], "quality": -1}), "quality"),
        (json!({"name": "x", "paths": [a], "preset": ""}), "preset"),
        (json!({"name": "x", "paths": [a], "preset": "p".repeat(33)}), "preset"),
        // Each encoder takes its own presets (GET /encoders lists them); VAAPI takes none.
        (json!({"name": "x", "paths": [a], "encoder": "hevc_nvenc", "preset": "medium"}), "preset"),
        (json!({"name": "x", "paths": [a], "targetCodec": "av1", "preset": "14"}), "preset"),
        (json!({"name": "x", "paths": [a], "encoder": "hevc_vaapi", "preset": "medium"}), "preset"),
    ];
    for (body, field) in &cases {
        let (status, reply) = server.post("/libraries", token, body).await;
        assert_eq!(status, 422, "{body}: {reply}");
        assert_eq!(code(&reply), "validation_failed", "{body}");
        assert!(message(&reply).starts_with(field), "{body}: {reply}");
    }
    // The bounds themselves are accepted.
    let (status, edge) = server
        .post(
            "/libraries",
            token,
            &json!({"name": "x".repeat(100), "paths": [a], "targetCodec": "AV1", "quality": 63, "preset": "13"}),
        )
        .await;
    assert_eq!(status, 201, "{edge}");
    assert_eq!(edge["targetCodec"], "av1");
    let id = edge["id"].as_i64().unwrap();

    // An update must leave a valid library: a codec change needs a fitting encoder and quality.
    for (body, field) in [
        (json!({"targetCodec": "hevc"}), "encoder"),
        (json!({"targetCodec": "hevc", "encoder": "libx265"}), "quality"),
        (json!({"encoder": "hevc_qsv"}), "encoder"),
        (json!({"name": ""}), "name"),
        (json!({"paths": ["/no/such/folder/anywhere"]}), "paths[0]"),
        (json!({"quality": 64}), "quality"),
        (json!({"preset": " "}), "preset"),
    ] {
        let (status, reply) = server.put(&format!("/libraries/{id}"), token, &body).await;
        assert_eq!((status, code(&reply)), (422, "validation_failed"), "{body}: {reply}");
        assert!(message(&reply).starts_with(field), "{body}: {reply}");
    }
    let (status, reply) = server
        .put(&format!("/libraries/{id}"), token, &json!({"targetCodec": "hevc", "encoder": "libx265", "quality": 20}))
        .await;
    assert_eq!(status, 200, "{reply}");
    // SVT-AV1's preset 13 means nothing to x265: the new encoder gets its own default.
    assert_eq!(reply["preset"], "medium", "{reply}");
    // No node has a VAAPI device: the change is refused with what is missing.
    let (status, reply) = server.put(&format!("/libraries/{id}"), token, &json!({"encoder": "hevc_vaapi"})).await;
    assert_eq!((status, code(&reply)), (422, "validation_failed"), "{reply}");
    assert!(
        message(&reply).starts_with("encoder hevc_vaapi cannot be used: no node runs it: it needs a VAAPI device"),
        "{reply}"
    );
    // An encoder that takes no preset stores an empty one.
    repo::nodes::upsert(server.db(), node_with("amd", "hevc_vaapi", "vaapi")).await.unwrap();
    let (status, reply) = server.put(&format!("/libraries/{id}"), token, &json!({"encoder": "hevc_vaapi"})).await;
    assert_eq!((status, &reply["preset"]), (200, &json!("")), "{reply}");
    let (status, reply) = server.put(&format!("/libraries/{id}"), token, &json!({"id": 5})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
    let (status, reply) =
        server.post("/libraries", token, &json!({"name": "y", "paths": [paths[2]], "quality": "high"})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
    let (status, reply) =
        server.post("/libraries", token, &json!({"name": "y", "paths": [paths[2]], "lastScanAt": null})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
    let (status, reply) = server.post("/libraries", token, &json!({"paths": [paths[2]]})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
    server.finish().await;
}

// ---------------------------------------------------------------- settings

async fn settings_round_trip(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let (status, settings) = server.get("/settings", token).await;
    assert_eq!(status, 200);
    // The cluster token is never served: only whether nodes can enroll.
    assert_eq!(settings, json!({"jobTimeoutHours": 24, "keepOriginals": false, "enrollmentOpen": true}));
    assert!(!settings.to_string().contains(CLUSTER_TOKEN));

    let (status, settings) = server.put("/settings", token, &json!({"jobTimeoutHours": 48})).await;
    assert_eq!(status, 200, "{settings}");
    assert_eq!((&settings["jobTimeoutHours"], &settings["keepOriginals"]), (&json!(48), &json!(false)));
    let (status, settings) = server.put("/api/settings", token, &json!({"keepOriginals": true})).await;
    assert_eq!(status, 200, "{settings}");
    assert_eq!((&settings["jobTimeoutHours"], &settings["keepOriginals"]), (&json!(48), &json!(true)));
    for prefix in PREFIXES {
        assert_eq!(server.get(&format!("{prefix}/settings"), token).await.1, settings);
    }
    // Stored where the rest of condense reads them.
    assert_eq!(repo::settings::get::<u32>(server.db(), "job_timeout_hours").await.unwrap(), Some(48));
    assert_eq!(repo::settings::get::<bool>(server.db(), "keep_originals").await.unwrap(), Some(true));

    for hours in [1, 720] {
        let (status, settings) = server.put("/settings", token, &json!({"jobTimeoutHours": hours})).await;
        assert_eq!((status, &settings["jobTimeoutHours"]), (200, &json!(hours)));
    }
    for hours in [0, 721, -5, 1_000_000_000_000_i64] {
        let (status, reply) =
            server.put("/settings", token, &json!({"jobTimeoutHours": hours, "keepOriginals": false})).await;
        assert_eq!((status, code(&reply)), (422, "validation_failed"), "{hours}: {reply}");
        assert!(message(&reply).contains("jobTimeoutHours"), "{reply}");
    }
    // A refused update changes nothing, not even the valid half.
    assert_eq!(server.get("/settings", token).await.1["keepOriginals"], true);
    let (status, reply) = server.put("/settings", token, &json!({"clusterToken": "mine now"})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
}
api_test_on_both_databases!(settings_round_trip);

// ---------------------------------------------------------------- licence

fn key(private_key: &str, tier: Tier, expires_at: Option<DateTime<Utc>>) -> String {
    let payload = LicensePayload { tier, licensee: "Ada Lovelace".into(), issued_at: Utc::now(), expires_at };
    condense::license::issue(private_key, &payload).unwrap()
}

async fn license_install_and_remove(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let free = json!({"tier": "FREE", "licensee": null, "expiresAt": null, "maxNodes": 1, "maxConcurrentJobs": 1, "effectiveTier": "FREE"});
    assert_eq!(server.get("/license", token).await, (200, free.clone()));

    let pro = key(&server.license_private_key, Tier::Pro, None);
    let (status, installed) = server.put("/license", token, &json!({"key": format!("  {pro}\n")})).await;
    assert_eq!(status, 200, "{installed}");
    assert_eq!(
        installed,
        json!({"tier": "PRO", "licensee": "Ada Lovelace", "expiresAt": null, "maxNodes": null, "maxConcurrentJobs": null, "effectiveTier": "PRO"})
    );
    for prefix in PREFIXES {
        assert_eq!(server.get(&format!("{prefix}/license"), token).await, (200, installed.clone()));
    }
    assert_eq!(repo::licenses::current(server.db()).await.unwrap().unwrap().key, pro);

    // Whole seconds: PostgreSQL keeps microseconds, SQLite nanoseconds.
    let expiry = DateTime::from_timestamp(Utc::now().timestamp() - 86400, 0).unwrap();
    let expired = key(&server.license_private_key, Tier::Supporter, Some(expiry));
    let (status, body) = server.put("/api/license", token, &json!({"key": expired})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["tier"], &body["effectiveTier"]), (&json!("SUPPORTER"), &json!("FREE")));
    assert_eq!((&body["maxNodes"], &body["maxConcurrentJobs"]), (&json!(1), &json!(1)));
    let shown: DateTime<Utc> = DateTime::parse_from_rfc3339(body["expiresAt"].as_str().unwrap()).unwrap().into();
    assert_eq!(shown, expiry);
    let trial = key(&server.license_private_key, Tier::Supporter, Some(Utc::now() + Duration::days(14)));
    let (status, body) = server.put("/license", token, &json!({"key": trial})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["effectiveTier"], &body["maxNodes"], &body["maxConcurrentJobs"]),
        (&json!("SUPPORTER"), &json!(3), &json!(5))
    );

    let (other_private_key, _) = condense::license::generate_keypair();
    let refused = [
        (key(&other_private_key, Tier::Pro, None), "license_bad_signature"),
        ("garbage".to_string(), "license_malformed"),
        (pro.replacen("CONDENSE1", "CONDENSE9", 1), "license_unknown_version"),
    ];
    for (bad, expected) in refused {
        let (status, reply) = server.put("/license", token, &json!({"key": bad})).await;
        assert_eq!((status, code(&reply)), (422, expected), "{reply}");
    }
    // A refused key leaves the installed one alone.
    assert_eq!(server.get("/license", token).await.1["effectiveTier"], "SUPPORTER");

    let (status, body) = server.delete("/license", token).await;
    assert_eq!((status, &body), (200, &free));
    assert_eq!(server.get("/api/license", token).await, (200, free));
}
api_test_on_both_databases!(license_install_and_remove);

// ---------------------------------------------------------------- users

async fn users_crud(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let (status, users) = server.get("/users", token).await;
    assert_eq!(status, 200);
    assert_eq!(users.as_array().unwrap().len(), 1);
    assert_eq!(users[0]["username"], ADMIN);

    let (status, bob) =
        server.post("/users", token, &json!({"username": "bob", "password": "bob's password", "role": "admin"})).await;
    assert_eq!(status, 201, "{bob}");
    let mut keys: Vec<&String> = bob.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["createdAt", "id", "role", "username"]);
    let (status, body) = server.post("/api/users", token, &json!({"username": "bob", "password": "another one"})).await;
    assert_eq!((status, code(&body)), (409, "conflict"), "{body}");
    for (body, field) in [
        (json!({"username": "carol", "password": "short"}), "password"),
        (json!({"username": "carol", "password": "x".repeat(1025)}), "password"),
        (json!({"username": "", "password": "long enough"}), "username"),
        (json!({"username": "a/b", "password": "long enough"}), "username"),
        (json!({"username": " carol", "password": "long enough"}), "username"),
        (json!({"username": "c".repeat(65), "password": "long enough"}), "username"),
    ] {
        let (status, reply) = server.post("/users", token, &body).await;
        assert_eq!((status, code(&reply)), (422, "validation_failed"), "{body}: {reply}");
        assert!(message(&reply).starts_with(field), "{reply}");
    }
    let (status, users) = server.get("/api/users", token).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = users.as_array().unwrap().iter().map(|u| u["username"].as_str().unwrap()).collect();
    assert_eq!(names, [ADMIN, "bob"]);

    let (status, body) = server.login_as("bob", "bob's password").await;
    assert_eq!(status, 200, "{body}");
    let bob_token = body["token"].as_str().unwrap().to_string();
    let (status, body) =
        server.put("/users/bob/password", Some(&bob_token), &json!({"password": "a new password"})).await;
    assert_eq!(status, 204, "{body}");
    assert_eq!(server.login_as("bob", "bob's password").await.0, 401);
    assert_eq!(server.login_as("bob", "a new password").await.0, 200);
    let (status, body) = server.put("/api/users/bob/password", token, &json!({"password": "short"})).await;
    assert_eq!((status, code(&body)), (422, "validation_failed"), "{body}");
    let (status, body) = server.put("/users/nobody/password", token, &json!({"password": "long enough"})).await;
    assert_eq!((status, code(&body)), (404, "not_found"), "{body}");

    let (status, body) = server.delete("/users/bob", token).await;
    assert_eq!(status, 204, "{body}");
    // A deleted user's token stops working at once.
    let (status, body) = server.get("/users", Some(&bob_token)).await;
    assert_eq!(status, 401, "{body}");
    assert!(message(&body).contains("no longer exists"), "{body}");
    let (status, body) = server.delete("/api/users/bob", token).await;
    assert_eq!((status, code(&body)), (404, "not_found"), "{body}");
    for prefix in PREFIXES {
        let (status, body) = server.delete(&format!("{prefix}/users/{ADMIN}"), token).await;
        assert_eq!((status, code(&body)), (409, "conflict"), "{body}");
        assert!(message(&body).contains("last user"), "{body}");
    }
    assert_eq!(server.get("/users", token).await.1.as_array().unwrap().len(), 1);
    assert_eq!(server.login_as(ADMIN, ADMIN_PASSWORD).await.0, 200);
}
api_test_on_both_databases!(users_crud);

async fn deleting_the_last_two_users_at_once_keeps_one(server: &TestServer) {
    for round in 0..5 {
        let other = format!("other-{round}");
        let hash = condense::security::hash_password("long enough").unwrap();
        repo::users::create(server.db(), &other, &hash, UserRole::Admin).await.unwrap();
        let (first, second) = futures_util::future::join(
            repo::users::delete(server.db(), ADMIN),
            repo::users::delete(server.db(), &other),
        )
        .await;
        assert!(first.is_ok() != second.is_ok(), "round {round}: {first:?} {second:?}");
        let left = repo::users::list(server.db()).await.unwrap();
        assert_eq!(left.len(), 1, "round {round}");
        if left[0].username != ADMIN {
            // Put the admin back for the next round, and the server's helpers.
            repo::users::create(server.db(), ADMIN, &hash, UserRole::Admin).await.unwrap();
            repo::users::delete(server.db(), &left[0].username).await.unwrap();
        }
    }
}
api_test_on_both_databases!(deleting_the_last_two_users_at_once_keeps_one);

// ---------------------------------------------------------------- nodes

async fn nodes_are_listed_with_load_and_overload(server: &TestServer) {
    let token = server.login().await;
    let facts = |name: &str, role: NodeRole, cores: i32| repo::nodes::NodeFacts {
        name: name.into(),
        role,
        address: format!("{name}.lan"),
        gpu: (role == NodeRole::Linked).then(|| "NVIDIA RTX 4000".to_string()),
        cores,
        memory_total: 16 << 30,
        max_jobs: 4,
        encoders: vec!["libx265".into(), "hevc_nvenc".into()],
        decoders: if role == NodeRole::Linked { vec!["nvidia".into()] } else { vec![] },
    };
    let main = repo::nodes::upsert(server.db(), facts("main", NodeRole::Main, 8)).await.unwrap();
    let busy = repo::nodes::upsert(server.db(), facts("busy", NodeRole::Linked, 4)).await.unwrap();
    let idle = repo::nodes::upsert(server.db(), facts("idle", NodeRole::Linked, 4)).await.unwrap();
    let gone = repo::nodes::upsert(server.db(), facts("gone", NodeRole::Linked, 2)).await.unwrap();
    repo::nodes::record_heartbeat(server.db(), main.id, 4.0, 8 << 30, 1).await.unwrap();
    repo::nodes::record_heartbeat(server.db(), busy.id, 6.0, 4 << 30, 5).await.unwrap();
    repo::nodes::record_heartbeat(server.db(), idle.id, 0.5, 1 << 30, 0).await.unwrap();
    repo::nodes::record_heartbeat(server.db(), gone.id, 0.0, 0, 3).await.unwrap();
    repo::nodes::set_status(server.db(), gone.id, NodeStatus::Offline, Some("no heartbeat for 90 s".into()))
        .await
        .unwrap();

    for prefix in PREFIXES {
        let (status, nodes) = server.get(&format!("{prefix}/nodes"), Some(&token)).await;
        assert_eq!(status, 200, "{nodes}");
        let nodes = nodes.as_array().unwrap();
        assert_eq!(nodes.len(), 4);
        let by_name = |name: &str| nodes.iter().find(|n| n["name"] == name).unwrap().clone();
        assert_eq!((&by_name("busy")["decoders"], &by_name("main")["decoders"]), (&json!(["nvidia"]), &json!([])));
        let busy = by_name("busy");
        let mut keys: Vec<&String> = busy.as_object().unwrap().keys().collect();
        keys.sort();
        let mut expected = vec![
            "id",
            "name",
            "role",
            "address",
            "status",
            "statusReason",
            "gpu",
            "load1",
            "cores",
            "loadRatio",
            "memoryUsed",
            "memoryTotal",
            "activeJobs",
            "maxJobs",
            "encoders",
            "decoders",
            "overloaded",
            "lastSeenAt",
            "identity",
            "hasCredential",
            "revoked",
            "window",
        ];
        expected.sort();
        assert_eq!(keys, expected);
        // No schedule set: every node follows the default, always open.
        assert_eq!(
            (&busy["window"]["open"], &busy["window"]["followsDefault"], &busy["window"]["windows"]),
            (&json!(true), &json!(true), &json!([]))
        );
        assert_eq!(
            (&busy["role"], &busy["status"], &busy["loadRatio"]),
            (&json!("linked"), &json!("ONLINE"), &json!(1.5))
        );
        assert_eq!((&busy["activeJobs"], &busy["memoryUsed"]), (&json!(5), &json!(4_i64 << 30)));
        assert_eq!(busy["encoders"], json!(["libx265", "hevc_nvenc"]));
        // ONLINE average: (1 + 5 + 0) / 3 = 2; 5 is more than twice that.
        assert_eq!(busy["overloaded"], true);
        assert_eq!(by_name("main")["overloaded"], false);
        assert_eq!(by_name("main")["loadRatio"], 0.5);
        let gone = by_name("gone");
        assert_eq!(
            (&gone["status"], &gone["statusReason"], &gone["overloaded"]),
            (&json!("OFFLINE"), &json!("no heartbeat for 90 s"), &json!(false))
        );
    }
}
api_test_on_both_databases!(nodes_are_listed_with_load_and_overload);

// ---------------------------------------------------------------- encoders

async fn encoders_are_served_with_their_defaults_and_the_nodes_that_run_them(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    // The test server's own node ("main") reports libx265.
    let facts = |name: &str, encoders: &[&str]| repo::nodes::NodeFacts {
        name: name.into(),
        role: NodeRole::Linked,
        address: format!("{name}.lan"),
        gpu: None,
        cores: 4,
        memory_total: 8 << 30,
        max_jobs: 1,
        encoders: encoders.iter().map(std::string::ToString::to_string).collect(),
        decoders: vec![],
    };
    repo::nodes::upsert(server.db(), facts("gpu", &["libx265", "hevc_nvenc"])).await.unwrap();
    let old = repo::nodes::upsert(server.db(), facts("old", &["libaom-av1"])).await.unwrap();
    repo::nodes::set_status(server.db(), old.id, NodeStatus::Offline, None).await.unwrap();

    let mut catalog = Value::Null;
    for prefix in PREFIXES {
        let (status, body) = server.get(&format!("{prefix}/encoders"), token).await;
        assert_eq!(status, 200, "{body}");
        catalog = body;
    }
    assert_eq!(catalog["defaultCodec"], "hevc");
    let codecs = catalog["codecs"].as_array().unwrap();
    let names = |codec: &Value| -> Vec<String> {
        codec["encoders"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!((&codecs[0]["codec"], &codecs[0]["defaultEncoder"]), (&json!("hevc"), &json!("libx265")));
    assert_eq!(names(&codecs[0]), ["libx265", "hevc_nvenc", "hevc_qsv", "hevc_vaapi"]);
    assert_eq!((&codecs[1]["codec"], &codecs[1]["defaultEncoder"]), (&json!("av1"), &json!("libsvtav1")));
    assert_eq!(names(&codecs[1]), ["libsvtav1", "libaom-av1"]);
    let encoder = |codec: usize, index: usize| codecs[codec]["encoders"][index].clone();
    let x265 = encoder(0, 0);
    assert_eq!(x265["hardware"], "cpu");
    assert_eq!(x265["quality"], json!({"min": 0, "max": 51, "default": 28}));
    assert_eq!(x265["defaultPreset"], "medium");
    assert!(x265["presets"].as_array().unwrap().contains(&json!("veryslow")));
    assert_eq!((&x265["available"], &x265["nodes"]), (&json!(true), &json!(["main", "gpu"])));
    let nvenc = encoder(0, 1);
    assert_eq!((&nvenc["hardware"], &nvenc["defaultPreset"]), (&json!("nvidia"), &json!("p5")));
    assert_eq!((&nvenc["available"], &nvenc["nodes"]), (&json!(true), &json!(["gpu"])));
    let vaapi = encoder(0, 3);
    assert_eq!(
        (&vaapi["presets"], &vaapi["defaultPreset"], &vaapi["available"]),
        (&json!([]), &Value::Null, &json!(false))
    );
    assert_eq!(encoder(1, 0)["quality"], json!({"min": 0, "max": 63, "default": 35}));
    // Only an OFFLINE node reports libaom-av1.
    let aom = encoder(1, 1);
    assert_eq!(
        (&aom["available"], &aom["nodes"], &aom["defaultPreset"]),
        (&json!(false), &json!(["old"]), &json!("6"))
    );

    // A library created without settings gets exactly the defaults served here.
    let (_dir, paths) = media_dirs(&["a", "b", "c"]);
    for (i, codec) in codecs.iter().enumerate() {
        let body = json!({"name": format!("lib-{i}"), "paths": [paths[i]], "targetCodec": codec["codec"]});
        let (status, library) = server.post("/libraries", token, &body).await;
        assert_eq!(status, 201, "{library}");
        let default =
            codec["encoders"].as_array().unwrap().iter().find(|e| e["name"] == codec["defaultEncoder"]).unwrap();
        assert_eq!(library["encoder"], codec["defaultEncoder"]);
        assert_eq!(library["quality"], default["quality"]["default"]);
        assert_eq!(library["preset"], default["defaultPreset"]);
    }
    let body = json!({"name": "gpu", "paths": [paths[2]], "encoder": "hevc_nvenc"});
    let (status, library) = server.post("/libraries", token, &body).await;
    assert_eq!(
        (status, &library["preset"], &library["quality"]),
        (201, &nvenc["defaultPreset"], &nvenc["quality"]["default"])
    );
}
api_test_on_both_databases!(encoders_are_served_with_their_defaults_and_the_nodes_that_run_them);

// ---------------------------------------------------------------- jobs

const JOB_FIELDS: [&str; 30] = [
    "skipReason",
    "chosenQuality",
    "predictedSize",
    "vmaf",
    "vmafP5",
    "id",
    "fileName",
    "filePath",
    "libraryId",
    "status",
    "stage",
    "progress",
    "fps",
    "node",
    "etaSeconds",
    "retryCount",
    "failureReason",
    "failureCode",
    "stalled",
    "sourceCodec",
    "targetCodec",
    "sourceSize",
    "outputSize",
    "savedBytes",
    "createdAt",
    "startedAt",
    "completedAt",
    "updatedAt",
    "actions",
    "priority",
];

async fn insert_job(server: &TestServer, library_id: Option<i32>, name: &str, status: JobStatus, size: i64) -> i32 {
    let job = repo::jobs::insert(
        server.db(),
        repo::jobs::NewJob {
            library_id,
            file_path: format!("/media/{name}"),
            file_name: name.into(),
            status,
            target_codec: "hevc".into(),
            source_size: size,
            source_mtime_ns: None,
            source_inode: None,
            forced: false,
        },
    )
    .await
    .unwrap();
    job.id
}

/// Twelve jobs in two libraries: `movie-NN.mkv` QUEUED in the first, `show-NN.mp4` in the
/// second, two of which are COMPLETED on node-a with an output 600 bytes smaller.
async fn seed_jobs(server: &TestServer, token: &str) -> (i64, i64) {
    let (_dir, paths) = media_dirs(&["movies", "shows"]);
    let library = |name: &str, path: &str| json!({"name": name, "paths": [path]});
    let movies = server.post("/libraries", Some(token), &library("Movies", &paths[0])).await.1["id"].as_i64().unwrap();
    let shows = server.post("/libraries", Some(token), &library("Shows", &paths[1])).await.1["id"].as_i64().unwrap();
    // Scans are serialized per library: once these return, the first scans are over and
    // no scan will drop the jobs below (whose files do not exist).
    for id in [movies, shows] {
        let (status, _) = server.post(&format!("/libraries/{id}/scan"), Some(token), &json!({})).await;
        assert_eq!(status, 200);
    }
    for n in 0..7 {
        insert_job(server, Some(movies as i32), &format!("movie-{n:02}.mkv"), JobStatus::Queued, 1000 + n).await;
    }
    for n in 0..5 {
        let status = if n < 2 { JobStatus::Completed } else { JobStatus::Failed };
        let id = insert_job(server, Some(shows as i32), &format!("show-{n:02}.mp4"), status, 2000 + n).await;
        let set = entities::job::ActiveModel {
            id: sea_orm::Set(id),
            node_name: sea_orm::Set(Some("node-a".into())),
            output_size: sea_orm::Set(Some(1400 + n)),
            progress: sea_orm::Set(100.0),
            ..Default::default()
        };
        sea_orm::ActiveModelTrait::update(set, server.db()).await.unwrap();
    }
    (movies, shows)
}

fn names_of(page: &Value) -> Vec<String> {
    page["items"].as_array().unwrap().iter().map(|j| j["fileName"].as_str().unwrap().to_string()).collect()
}

async fn jobs_are_listed_filtered_sorted_and_paginated(server: &TestServer) {
    let token = server.login().await;
    let (movies, shows) = seed_jobs(server, &token).await;
    let token = Some(token.as_str());

    let (status, page) = server.get("/jobs", token).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!((&page["total"], &page["page"], &page["pageSize"]), (&json!(12), &json!(1), &json!(50)));
    // Newest first by default.
    assert_eq!(names_of(&page)[0], "show-04.mp4");
    let job = &page["items"][0];
    let mut keys: Vec<&str> = job.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected: Vec<&str> = JOB_FIELDS.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    // And they are the fields the generated document promises.
    let (_, doc) = server.get("/openapi.json", token).await;
    let mut documented: Vec<&str> =
        doc["components"]["schemas"]["JobView"]["properties"].as_object().unwrap().keys().map(String::as_str).collect();
    documented.sort_unstable();
    assert_eq!(documented, expected);

    for prefix in PREFIXES {
        let (status, page) =
            server.get(&format!("{prefix}/jobs?page=2&pageSize=5&sort=fileName&order=asc"), token).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!((&page["total"], &page["page"], &page["pageSize"]), (&json!(12), &json!(2), &json!(5)));
        assert_eq!(names_of(&page), ["movie-05.mkv", "movie-06.mkv", "show-00.mp4", "show-01.mp4", "show-02.mp4"]);
    }
    let (_, last) = server.get("/jobs?page=3&pageSize=5&sort=fileName&order=asc", token).await;
    assert_eq!(names_of(&last), ["show-03.mp4", "show-04.mp4"]);
    let (_, beyond) = server.get("/jobs?page=9&pageSize=5", token).await;
    assert_eq!((beyond["items"].as_array().unwrap().len(), &beyond["total"]), (0, &json!(12)));
    let (_, clamped) = server.get("/jobs?pageSize=100000", token).await;
    assert_eq!(clamped["pageSize"], 500);

    let (_, done) = server.get("/jobs?status=COMPLETED&sort=fileName&order=asc", token).await;
    assert_eq!(names_of(&done), ["show-00.mp4", "show-01.mp4"]);
    let completed = &done["items"][0];
    assert_eq!((&completed["status"], &completed["node"]), (&json!("COMPLETED"), &json!("node-a")));
    assert_eq!(
        (&completed["sourceSize"], &completed["outputSize"], &completed["savedBytes"]),
        (&json!(2000), &json!(1400), &json!(600))
    );
    let (_, failed) = server.get("/jobs?status=failed&sort=fileName", token).await;
    assert_eq!(failed["items"][0]["savedBytes"], 0, "{failed}");
    let (_, some) = server.get("/jobs?status=COMPLETED,failed", token).await;
    assert_eq!(some["total"], 5);
    let (_, none) = server.get("/jobs?status=PAUSED", token).await;
    assert_eq!(none["total"], 0);
    let (_, in_movies) = server.get(&format!("/jobs?libraryId={movies}"), token).await;
    assert_eq!(in_movies["total"], 7);
    let (_, shows_on_a) = server.get(&format!("/api/jobs?libraryId={shows}&node=node-a"), token).await;
    assert_eq!(shows_on_a["total"], 5);
    let (_, searched) = server.get("/jobs?q=MOVIE-0&sort=sourceSize&order=desc&pageSize=2", token).await;
    assert_eq!(
        (names_of(&searched), &searched["total"]),
        (vec!["movie-06.mkv".to_string(), "movie-05.mkv".to_string()], &json!(7))
    );
    let (_, wildcard) = server.get("/jobs?q=%25", token).await;
    assert_eq!(wildcard["total"], 0, "a % in q is a literal, not a wildcard");
    let (_, ignored) = server.get("/jobs?unknownParameter=1", token).await;
    assert_eq!(ignored["total"], 12);

    // Keyset pages: nextCursor given back as `after`, with the same sort and order, walks the
    // same rows as numbered pages, and the last page has none.
    let mut walked = Vec::new();
    let mut after = String::new();
    loop {
        let (status, page) =
            server.get(&format!("/jobs?pageSize=5&sort=fileName&order=asc&after={after}"), token).await;
        assert_eq!((status, &page["total"], &page["page"]), (200, &json!(12), &json!(1)), "{page}");
        walked.extend(names_of(&page));
        match page["nextCursor"].as_str() {
            Some(next) => after = next.to_string(),
            None => break,
        }
    }
    let (_, whole) = server.get("/jobs?sort=fileName&order=asc", token).await;
    assert_eq!((walked, &whole["nextCursor"]), (names_of(&whole), &Value::Null));
    let (_, first) = server.get("/jobs?pageSize=5&sort=fileName&order=asc", token).await;
    let cursor = first["nextCursor"].as_str().unwrap();
    for (query, says) in [
        (format!("after={cursor}&sort=fileName&order=asc&page=2"), "cannot be combined"),
        (format!("after={cursor}&sort=fileName"), "another order"),
        (format!("after={cursor}&order=asc"), "another order"),
        ("after=bm90LWEtY3Vyc29y".to_string(), "not a cursor"),
        ("after=%25%25".to_string(), "not a cursor"),
    ] {
        let (status, body) = server.get(&format!("/jobs?{query}"), token).await;
        assert_eq!((status, code(&body)), (400, "invalid_query"), "{query}: {body}");
        assert!(message(&body).contains(says), "{query}: {body}");
    }

    for sort in ["createdAt", "updatedAt", "completedAt", "fileName", "status", "progress", "sourceSize"] {
        for order in ["asc", "desc"] {
            let (status, page) = server.get(&format!("/jobs?sort={sort}&order={order}"), token).await;
            assert_eq!((status, &page["total"]), (200, &json!(12)), "{sort} {order}: {page}");
        }
    }
    for query in [
        "status=BOGUS",
        "status=QUEUED,NOPE",
        "sort=size",
        "order=sideways",
        "page=0",
        "pageSize=0",
        "page=-1",
        "page=first",
        "pageSize=abc",
        "libraryId=x",
    ] {
        for prefix in PREFIXES {
            let (status, body) = server.get(&format!("{prefix}/jobs?{query}"), token).await;
            assert_eq!((status, code(&body)), (400, "invalid_query"), "{query}: {body}");
        }
    }
}
api_test_on_both_databases!(jobs_are_listed_filtered_sorted_and_paginated);

async fn a_job_is_shown_with_its_events(server: &TestServer) {
    let token = server.login().await;
    let id = insert_job(server, None, "clip.mkv", JobStatus::Pending, 1234).await;
    repo::events::append(
        server.db(),
        id,
        repo::events::NewEvent::transition("queued", JobStatus::Pending, JobStatus::Queued)
            .on_node(Some("main".into()))
            .with_detail(json!({"reason": "scan"})),
    )
    .await
    .unwrap();
    for prefix in PREFIXES {
        let (status, job) = server.get(&format!("{prefix}/jobs/{id}"), Some(&token)).await;
        assert_eq!(status, 200, "{job}");
        assert_eq!(
            (&job["id"], &job["fileName"], &job["filePath"]),
            (&json!(id), &json!("clip.mkv"), &json!("/media/clip.mkv"))
        );
        assert_eq!(
            (&job["status"], &job["sourceSize"], &job["savedBytes"]),
            (&json!("PENDING"), &json!(1234), &json!(0))
        );
        let events = job["events"].as_array().unwrap();
        assert_eq!(events.len(), 2, "{job}");
        assert_eq!(
            (&events[0]["kind"], &events[0]["fromStatus"], &events[0]["toStatus"]),
            (&json!("created"), &Value::Null, &json!("PENDING"))
        );
        let queued = &events[1];
        let mut keys: Vec<&String> = queued.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["at", "detail", "fromStatus", "id", "kind", "nodeName", "toStatus"]);
        assert_eq!(
            (&queued["kind"], &queued["fromStatus"], &queued["toStatus"]),
            (&json!("queued"), &json!("PENDING"), &json!("QUEUED"))
        );
        assert_eq!((&queued["nodeName"], &queued["detail"]), (&json!("main"), &json!({"reason": "scan"})));

        for missing in ["999999", "abc", "-1x", "1e3"] {
            let (status, body) = server.get(&format!("{prefix}/jobs/{missing}"), Some(&token)).await;
            assert_eq!((status, code(&body)), (404, "not_found"), "{missing}: {body}");
        }
    }
}
api_test_on_both_databases!(a_job_is_shown_with_its_events);

// ---------------------------------------------------------------- OpenAPI

#[actix_web::test]
async fn openapi_documents_every_registered_route() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    for prefix in PREFIXES {
        let (status, doc) = server.get(&format!("{prefix}/openapi.json"), Some(&token)).await;
        assert_eq!(status, 200);
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let servers: Vec<&str> =
            doc["servers"].as_array().unwrap().iter().map(|s| s["url"].as_str().unwrap()).collect();
        assert_eq!(servers, ["/", "/api"]);
        let mut documented = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            documented += item.as_object().unwrap().keys().filter(|k| *k != "parameters").count();
            assert!(path != "/api" && !path.starts_with("/api/"), "{path}: paths are listed unprefixed");
        }
        let registered = endpoints();
        assert_eq!(documented, registered.len());
        for endpoint in registered {
            let operation = &doc["paths"][endpoint.path][endpoint.method.as_str().to_lowercase()];
            assert!(operation.is_object(), "{} {} is not documented", endpoint.method, endpoint.path);
            assert!(
                operation["responses"]["200"].is_object()
                    || operation["responses"]["101"].is_object()
                    || operation["responses"]["201"].is_object()
                    || operation["responses"]["202"].is_object()
                    || operation["responses"]["204"].is_object(),
                "{} {}",
                endpoint.method,
                endpoint.path
            );
            if endpoint.access == Access::Token {
                assert!(operation["responses"]["401"].is_object(), "{} {}", endpoint.method, endpoint.path);
            }
            if matches!(endpoint.method, Method::POST | Method::PUT) && takes_body(endpoint.path) {
                assert!(
                    operation["requestBody"].is_object(),
                    "{} {} has no request body",
                    endpoint.method,
                    endpoint.path
                );
            }
        }
    }
    server.finish().await;
}

// ---------------------------------------------------------------- `condense serve` wiring

#[actix_web::test]
async fn serve_installs_license_key_and_never_serves_the_cluster_token() {
    use crate::common::server::{command, ServerProcess};
    let dir = tempfile::tempdir().unwrap();
    let (private_key, public_key) = condense::license::generate_keypair();
    let login = |api: String| async move {
        let mut response = awc::Client::default()
            .post(format!("{api}/api/auth/login"))
            .send_json(&json!({"username": "admin", "password": "serve-test-password"}))
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&response.body().await.unwrap()).unwrap();
        body["token"].as_str().unwrap().to_string()
    };
    let get = |url: String, token: String| async move {
        let mut response = awc::Client::default().get(url).bearer_auth(token).send().await.unwrap();
        serde_json::from_slice::<Value>(&response.body().await.unwrap()).unwrap()
    };

    // A key that does not verify is reported, and the node starts anyway.
    let mut cmd = command(dir.path());
    cmd.env("ADMIN_PASSWORD", "serve-test-password")
        .env("LICENSE_KEY", "CONDENSE1.not.valid")
        .env("CLUSTER_TOKEN", CLUSTER_TOKEN);
    let mut server = ServerProcess::start(cmd);
    let token = login(server.api.clone()).await;
    assert_eq!(get(format!("{}/license", server.api), token.clone()).await["tier"], "FREE");
    let settings = get(format!("{}/settings", server.api), token).await;
    assert_eq!(settings["enrollmentOpen"], true, "{settings}");
    assert!(!settings.to_string().contains(CLUSTER_TOKEN), "{settings}");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    assert!(server.output().iter().any(|l| l.contains("LICENSE_KEY does not verify")), "{:#?}", server.output());

    // A genuine key for the configured public key is installed at start-up.
    let pro = key(&private_key, Tier::Pro, None);
    let mut cmd = command(dir.path());
    cmd.env("LICENSE_KEY", &pro).env("LICENSE_PUBLIC_KEY", &public_key);
    let mut server = ServerProcess::start(cmd);
    let token = login(server.api.clone()).await;
    let license = get(format!("{}/license", server.api), token.clone()).await;
    assert_eq!((&license["tier"], &license["effectiveTier"]), (&json!("PRO"), &json!("PRO")), "{license}");
    assert_eq!(get(format!("{}/settings", server.api), token).await["enrollmentOpen"], false);
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}
