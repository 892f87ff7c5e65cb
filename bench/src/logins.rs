//! 200 logins at once: the main node's memory while they are checked. Each password check
//! (argon2) takes 19 MiB; `condense serve` bounds the checks running at once (one per core,
//! 2 to 8) and queues the rest, so the peak stays near idle plus slots x 19 MiB however
//! many logins arrive. Each login comes from its own client address (behind
//! `TRUSTED_PROXIES`), with the right password, so none is refused by the login throttle
//! and every one takes a check.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http::expect;
use crate::report::Report;
use crate::util::{mib, Res, Server, TempDir, PASSWORD};
use crate::{command, Config};

const LOGINS: usize = 200;

/// One login, sent as if a proxy forwarded it for `client`: the answer's status.
async fn login_for(addr: &str, client: &str) -> Res<u16> {
    let body = serde_json::json!({"username": "admin", "password": PASSWORD}).to_string();
    let request = format!(
        "POST /auth/login HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         X-Forwarded-For: {client}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    stream.write_all(request.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.map_err(|e| format!("read: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    answer.split(' ').nth(1).and_then(|code| code.parse().ok()).ok_or_else(|| format!("no status in {answer:?}"))
}

pub async fn run(cfg: &Config, report: &mut Report) -> Res<()> {
    let cmd = command("logins");
    let tmp = TempDir::new(&cfg.tmp, "logins")?;
    let server = Server::start(&cfg.bin, &tmp.path().join("data"), &[("TRUSTED_PROXIES", "127.0.0.1".into())])?;
    expect(&server.addr, "GET", "/healthz", None, None, 200).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = server.mem()?;
    let started = Instant::now();
    let tasks: Vec<_> = (0..LOGINS)
        .map(|i| {
            let addr = server.addr.clone();
            actix_web::rt::spawn(async move { login_for(&addr, &format!("10.77.{}.{}", i / 250, i % 250 + 1)).await })
        })
        .collect();
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    for task in tasks {
        let status = task.await.map_err(|e| format!("a login task: {e}"))??;
        *statuses.entry(status).or_default() += 1;
    }
    let took = started.elapsed().as_secs_f64();
    let after = server.mem()?;
    let answered = statuses.iter().map(|(status, n)| format!("{n} x {status}")).collect::<Vec<_>>().join(", ");
    println!("logins at once: {answered} in {took:.1} s; RSS after {}, peak {}", after.describe(), mib(after.hwm_kb));
    report.row(
        format!("main node RSS peak, {LOGINS} logins at once"),
        format!("{} (idle {})", mib(after.hwm_kb), mib(idle.rss_kb)),
        "< idle + 8 x 19 MiB",
        &cmd,
    );
    report.section(
        "Logins at once",
        format!(
            "{LOGINS} `POST /auth/login` sent at once to a fresh main node (SQLite), each from its own client \
             address behind `TRUSTED_PROXIES`, all with the right password, so each takes a password check \
             (argon2, 19 MiB). Answered: {answered} in {took:.1} s. RSS before: {idle}; after: {after}; peak \
             (`VmHWM`): {peak}. Checks at once are bounded (one per core, 2 to 8; `AppState::password_checks`), \
             the rest wait in line up to 10 s, then 503 with `Retry-After`.\n",
            idle = idle.describe(),
            after = after.describe(),
            peak = mib(after.hwm_kb),
        ),
    );
    Ok(())
}
