//! Issue 35's attacks, through the real server: API keys as principals with a scope, tokens
//! bound to the account rather than its name, page numbers past the bound.

use actix_web::http::Method;
use condense::domain::access::KeyScope;
use condense::http::{endpoints, Access};
use serde_json::{json, Value};

use crate::api_test_on_both_databases;
use crate::common::api::{concrete, message, TestServer, ADMIN, PREFIXES};

/// A key of `scope`, made by the administrator.
async fn key_of(server: &TestServer, admin: &str, scope: KeyScope) -> String {
    let (status, body) =
        server.post("/api-keys", Some(admin), &json!({"name": format!("{scope} key"), "scope": scope})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["scope"], scope.as_str(), "{body}");
    body["key"].as_str().unwrap().to_string()
}

/// Handlers that refuse every key whatever its scope: a key is not a session, and makes no keys.
fn refuses_keys(method: &Method, path: &str) -> bool {
    ["/auth/refresh", "/auth/logout", "/auth/password"].contains(&path)
        || (*method == Method::POST && path == "/api-keys")
}

/// Every route under both prefixes, called with a key of every scope (made by an
/// administrator, so the role never stands in the way): a scope the route table does not let
/// through gets 403 before anything else is looked at; one it does is never refused.
#[actix_web::test]
async fn every_route_answers_every_key_scope_as_the_route_table_says() {
    let server = TestServer::sqlite().await;
    let admin = server.login().await;
    let mut keys = Vec::new();
    for scope in KeyScope::ALL {
        keys.push((*scope, key_of(&server, &admin, *scope).await));
    }
    let mut refused = 0;
    for endpoint in endpoints().into_iter().filter(|e| e.access == Access::Token && !e.websocket) {
        for prefix in PREFIXES {
            let path = format!("{prefix}{}", concrete(endpoint.path));
            let body = matches!(endpoint.method, Method::POST | Method::PUT).then(|| json!({}));
            for (scope, key) in &keys {
                let (status, reply) = server.call(endpoint.method.clone(), &path, Some(key), body.as_ref()).await;
                let what = format!("{} {path} with a {scope} key", endpoint.method);
                if scope.reaches(endpoint.reach) {
                    if refuses_keys(&endpoint.method, endpoint.path) {
                        // Refused by the handler (or its body, read before it, found wanting).
                        assert!(status == 403 || status == 422, "{what}: {reply}");
                        assert!(status == 422 || message(&reply).contains("an API key cannot"), "{what}: {reply}");
                    } else {
                        assert!(status != 401 && status != 403 && status < 500, "{what}: {status} {reply}");
                        assert!(status != 405, "{what}: {reply}");
                    }
                } else {
                    assert_eq!(status, 403, "{what}: {reply}");
                    assert!(message(&reply).contains(&format!("its scope is {scope}")), "{what}: {reply}");
                    refused += 1;
                }
            }
        }
    }
    assert!(refused > 150, "{refused}");
    // The feed: every scope that reads.
    for (scope, key) in &keys {
        let ws = awc::Client::new().ws(server.url("/ws")).bearer_auth(key).connect().await;
        let status = match ws {
            Ok((response, _)) => response.status().as_u16(),
            Err(awc::error::WsClientError::InvalidResponseStatus(status)) => status.as_u16(),
            Err(other) => panic!("{scope}: {other}"),
        };
        assert_eq!(status, if *scope == KeyScope::Integration { 403 } else { 101 }, "/ws with a {scope} key");
    }
    server.finish().await;
}

