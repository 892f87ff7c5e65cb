//! A library's health as the API gives it: waiting for its run to end, one file's result.
//! The same for the API in the test's process (`TestServer::url("")`) and a node's process
//! (`ServerProcess::api`).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::cluster::call;

/// The health of library `library` at `api` (the server's base URL) once its run has ended
/// (fails the test after `limit` s).
pub async fn ended(api: &str, token: &str, library: i64, limit: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(limit);
    loop {
        let (status, health) =
            call("GET", &format!("{api}/libraries/{library}/health?pageSize=500"), Some(token), None).await;
        assert_eq!(status, 200, "{health}");
        if health["run"]["status"].as_str().is_some_and(|s| s != "RUNNING") {
            return health;
        }
        assert!(Instant::now() < deadline, "the health check never ended: {health}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The result for the file whose path ends with `name`.
pub fn verdict_of<'a>(health: &'a Value, name: &str) -> &'a Value {
    health["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(name))
        .unwrap_or_else(|| panic!("no result for {name}: {health}"))
}
