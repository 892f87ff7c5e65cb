//! The login limit: failed logins slow down the client and user that made them, and only
//! them; behind a trusted proxy each forwarded client is counted apart.

use chrono::Utc;
use serde_json::{json, Value};

use crate::common::api::{code, message, TestServer, ADMIN, ADMIN_PASSWORD, JWT_SECRET, TRUSTED_PROXY};

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
