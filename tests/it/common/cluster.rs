//! Nodes as `condense serve` processes on loopback: a main node and linked nodes started
//! with the test cluster token, and the API asked over HTTP as a browser or a script would.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::server::{command, ServerProcess};

pub const CLUSTER_TOKEN: &str = "cluster-token-for-tests-0123456789";
/// The first user's password on every node started here.
pub const PASSWORD: &str = "a long admin password";

/// A main node named "main" over `data` with `max_jobs` slots, one-second segments and
/// heartbeats, linked nodes offline after 4 s of silence, and `license` (key, public key)
/// installed when given.
pub fn main_command(data: &Path, max_jobs: u32, license: Option<&(String, String)>) -> Command {
    let mut cmd = command(data);
    cmd.env("CLUSTER_TOKEN", CLUSTER_TOKEN)
        .env("ADMIN_PASSWORD", PASSWORD)
        .env("NODE_NAME", "main")
        .env("MAX_JOBS", max_jobs.to_string())
        .env("HEARTBEAT_SECONDS", "1")
        .env("NODE_TIMEOUT_SECONDS", "4")
        .env("SEGMENT_SECONDS", "1");
    if let Some((key, public)) = license {
        cmd.env("LICENSE_KEY", key).env("LICENSE_PUBLIC_KEY", public);
    }
    cmd
}

/// A coordinating main node (no job slots) over `data` on API port `port`, started and
/// listening: started again on the same port, linked nodes find it where it was.
pub fn main_on_port(data: &Path, license: &(String, String), port: &str) -> ServerProcess {
    let mut cmd = main_command(data, 0, Some(license));
    cmd.env("PORT", port);
    ServerProcess::start(cmd)
}

/// `main_command`, started and listening.
pub fn main_node(data: &Path, max_jobs: u32, license: Option<&(String, String)>) -> ServerProcess {
    ServerProcess::start(main_command(data, max_jobs, license))
}

/// A main node in `dir/main` with `max_jobs` slots and a PRO licence (linked nodes need a
/// paid tier), started, and its first user's token.
pub async fn pro_main(dir: &Path, max_jobs: u32) -> (ServerProcess, String) {
    let main = main_node(&dir.join("main"), max_jobs, Some(&super::license::pro_key()));
    let token = login(&main).await;
    (main, token)
}

/// A test's own folder, with an empty library folder `media` in it.
pub fn media_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let media = dir.path().join("media");
    std::fs::create_dir_all(&media).unwrap();
    (dir, media)
}

/// A linked node named `name` over `data`, enrolling at `main_url` with the cluster token:
/// one slot, one-second segments, each encoded frame followed by a pause of `throttle` ms.
pub fn linked_command(data: &Path, main_url: &str, name: &str, throttle: u64) -> Command {
    as_linked(command(data), data, main_url, name, throttle)
}

/// `cmd` (the binary, or a wrapper that runs it) given a linked node's environment, as
/// `linked_command` describes.
pub fn as_linked(mut cmd: Command, data: &Path, main_url: &str, name: &str, throttle: u64) -> Command {
    cmd.env("DATA_DIR", data)
        .env("BIND", "127.0.0.1")
        .env("PORT", "0")
        .env("UI_PORT", "0")
        .env("ROLE", "linked")
        .env("MAIN_NODE_URL", main_url)
        .env("CLUSTER_TOKEN", CLUSTER_TOKEN)
        .env("NODE_NAME", name)
        .env("MAX_JOBS", "1")
        .env("SEGMENT_SECONDS", "1")
        .env("CONDENSE_THROTTLE_MS_PER_FRAME", throttle.to_string());
    cmd
}

/// A linked node named `name` of `main`, its DATA_DIR `dir/name`, started and listening.
pub fn linked(dir: &Path, main: &ServerProcess, name: &str, throttle: u64) -> ServerProcess {
    let data = dir.join(name);
    ServerProcess::start(linked_command(&data, &main.api, name, throttle))
}

