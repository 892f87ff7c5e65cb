//! A small HTTP/1.1 client over a tokio `TcpStream`: keep-alive, `Content-Length` and
//! chunked bodies. Enough for the API calls of the benchmarks and for the load generator,
//! which must cost the (shared, 2-core) machine as little as possible.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::util::{percentile, Ctx, Res, PASSWORD};

pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A whole response at the start of `buf`: status, body and the bytes it took; None while
/// incomplete.
fn parse(buf: &[u8]) -> Res<Option<(u16, Vec<u8>, usize)>> {
    let Some(head_end) = find(buf, b"\r\n\r\n") else { return Ok(None) };
    let head = std::str::from_utf8(&buf[..head_end]).ctx("response head")?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ctx("no status line")?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().ctx("content-length")?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let body_start = head_end + 4;
    if chunked {
        let mut body = Vec::new();
        let mut at = body_start;
        loop {
            let Some(line_end) = find(&buf[at..], b"\r\n") else { return Ok(None) };
            let size_text = std::str::from_utf8(&buf[at..at + line_end]).ctx("chunk size")?;
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16).ctx("chunk size")?;
            let data = at + line_end + 2;
            if size == 0 {
                // The last chunk, then (no trailers) an empty line.
                return Ok((buf.len() >= data + 2).then(|| (status, body, data + 2)));
            }
            if buf.len() < data + size + 2 {
                return Ok(None);
            }
            body.extend_from_slice(&buf[data..data + size]);
            at = data + size + 2;
        }
    }
    let length = length.unwrap_or(0);
    if buf.len() < body_start + length {
        return Ok(None);
    }
    Ok(Some((status, buf[body_start..body_start + length].to_vec(), body_start + length)))
}

impl Conn {
    pub async fn connect(addr: &str) -> Res<Conn> {
        let stream = TcpStream::connect(addr).await.ctx(&format!("connecting to {addr}"))?;
        stream.set_nodelay(true).ctx("TCP_NODELAY")?;
        Ok(Conn { stream, buf: Vec::with_capacity(64 * 1024) })
    }

    /// One request on this connection: status and body.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Res<(u16, Vec<u8>)> {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        if let Some(token) = token {
            req.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        let body = body.map(std::string::ToString::to_string).unwrap_or_default();
        if !body.is_empty() || method == "POST" || method == "PUT" {
            req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        self.stream.write_all(req.as_bytes()).await.ctx("sending a request")?;
        loop {
            if let Some((status, body, used)) = parse(&self.buf)? {
                self.buf.drain(..used);
                return Ok((status, body));
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk).await.ctx("reading a response")?;
            if n == 0 {
                return Err(format!("{method} {path}: connection closed before the response ended"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// One request on a fresh connection; the body as JSON (Null when empty or not JSON).
pub async fn call(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Res<(u16, Value)> {
    let mut conn = Conn::connect(addr).await?;
    let (status, bytes) = conn.request(method, path, token, body).await?;
    Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
}

/// Like [`call`], failing unless the status is `want`.
pub async fn expect(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
    want: u16,
) -> Res<Value> {
    let (status, value) = call(addr, method, path, token, body).await?;
    if status != want {
        return Err(format!("{method} {path}: status {status}, expected {want}: {value}"));
    }
    Ok(value)
}

/// A token for `admin`.
pub async fn login(addr: &str) -> Res<String> {
    let body = serde_json::json!({"username": "admin", "password": PASSWORD});
    let value = expect(addr, "POST", "/auth/login", None, Some(&body), 200).await?;
    Ok(value["token"].as_str().ctx("no token in the login answer")?.to_string())
}

/// What a closed-loop load run measured.
#[derive(Debug, Clone, Default)]
pub struct Load {
    pub requests: u64,
    pub errors: u64,
    pub seconds: f64,
    /// Sorted latencies, microseconds.
    pub latencies_us: Vec<u64>,
}

impl Load {
    pub fn rps(&self) -> f64 {
        self.requests as f64 / self.seconds.max(1e-9)
    }

    pub fn p_ms(&self, p: f64) -> f64 {
        percentile(&self.latencies_us, p) as f64 / 1000.0
    }
}

/// `connections` keep-alive connections, each sending GET to its path again as soon as the
/// previous answer is complete, for `duration`; connection `i` asks for `paths[i % len]`.
pub async fn load(addr: &str, paths: &[String], token: &str, connections: usize, duration: Duration) -> Res<Load> {
    let results = Rc::new(RefCell::new(Load::default()));
    let mut conns = Vec::new();
    for _ in 0..connections {
        conns.push(Conn::connect(addr).await?);
    }
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for (i, mut conn) in conns.into_iter().enumerate() {
        let path = paths.get(i % paths.len().max(1)).ctx("no path to load")?.clone();
        let (addr, token, results) = (addr.to_string(), token.to_string(), results.clone());
        tasks.push(actix_web::rt::spawn(async move {
            let mut mine = Vec::new();
            let mut errors = 0;
            while Instant::now() < deadline {
                let sent = Instant::now();
                match conn.request("GET", &path, Some(&token), None).await {
                    Ok((200, _)) => mine.push(sent.elapsed().as_micros() as u64),
                    Ok(_) => errors += 1,
                    Err(_) => {
                        errors += 1;
                        match Conn::connect(&addr).await {
                            Ok(c) => conn = c,
                            Err(_) => break,
                        }
                    }
                }
            }
            let mut r = results.borrow_mut();
            r.requests += mine.len() as u64;
            r.errors += errors;
            r.latencies_us.extend(mine);
        }));
    }
    for task in tasks {
        task.await.ctx("a load task")?;
    }
    let mut load = results.take();
    load.seconds = started.elapsed().as_secs_f64();
    load.latencies_us.sort_unstable();
    Ok(load)
}
