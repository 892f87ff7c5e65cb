//! The REST API over a real socket (`TestServer`), one file per part of the product:
//! authentication, the login limit, users, API keys, the audit log, shared reads, client
//! errors, libraries, settings, the licence, nodes, encoders, jobs, insights, the *arr
//! integration and the OpenAPI document; on SQLite and PostgreSQL, under both the bare and the /api
//! prefix. What more than one of them uses is here.

mod api_keys;
mod audit;
mod auth;
mod coalesce;
mod encoders;
mod errors;
mod insights;
mod integrations;
mod jobs;
mod libraries;
mod license;
mod login_limit;
mod nodes;
mod openapi;
mod settings;
mod users;

use condense::domain::access::UserRole;
use condense::domain::job::JobStatus;
use condense::repo;
use serde_json::{json, Value};

use crate::common::api::{code, TestServer};

/// A 404 or 405 from the router, not from a handler: the route is not registered.
fn is_unrouted(status: u16, body: &Value) -> bool {
    (status == 404 && body["error"]["message"].as_str().is_some_and(|m| m.starts_with("no route")))
        || (status == 405 && code(body) == "method_not_allowed")
}

/// A token signed with `secret` (HS256) carrying `claims`.
fn token_with(secret: &str, claims: &Value) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        claims,
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
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
        && path != "/health/recheck"
}

/// Folders named `names` in a new temporary folder (kept while the first value lives),
/// and their resolved paths, as libraries store them.
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

/// A job of `library_id` inserted as it is, `/media/{name}` its path (the file need not
/// exist): its id.
async fn insert_job(server: &TestServer, library_id: Option<i32>, name: &str, status: JobStatus, size: i64) -> i32 {
    let job = crate::common::rows::new_job(library_id, &format!("/media/{name}"), status);
    let job = repo::jobs::NewJob { source_size: size, source_mtime_ns: None, source_inode: None, ..job };
    repo::jobs::insert(server.db(), job).await.unwrap().id
}