/// The found key: an *arr application's key, read out of its settings or a proxy's log,
/// once made an administrator and locked the real one out. Now no key but an `admin` one
/// reaches users, keys or sessions; the webhook still works with the `integration` key; the
/// audit log names the key and the client address of every refusal.
async fn a_found_key_cannot_take_over_the_service(server: &TestServer) {
    let admin = server.login().await;
    let (status, mapped) =
        server.put("/settings/arr", Some(&admin), &json!({"pathMappings": [{"from": "/data", "to": "/srv"}]})).await;
    assert_eq!(status, 200, "{mapped}");
    for scope in [KeyScope::Integration, KeyScope::Read, KeyScope::Operate] {
        let key = key_of(server, &admin, scope).await;
        let attempts: [(Method, &str, Value); 5] = [
            (Method::POST, "/users", json!({"username": "mallory", "password": "a long enough one", "role": "admin"})),
            (Method::PUT, "/users/admin/password", json!({"password": "locked out you are"})),
            (Method::POST, "/api-keys", json!({"name": "spare", "scope": "admin"})),
            (Method::PUT, "/settings", json!({})),
            (Method::GET, "/nodes", Value::Null),
        ];
        for (method, path, body) in &attempts {
            let body = (!body.is_null()).then_some(body);
            let (status, reply) = server.call(method.clone(), path, Some(&key), body).await;
            assert_eq!(status, 403, "{method} {path} with a {scope} key: {reply}");
        }
        let (status, reply) = server.call(Method::GET, "/api/users", Some(&key), None).await;
        assert_eq!(status, 403, "{scope}: {reply}");
    }
    // Nothing happened: no new user, the administrator's password stands.
    let (_, users) = server.get("/users", Some(&admin)).await;
    assert_eq!(users.as_array().unwrap().len(), 1, "{users}");
    assert_eq!(server.login_as(ADMIN, crate::common::api::ADMIN_PASSWORD).await.0, 200);

    // The integration key does its one job: the webhook, and reading jobs.
    let sonarr = key_of(server, &admin, KeyScope::Integration).await;
    let test_event = json!({"eventType": "Test", "instanceName": "Sonarr"});
    let (status, answer) = server.post(&format!("/integrations/arr?apikey={sonarr}"), None, &test_event).await;
    assert_eq!((status, &answer["outcome"]), (200, &json!("test")), "{answer}");
    assert_eq!(server.get("/jobs", Some(&sonarr)).await.0, 200);
    assert_eq!(server.get("/libraries", Some(&sonarr)).await.0, 403);
    // A read key does not reach the webhook.
    let read = key_of(server, &admin, KeyScope::Read).await;
    assert_eq!(server.post(&format!("/integrations/arr?apikey={read}"), None, &test_event).await.0, 403);

    // The refusals are in the audit log with the key and the client.
    let (_, log) = server.get("/audit?pageSize=500", Some(&admin)).await;
    let refused_user = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["route"] == "/users" && entry["method"] == "POST" && entry["status"] == 403)
        .unwrap_or_else(|| panic!("no refused POST /users in {log}"))
        .clone();
    assert_eq!(refused_user["apiKey"]["name"], "operate key", "{refused_user}");
    assert!(refused_user["apiKey"]["id"].is_i64(), "{refused_user}");
    assert_eq!(refused_user["client"], "127.0.0.1", "{refused_user}");
}

api_test_on_both_databases!(a_found_key_cannot_take_over_the_service);

/// Keys never exceed their creator: an operator's keys stop at an operator's routes, and a
/// creator's demotion shrinks their keys at once.
#[actix_web::test]
async fn a_key_never_acts_past_its_creators_role() {
    let server = TestServer::sqlite().await;
    let admin = server.login().await;
    let (status, _) = server
        .post("/users", Some(&admin), &json!({"username": "ops", "password": "ops's long password", "role": "admin"}))
        .await;
    assert_eq!(status, 201);
    let (_, body) = server.login_as("ops", "ops's long password").await;
    let ops = body["token"].as_str().unwrap().to_string();
    let key = key_of(&server, &ops, KeyScope::Admin).await;
    assert_eq!(server.get("/settings", Some(&key)).await.0, 200);
    assert_eq!(server.put("/users/ops/role", Some(&admin), &json!({"role": "operator"})).await.0, 204);
    let (status, body) = server.get("/settings", Some(&key)).await;
    assert_eq!(status, 403, "{body}");
    assert!(message(&body).starts_with("GET /settings needs the role admin"), "{body}");
    assert_eq!(server.post("/queue/pause-all", Some(&key), &json!({})).await.0, 200);
    server.finish().await;
}

/// A token names its account by id: delete bob, make bob again, and the first bob's token
/// (same name, same token version 0) is refused.
async fn a_recreated_users_old_token_is_refused(server: &TestServer) {
    let admin = server.login().await;
    let bob = json!({"username": "bob", "password": "bob's long password", "role": "admin"});
    assert_eq!(server.post("/users", Some(&admin), &bob).await.0, 201);
    let (_, body) = server.login_as("bob", "bob's long password").await;
    let old = body["token"].as_str().unwrap().to_string();
    assert_eq!(server.get("/users", Some(&old)).await.0, 200);
    assert_eq!(server.delete("/users/bob", Some(&admin)).await.0, 204);
    assert_eq!(server.post("/users", Some(&admin), &bob).await.0, 201);
    let (status, body) = server.get("/users", Some(&old)).await;
    assert_eq!(status, 401, "the first bob's token works for the second: {body}");
    let (_, body) = server.login_as("bob", "bob's long password").await;
    assert_eq!(server.get("/users", Some(body["token"].as_str().unwrap())).await.0, 200);
}

api_test_on_both_databases!(a_recreated_users_old_token_is_refused);

/// `page` is bounded and its offset computed without overflow: past the bound, 400.
async fn a_page_past_the_bound_is_refused(server: &TestServer) {
    let admin = server.login().await;
    for path in ["/jobs", "/audit"] {
        for page in ["18446744073709551615", "1000001"] {
            let (status, body) = server.get(&format!("{path}?page={page}&pageSize=500"), Some(&admin)).await;
            assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_query")), "{path} {page}: {body}");
        }
        let (status, body) = server.get(&format!("{path}?page=1000000&pageSize=500"), Some(&admin)).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(body["items"], json!([]), "{body}");
    }
}

api_test_on_both_databases!(a_page_past_the_bound_is_refused);
