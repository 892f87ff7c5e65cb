//! The OpenAPI document: every registered route documented, with its answers and body.

use actix_web::http::Method;
use condense::http::{endpoints, Access};

use super::takes_body;
use crate::common::api::{TestServer, PREFIXES};

#[actix_web::test]
async fn openapi_documents_every_registered_route() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    for prefix in PREFIXES {
        let (status, doc) = server.get(&format!("{prefix}/openapi.json"), Some(&token)).await;
        assert_eq!(status, 200);
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let servers: Vec<&str> =
            doc["servers"].as_array().unwrap().iter().map(|s| s["url"].as_str().unwrap()).collect();
        assert_eq!(servers, ["/", "/api"]);
        let mut documented = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            documented += item.as_object().unwrap().keys().filter(|k| *k != "parameters").count();
            assert!(path != "/api" && !path.starts_with("/api/"), "{path}: paths are listed unprefixed");
        }
        let registered = endpoints();
        assert_eq!(documented, registered.len());
        for endpoint in registered {
            let operation = &doc["paths"][endpoint.path][endpoint.method.as_str().to_lowercase()];
            assert!(operation.is_object(), "{} {} is not documented", endpoint.method, endpoint.path);
            assert!(
                operation["responses"]["200"].is_object()
                    || operation["responses"]["101"].is_object()
                    || operation["responses"]["201"].is_object()
                    || operation["responses"]["202"].is_object()
                    || operation["responses"]["204"].is_object(),
                "{} {}",
                endpoint.method,
                endpoint.path
            );
            if endpoint.access == Access::Token {
                assert!(operation["responses"]["401"].is_object(), "{} {}", endpoint.method, endpoint.path);
            }
            if matches!(endpoint.method, Method::POST | Method::PUT) && takes_body(endpoint.path) {
                assert!(
                    operation["requestBody"].is_object(),
                    "{} {} has no request body",
                    endpoint.method,
                    endpoint.path
                );
            }
        }
    }
    server.finish().await;
}
