//! A property run against the API's own OpenAPI document: every documented operation gets
//! many generated requests (odd path parameters, queries, JSON bodies of any shape, with and
//! without a token). Whatever the input, the server answers, and never with a 5xx.
//! Seeded: `CONDENSE_FUZZ_SEED` repeats a run; `CONDENSE_FUZZ_CASES` sets its size.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::common::api::TestServer;

const PATH_VALUES: &[&str] =
    &["1", "2", "0", "-1", "2147483648", "99999999999999999999", "abc", "%00", "%C3%A9", "..", "admin", "a%2Fb"];
const STRINGS: &[&str] = &[
    "",
    "a",
    "QUEUED",
    "hevc",
    "av1",
    "libx265",
    "/",
    "/tmp",
    "../../etc/passwd",
    "%",
    "\u{0}",
    "é",
    "😀",
    "desc",
    "asc",
    "createdAt",
    "true",
    "-1",
    "1e309",
];

/// Percent-encodes everything but unreserved characters.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn random_string(rng: &mut StdRng) -> String {
    if rng.gen_bool(0.7) {
        STRINGS[rng.gen_range(0..STRINGS.len())].to_string()
    } else {
        (0..rng.gen_range(0..300)).map(|_| char::from(rng.gen_range(32u8..127))).collect()
    }
}

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.gen_range(0..if depth > 2 { 5 } else { 7 }) {
        0 => Value::Null,
        1 => json!(rng.gen_bool(0.5)),
        2 => json!(rng.gen_range(-5i64..100_000)),
        3 => json!([i64::MIN, i64::MAX, -1, 0, 51, 63, 64, 1_000_000][rng.gen_range(0..8)]),
        4 => json!(random_string(rng)),
        5 => Value::Array((0..rng.gen_range(0..4)).map(|_| random_value(rng, depth + 1)).collect()),
        _ => {
            let mut map = serde_json::Map::new();
            for _ in 0..rng.gen_range(0..5) {
                map.insert(random_string(rng), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
    }
}

/// A body near the operation's schema: its property names with random values, sometimes
/// fewer or more of them, sometimes not JSON at all.
fn random_body(rng: &mut StdRng, doc: &Value, operation: &Value) -> Vec<u8> {
    let mut schema = &operation["requestBody"]["content"]["application/json"]["schema"];
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or_default();
        schema = &doc["components"]["schemas"][name];
    }
    match rng.gen_range(0..10) {
        0 => b"{\"".to_vec(),
        1 => random_string(rng).into_bytes(),
        2 => random_value(rng, 0).to_string().into_bytes(),
        _ => {
            let mut map = serde_json::Map::new();
            if let Some(properties) = schema["properties"].as_object() {
                for name in properties.keys() {
                    if rng.gen_bool(0.8) {
                        map.insert(name.clone(), random_value(rng, 1));
                    }
                }
            }
            if rng.gen_bool(0.1) {
                map.insert(random_string(rng), random_value(rng, 1));
            }
            Value::Object(map).to_string().into_bytes()
        }
    }
}

#[actix_web::test]
async fn generated_requests_for_every_documented_operation_never_get_a_5xx() {
    let seed =
        std::env::var("CONDENSE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    let cases: usize = std::env::var("CONDENSE_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(25);
    eprintln!("fuzz seed {seed} (CONDENSE_FUZZ_SEED={seed} repeats this run), {cases} cases per operation");
    let mut rng = StdRng::seed_from_u64(seed);
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    // Something for the ids to hit.
    let media = tempfile::tempdir().unwrap();
    server.post("/libraries", Some(&token), &json!({"name": "fuzz", "paths": [media.path()], "watch": false})).await;
    let (status, doc) = server.get("/openapi.json", Some(&token)).await;
    assert_eq!(status, 200);
    let mut requests = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if method == "parameters" {
                continue;
            }
            let method = actix_web::http::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            for _ in 0..cases {
                let mut concrete = path.clone();
                while let (Some(open), Some(close)) = (concrete.find('{'), concrete.find('}')) {
                    let value = PATH_VALUES[rng.gen_range(0..PATH_VALUES.len())];
                    concrete.replace_range(open..=close, value);
                }
                let mut query = Vec::new();
                for p in operation["parameters"].as_array().into_iter().flatten() {
                    if p["in"] == "query" && rng.gen_bool(0.7) {
                        let name = p["name"].as_str().unwrap_or("x");
                        let value = random_string(&mut rng);
                        query.push(format!("{name}={}", encode(&value)));
                    }
                }
                let prefix = if rng.gen_bool(0.5) { "/api" } else { "" };
                let url = if query.is_empty() {
                    format!("{prefix}{concrete}")
                } else {
                    format!("{prefix}{concrete}?{}", query.join("&"))
                };
                let auth = if rng.gen_bool(0.9) { Some(token.as_str()) } else { None };
                let body =
                    operation.get("requestBody").map(|_| ("application/json", random_body(&mut rng, &doc, operation)));
                let (status, _, reply) = server.send(method.clone(), &url, auth, body.clone()).await;
                requests += 1;
                assert!(
                    status < 500,
                    "{method} {url} -> {status}: {}\nbody sent: {:?}\nseed {seed}",
                    String::from_utf8_lossy(&reply),
                    body.map(|(_, b)| String::from_utf8_lossy(&b).into_owned())
                );
            }
        }
    }
    eprintln!("fuzz: {requests} requests, no 5xx");
    assert!(requests > 100);
    server.finish().await;
}
