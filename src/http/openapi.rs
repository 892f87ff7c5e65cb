//! GET /openapi.json: the API described in OpenAPI 3.0, written by hand in `openapi.json`
//! next to this file. Tests check it lists every endpoint of `http::endpoints()`.

use actix_web::HttpResponse;

use super::auth::AuthUser;

pub const DOCUMENT: &str = include_str!("openapi.json");

pub async fn document(_user: AuthUser) -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(DOCUMENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{endpoints, Access};

    #[test]
    fn the_document_is_json_and_lists_exactly_the_registered_endpoints() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        assert_eq!(doc["openapi"].as_str().unwrap().get(..2), Some("3."));
        let paths = doc["paths"].as_object().unwrap();
        let mut documented = Vec::new();
        for (path, item) in paths {
            for method in item.as_object().unwrap().keys().filter(|k| *k != "parameters") {
                documented.push(format!("{} {path}", method.to_uppercase()));
            }
        }
        let mut registered: Vec<String> = endpoints().iter().map(|e| format!("{} {}", e.method, e.path)).collect();
        documented.sort();
        registered.sort();
        assert_eq!(documented, registered);
        for endpoint in endpoints() {
            let operation = &doc["paths"][endpoint.path][endpoint.method.as_str().to_lowercase()];
            let open = operation["security"].as_array().is_some_and(|s| s.is_empty());
            assert_eq!(open, endpoint.access == Access::Public, "{} {}", endpoint.method, endpoint.path);
            assert!(operation["responses"].is_object(), "{} {}", endpoint.method, endpoint.path);
        }
    }

    #[test]
    fn every_schema_reference_resolves() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        fn walk(value: &serde_json::Value, doc: &serde_json::Value) {
            match value {
                serde_json::Value::Object(map) => {
                    if let Some(reference) = map.get("$ref").and_then(|r| r.as_str()) {
                        let pointer = reference.strip_prefix('#').unwrap();
                        assert!(doc.pointer(pointer).is_some(), "dangling {reference}");
                    }
                    map.values().for_each(|v| walk(v, doc));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, doc)),
                _ => {}
            }
        }
        walk(&doc, &doc);
    }
}
