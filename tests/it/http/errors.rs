//! Client errors answered as JSON: malformed bodies, unknown fields, wrong types, unknown
//! routes and methods.

use actix_web::http::Method;
use condense::http::endpoints;
use serde_json::{json, Value};

use super::takes_body;
use crate::common::api::{code, message, TestServer, ADMIN, PREFIXES};

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
            let path = format!(
                "{prefix}{}",
                endpoint.path.replace("{id}", "1").replace("{fileId}", "1").replace("{username}", ADMIN)
            );
            let what = format!("{} {path}", endpoint.method);
            // serde reads a body front to back: an unknown field met before the syntax error
            // is reported as such (422), so the malformed bodies here fail before any field.
            // Arrays of one string or number: serde's derived structs take them, fields by
            // position (a password, a priority, a health check's depth), and no schema does.
            let cases: [(&str, &[u8], u16, &str); 8] = [
                ("application/json", b"{\"nam", 400, "malformed_json"),
                ("application/json", b"{,}", 400, "malformed_json"),
                ("application/json", b"not json at all", 400, "malformed_json"),
                ("application/json", b"{\"surprise\": true}", 422, "invalid_body"),
                ("application/json", b"[1, 2, 3]", 422, "invalid_body"),
                ("application/json", b"[\"quick password\"]", 422, "invalid_body"),
                ("application/json", b"[5]", 422, "invalid_body"),
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
        // The messages name the path as asked: the API listener serves its unprefixed paths
        // through the /api routes (`http::prefix`), which the caller never asked for.
        let (status, body) = server.get(&format!("{prefix}/no/such/thing"), Some(&token)).await;
        assert_eq!((status, code(&body)), (404, "not_found"), "{body}");
        assert_eq!(message(&body), format!("no route for GET {prefix}/no/such/thing"), "{body}");
        let (status, body) = server.call(Method::PATCH, &format!("{prefix}/libraries"), Some(&token), None).await;
        assert_eq!((status, code(&body)), (405, "method_not_allowed"), "{body}");
        assert_eq!(message(&body), format!("PATCH is not allowed on {prefix}/libraries; allowed: GET, POST"), "{body}");
        // Without a token, a protected path answers 401 whatever the method.
        let (status, _) = server.call(Method::PATCH, &format!("{prefix}/libraries"), None, None).await;
        assert_eq!(status, 401);
    }
    server.finish().await;
}

/// The router decodes a percent-encoded path before it matches: `/%61pi/jobs` is
/// `/api/jobs`, and `/%63luster/link` the nodes' link (which wants a node's credential), on
/// the API listener as they were before it answered unprefixed paths with the /api routes.
#[actix_web::test]
async fn percent_encoded_paths_reach_the_routes_they_decode_to() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    for path in ["/%61pi/jobs", "/%6aobs", "/api/%6aobs"] {
        let (status, body) = server.get(path, Some(&token)).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, body) = server.get("/%63luster/link", None).await;
    assert_eq!(status, 401, "{body}");
    server.finish().await;
}
