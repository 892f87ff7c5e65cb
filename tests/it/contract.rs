//! The API's contract against the real server: what /openapi.json states is what the server
//! does at its edges. A refused method names the allowed ones, every error is the JSON
//! error body (a feed request that is no handshake, malformed JSON), and a value just past a
//! bound the document states is refused, with the bound stated as the handler checks it.
//! schemathesis (`scripts/schemathesis.sh`, in `make test`) explores the rest.

use actix_web::http::Method;
use serde_json::{json, Value};

use crate::common::api::TestServer;

/// The document as the server serves it.
async fn document(server: &TestServer, token: &str) -> Value {
    let (status, doc) = server.get("/openapi.json", Some(token)).await;
    assert_eq!(status, 200, "{doc}");
    doc
}

/// `value`, or what its `$ref` points to in `doc`.
fn resolved<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str() {
        Some(reference) => doc.pointer(reference.trim_start_matches('#')).unwrap_or(&Value::Null),
        None => value,
    }
}

/// A schema's property (through a `$ref`).
fn property<'a>(doc: &'a Value, schema: &str, name: &str) -> &'a Value {
    &doc["components"]["schemas"][schema]["properties"][name]
}

/// A query parameter's schema of an operation.
fn query_parameter<'a>(doc: &'a Value, path: &str, method: &str, name: &str) -> &'a Value {
    let parameters = doc["paths"][path][method]["parameters"].as_array().unwrap();
    &parameters.iter().find(|p| p["name"] == name && p["in"] == "query").unwrap()["schema"]
}

/// The documented answer `status` of an operation is the JSON error body.
fn documents_an_error(doc: &Value, path: &str, method: &str, status: &str) {
    let answer = resolved(doc, &doc["paths"][path][method]["responses"][status]);
    assert_eq!(
        answer["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
        "{method} {path} does not document {status} as the error body: {answer}"
    );
}

fn is_json(headers: &awc::http::header::HeaderMap) -> bool {
    headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"))
}

#[actix_web::test]
async fn a_refused_method_is_answered_with_the_allowed_ones() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    for (path, allowed) in [
        ("/libraries", vec!["GET", "POST"]),
        ("/api/libraries/1", vec!["GET", "PUT", "DELETE"]),
        ("/jobs/1/pause", vec!["POST"]),
        ("/auth/password", vec!["PUT"]),
    ] {
        let (status, headers, body) = server.send(Method::PATCH, path, Some(&token), None).await;
        assert_eq!(status, 405, "{path}");
        let allow = headers.get("allow").unwrap_or_else(|| panic!("405 on {path} without Allow")).to_str().unwrap();
        let mut named: Vec<&str> = allow.split(',').map(str::trim).collect();
        named.sort_unstable();
        let mut expected = allowed.clone();
        expected.sort_unstable();
        assert_eq!(named, expected, "{path}: Allow {allow}");
        assert!(is_json(&headers), "{path}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "method_not_allowed", "{body}");
    }
    server.finish().await;
}

#[actix_web::test]
async fn the_feed_asked_without_an_upgrade_answers_the_json_error_it_documents() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    for path in ["/ws", "/api/ws", "/"] {
        let (status, headers, body) = server.send(Method::GET, path, Some(&token), None).await;
        assert_eq!(status, 400, "{path}");
        assert!(is_json(&headers), "{path}: {headers:?}");
        let body: Value = serde_json::from_slice(&body).unwrap_or_else(|_| panic!("{path}: not JSON: {body:?}"));
        assert_eq!(body["error"]["code"], "not_a_websocket", "{body}");
    }
    documents_an_error(&document(&server, &token).await, "/ws", "get", "400");
    server.finish().await;
}

#[actix_web::test]
async fn malformed_json_is_the_documented_400_wherever_a_body_is_read() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let doc = document(&server, &token).await;
    for (method, path, documented) in [
        (Method::PUT, "/auth/password", "/auth/password"),
        (Method::PUT, "/settings/arr", "/settings/arr"),
        (Method::POST, "/api/jobs/1/priority", "/jobs/{id}/priority"),
    ] {
        let (status, headers, body) =
            server.send(method.clone(), path, Some(&token), Some(("application/json", b"{,}".to_vec()))).await;
        assert_eq!(status, 400, "{method} {path}");
        assert!(is_json(&headers), "{method} {path}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "malformed_json", "{body}");
        documents_an_error(&doc, documented, &method.as_str().to_lowercase(), "400");
    }
    // The password was not changed: the token still works.
    assert_eq!(server.get("/auth/me", Some(&token)).await.0, 200);
    server.finish().await;
}

