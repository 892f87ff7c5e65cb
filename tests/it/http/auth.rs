//! Authentication: a bearer token on every route but health and login, refused when
//! expired, forged or revoked; each role's routes; login, refresh and the session's
//! maximum lifetime; one's own password and `/auth/me`.

use actix_web::http::Method;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Duration, Utc};
use condense::domain::access::UserRole;
use condense::http::{endpoints, Access};
use serde_json::{json, Value};

use super::{is_unrouted, token_with, user_with_role};
use crate::api_test_on_both_databases;
use crate::common::api::{code, concrete, message, TestServer, ADMIN, ADMIN_PASSWORD, JWT_SECRET, PREFIXES};

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
