//! Users: created, listed, given a role and a password, deleted; an administrator always
//! remains.

use condense::domain::access::UserRole;
use condense::repo;
use serde_json::json;

use super::user_with_role;
use crate::api_test_on_both_databases;
use crate::common::api::{code, message, TestServer, ADMIN, ADMIN_PASSWORD, PREFIXES};

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
    // Only an object: an array is refused, whatever it holds, and the password stays.
    let (status, body) = server.put("/users/bob/password", token, &json!(["an array password"])).await;
    assert_eq!((status, code(&body)), (422, "invalid_body"), "{body}");
    assert_eq!(server.login_as("bob", "a new password").await.0, 200);

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