#[actix_web::test]
async fn a_value_just_past_a_documented_bound_is_refused() {
    use condense::domain::arr::PRIORITIES;
    use condense::domain::paging::MAX_PAGE;
    use condense::domain::stats::MAX_TREND_DAYS;

    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let doc = document(&server, &token).await;

    // Query parameters: a 400 (invalid_query), the bound in the parameter's schema.
    let page = query_parameter(&doc, "/jobs", "get", "page");
    assert_eq!((page["minimum"].as_u64(), page["maximum"].as_u64()), (Some(1), Some(MAX_PAGE)), "{page}");
    for refused in ["/jobs?page=0".to_string(), format!("/jobs?page={}", MAX_PAGE + 1), "/audit?page=0".into()] {
        let (status, body) = server.get(&refused, Some(&token)).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_query")), "{refused}: {body}");
    }
    assert_eq!(server.get(&format!("/jobs?page={MAX_PAGE}"), Some(&token)).await.0, 200);
    let days = query_parameter(&doc, "/insights/savings", "get", "days");
    assert_eq!((days["minimum"].as_u64(), days["maximum"].as_u64()), (Some(1), Some(u64::from(MAX_TREND_DAYS))));
    assert_eq!(server.get(&format!("/insights/savings?days={}", MAX_TREND_DAYS + 1), Some(&token)).await.0, 400);
    assert_eq!(server.get("/insights/savings?days=0", Some(&token)).await.0, 400);
    assert_eq!(server.get(&format!("/insights/savings?days={MAX_TREND_DAYS}"), Some(&token)).await.0, 200);

    // Bodies: a 422 (validation_failed), the bound in the body's schema.
    let priority = property(&doc, "SetPriority", "priority");
    assert_eq!(
        (priority["minimum"].as_i64(), priority["maximum"].as_i64()),
        (Some(i64::from(*PRIORITIES.start())), Some(i64::from(*PRIORITIES.end()))),
        "{priority}"
    );
    let (status, body) =
        server.post("/jobs/1/priority", Some(&token), &json!({ "priority": PRIORITIES.end() + 1 })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("validation_failed")), "{body}");

    // "Get a new copy" takes `true` alone: `false` is refused (health.rs tests the 422), so the
    // document offers no other.
    assert_eq!(property(&doc, "Regrab", "confirm")["enum"], json!([true]));

    let password = property(&doc, "CreateUser", "password");
    let shortest = usize::try_from(password["minLength"].as_u64().unwrap()).unwrap();
    assert_eq!(shortest, condense::security::MIN_PASSWORD_LEN);
    let (status, body) = server
        .post("/users", Some(&token), &json!({ "username": "newcomer", "password": "x".repeat(shortest - 1) }))
        .await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("validation_failed")), "{body}");

    // A library's name: the pattern counts the name as the server does, trimmed.
    let max = condense::http::libraries::MAX_NAME_CHARS;
    let name = regex::Regex::new(property(&doc, "CreateLibrary", "name")["pattern"].as_str().unwrap()).unwrap();
    assert!(name.is_match(&"n".repeat(max)) && name.is_match(&format!("  {}  ", "n".repeat(max))));
    assert!(!name.is_match(&"n".repeat(max + 1)) && !name.is_match("   "));
    for refused in ["n".repeat(max + 1), "   ".into()] {
        let (status, body) = server.post("/libraries", Some(&token), &json!({ "name": refused, "paths": ["/"] })).await;
        assert_eq!((status, body["error"]["code"].as_str()), (422, Some("validation_failed")), "{body}");
        assert!(body["error"]["message"].as_str().unwrap().starts_with("name"), "{body}");
    }

    // A schedule's windows: at most MAX_WINDOWS, in a time zone of the database.
    let windows = &doc["components"]["schemas"]["Schedule"]["properties"]["windows"];
    assert_eq!(windows["maxItems"].as_u64(), Some(condense::domain::schedule::MAX_WINDOWS as u64), "{windows}");
    let window = json!({ "days": ["mon"], "start": "01:00", "end": "02:00" });
    let too_many = vec![window; condense::domain::schedule::MAX_WINDOWS + 1];
    let (status, body) =
        server.put("/schedule", Some(&token), &json!({ "timeZone": "UTC", "windows": too_many })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("validation_failed")), "{body}");
    let zones = property(&doc, "Schedule", "timeZone")["enum"].as_array().unwrap();
    assert!(zones.contains(&json!("Europe/Berlin")) && !zones.contains(&json!("Europe/Atlantis")));
    server.finish().await;
}

#[actix_web::test]
async fn a_page_size_past_the_largest_is_served_as_the_largest_where_the_document_allows_it() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let doc = document(&server, &token).await;
    let dir = tempfile::tempdir().unwrap();
    let library = server.library(&token, dir.path()).await;
    let health = format!("/libraries/{library}/health");
    for (documented, asked) in
        [("/jobs", "/jobs".to_string()), ("/audit", "/audit".into()), ("/libraries/{id}/health", health)]
    {
        // The largest the server reads: a schema-valid request it then refuses would be a
        // contract broken (schemathesis found the health listing's int64 bound so).
        let size = query_parameter(&doc, documented, "get", "pageSize");
        assert_eq!(
            (size["minimum"].as_u64(), size["maximum"].as_u64()),
            (Some(1), Some(u64::MAX)),
            "{documented}: {size}"
        );
        let (status, body) = server.get(&format!("{asked}?pageSize={}", u64::MAX), Some(&token)).await;
        let largest = condense::domain::paging::MAX_PAGE_SIZE;
        assert_eq!((status, body["pageSize"].as_u64()), (200, Some(largest)), "{asked}: {body}");
    }
    server.finish().await;
}