/// Any request (`method` as HTTP spells it), with `body` sent as JSON: the status and the
/// body as JSON (Null when empty or not JSON). A pause-all waits for each running
/// transcoder to stop, longer than awc's default of 5 s.
pub async fn call(method: &str, url: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let client = awc::Client::builder().timeout(Duration::from_secs(120)).finish();
    let mut req = client.request(awc::http::Method::from_bytes(method.as_bytes()).unwrap(), url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let mut res = match body {
        Some(b) => req.send_json(&b).await.unwrap(),
        None => req.send().await.unwrap(),
    };
    let status = res.status().as_u16();
    let bytes = res.body().limit(16 << 20).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// A token for the first user of `node`.
pub async fn login(node: &ServerProcess) -> String {
    let body = json!({"username": "admin", "password": PASSWORD});
    let (status, body) = call("POST", &format!("{}/auth/login", node.api), None, Some(body)).await;
    assert_eq!(status, 200, "{body}");
    body["token"].as_str().unwrap().to_string()
}

/// The nodes as `GET /api/nodes` lists them.
pub async fn nodes(main: &ServerProcess, token: &str) -> Vec<Value> {
    call("GET", &format!("{}/api/nodes", main.api), Some(token), None).await.1.as_array().cloned().unwrap_or_default()
}

/// The node list once `ok` holds for it (fails the test, naming `what`, after `limit` s).
pub async fn wait_until<F: Fn(&[Value]) -> bool>(
    main: &ServerProcess,
    token: &str,
    what: &str,
    limit: u64,
    ok: F,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(limit);
    loop {
        let list = nodes(main, token).await;
        if ok(&list) {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {list:#?}\n{:#?}",
            main.output().iter().rev().take(30).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The status of the node named `name` in `list`.
pub fn status_of<'a>(list: &'a [Value], name: &str) -> Option<&'a str> {
    list.iter().find(|n| n["name"] == name).and_then(|n| n["status"].as_str())
}

/// Registered and answering: ONLINE, or DEGRADED by the load of a busy test machine.
pub fn up(list: &[Value], name: &str) -> bool {
    matches!(status_of(list, name), Some("ONLINE" | "DEGRADED"))
}

/// Every job, by file name.
pub async fn jobs(main: &ServerProcess, token: &str) -> Vec<Value> {
    let (_, page) =
        call("GET", &format!("{}/jobs?pageSize=500&sort=fileName&order=asc", main.api), Some(token), None).await;
    page["items"].as_array().cloned().unwrap_or_default()
}

/// The job with its history, its segments and its events, as `GET /jobs/{id}` answers it.
pub async fn job_detail(main: &ServerProcess, token: &str, id: i64) -> Value {
    let (status, detail) = call("GET", &format!("{}/jobs/{id}", main.api), Some(token), None).await;
    assert_eq!(status, 200, "{detail}");
    detail
}

/// A library over `dir` that encodes fast (x265 ultrafast) and does not watch.
pub async fn add_library(main: &ServerProcess, token: &str, dir: &Path) {
    let body = json!({"name": "media", "paths": [dir], "encoder": "libx265", "quality": 30, "preset": "ultrafast", "watch": false});
    let (status, library) = call("POST", &format!("{}/libraries", main.api), Some(token), Some(body)).await;
    assert_eq!(status, 201, "{library}");
}

/// The jobs once there are `n` and every one is COMPLETED or FAILED (fails the test after
/// `limit` s).
pub async fn wait_all_done(main: &ServerProcess, token: &str, n: usize, limit: u64) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(limit);
    loop {
        let all = jobs(main, token).await;
        if all.len() == n && all.iter().all(|j| matches!(j["status"].as_str(), Some("COMPLETED" | "FAILED"))) {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "jobs not done: {:#?}",
            all.iter().map(|j| (&j["fileName"], &j["status"], &j["node"])).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Whether this machine lets a process have its own mount namespace (else the test named
/// `test` prints that it is skipped).
pub fn mount_namespaces(test: &str) -> bool {
    let probe = Command::new("unshare").args(["--mount", "--propagation", "private", "true"]).status();
    let allowed = probe.is_ok_and(|s| s.success());
    if !allowed {
        eprintln!("SKIPPED {test}: no mount namespaces here");
    }
    allowed
}

/// The share a blind node does not see, `dir/shared`, and the library folder in it,
/// `dir/shared/media` (made).
pub fn hidden_share(dir: &Path) -> (PathBuf, PathBuf) {
    let hidden = dir.join("shared");
    let media = hidden.join("media");
    std::fs::create_dir_all(&media).unwrap();
    (hidden, media)
}

/// A linked node named `name` (DATA_DIR `dir/name`) in its own mount namespace, where an
/// empty tmpfs hides `hidden` (the share) from it.
pub fn blind_node(dir: &Path, hidden: &Path, main: &ServerProcess, name: &str) -> ServerProcess {
    ServerProcess::start(blind_command(dir, hidden, main, name))
}

/// The command of `blind_node`, to set more of its environment.
pub fn blind_command(dir: &Path, hidden: &Path, main: &ServerProcess, name: &str) -> Command {
    blind_command_leaving(dir, hidden, main, name, None)
}

/// As `blind_command`, with an empty file named `left` in the tmpfs: the folder the node
/// finds there is not empty (a stale share, another disk mounted there) yet holds none of
/// the files under `hidden`.
pub fn blind_command_leaving(
    dir: &Path,
    hidden: &Path,
    main: &ServerProcess,
    name: &str,
    left: Option<&str>,
) -> Command {
    let mut blind = Command::new("unshare");
    let mut script = format!("mount -t tmpfs tmpfs '{}'", hidden.display());
    if let Some(left) = left {
        script.push_str(&format!(" && : > '{}'", hidden.join(left).display()));
    }
    script.push_str(" && exec \"$0\" \"$@\"");
    blind.args(["--mount", "--propagation", "private", "sh", "-c", &script, crate::common::server::binary()]);
    as_linked(blind, &dir.join(name), &main.api, name, 0)
}

/// Whether the node named `node` sees the library named `library`, as `GET /nodes` says
/// (`None`: not reported, or no such node or library).
pub fn sees(list: &[Value], node: &str, library: &str) -> Option<bool> {
    let node = list.iter().find(|n| n["name"] == node)?;
    let sight = node["libraries"].as_array()?.iter().find(|l| l["name"] == library)?;
    sight["sees"].as_bool()
}

/// The names in `dir`, sorted, once they are `expected` (fails the test after `limit` s): a
/// node removes a job's folder in its WORK_DIR when it sees the job ended on the main node,
/// a moment after the main node says so.
pub async fn wait_for_names(dir: &Path, expected: &[&str], limit: u64) {
    let deadline = Instant::now() + Duration::from_secs(limit);
    loop {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        if names == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{} keeps {names:?}, not {expected:?}", dir.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