/// Whether `body` meets one branch of a rule between fields as the document writes them
/// (`required`, and per property `$ref` to an enum of names, `type: null`, `enum`, `const`).
fn meets(doc: &Value, branch: &Value, body: &Value) -> bool {
    let required = branch["required"].as_array().unwrap();
    if !required.iter().all(|name| body.get(name.as_str().unwrap()).is_some()) {
        return false;
    }
    branch["properties"].as_object().unwrap().iter().all(|(name, rule)| {
        let Some(value) = body.get(name) else { return true };
        let rule = resolved(doc, rule);
        if rule["type"] == "null" {
            return value.is_null();
        }
        if let Some(names) = rule["enum"].as_array() {
            return names.contains(value);
        }
        rule.get("const").is_some_and(|constant| constant == value)
    })
}

#[actix_web::test]
async fn rules_between_fields_are_documented_as_the_handlers_check_them() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let doc = document(&server, &token).await;

    // A notification target: its URL's scheme and length, its events, its headers.
    let target = &doc["components"]["schemas"]["TargetBody"]["properties"];
    let url = regex::Regex::new(target["url"]["pattern"].as_str().unwrap()).unwrap();
    let header = regex::Regex::new(target["headers"]["propertyNames"]["pattern"].as_str().unwrap()).unwrap();
    let events = &target["events"];
    assert_eq!(events["minItems"], 1);
    let subscribable = events["items"]["enum"].as_array().unwrap();
    let cases = [
        ("http://hooks.example/a", json!(["job.completed"]), json!({}), true),
        ("  https://hooks.example  ", json!(["disk.at_risk", "file.damaged"]), json!({ "X-Token": "a b" }), true),
        ("ftp://hooks.example/a", json!(["job.completed"]), json!({}), false),
        ("http://a", json!(["job.completed"]), json!({}), false),
        ("http://hooks.example/a", json!([]), json!({}), false),
        ("http://hooks.example/a", json!(["test"]), json!({}), false),
        ("http://hooks.example/a", json!(["file.replaced"]), json!({}), false),
        ("http://hooks.example/a", json!(["job.failed"]), json!({ "bad name": "x" }), false),
    ];
    for (n, (given, events, headers, taken)) in cases.into_iter().enumerate() {
        let listed = events.as_array().unwrap();
        let documented = url.is_match(given)
            && !listed.is_empty()
            && listed.iter().all(|e| subscribable.contains(e))
            && headers.as_object().unwrap().keys().all(|name| header.is_match(name));
        assert_eq!(documented, taken, "{given} {events} {headers}");
        let body =
            json!({ "name": format!("t{n}"), "kind": "webhook", "url": given, "events": events, "headers": headers });
        let (status, answer) = server.post("/notifications", Some(&token), &body).await;
        assert_eq!(status, if taken { 201 } else { 422 }, "{body}: {answer}");
    }

    // A connection: a new one needs its key (the POST body's rule), a change keeps the
    // stored one (the PUT body has no such rule).
    let post = &doc["paths"]["/connections"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(post["allOf"][1]["required"], json!(["apiKey"]), "{post}");
    let put = &doc["paths"]["/connections/{id}"]["put"]["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(put["$ref"], "#/components/schemas/ConnectionBody", "{put}");
    let connection = json!({ "name": "plex", "kind": "plex", "url": "http://plex.example:32400" });
    let (status, answer) = server.post("/connections", Some(&token), &connection).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (422, Some("validation_failed")), "{answer}");
    let mut with_key = connection.clone();
    with_key["apiKey"] = json!("   ");
    assert_eq!(server.post("/connections", Some(&token), &with_key).await.0, 422);
    with_key["apiKey"] = json!("token");
    let (status, made) = server.post("/connections", Some(&token), &with_key).await;
    assert_eq!(status, 201, "{made}");
    let (status, changed) = server.put(&format!("/connections/{}", made["id"]), Some(&token), &connection).await;
    assert_eq!((status, changed["hasApiKey"].as_bool()), (200, Some(true)), "{changed}");

    // An API key: a scope, or readOnly true, or both where they agree; every combination
    // the document allows is made, every other one refused.
    let rule = &doc["components"]["schemas"]["CreateApiKey"]["allOf"][1]["anyOf"];
    let scopes = [None, Some(Value::Null), Some(json!("read")), Some(json!("operate"))];
    let read_only = [None, Some(Value::Null), Some(json!(true)), Some(json!(false))];
    let mut n = 0;
    for scope in &scopes {
        for read_only in &read_only {
            n += 1;
            let mut body = json!({ "name": format!("key {n}") });
            if let Some(scope) = scope {
                body["scope"] = scope.clone();
            }
            if let Some(read_only) = read_only {
                body["readOnly"] = read_only.clone();
            }
            let documented = rule.as_array().unwrap().iter().any(|branch| meets(&doc, branch, &body));
            let (status, answer) = server.post("/api-keys", Some(&token), &body).await;
            assert_eq!(status, if documented { 201 } else { 422 }, "{body}: {answer}");
        }
    }
    server.finish().await;
}
