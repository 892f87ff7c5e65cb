//! `Body`, the JSON request body of every handler: read as a JSON object first, then as the
//! handler's type. serde's derived structs also take a JSON array, their fields by position
//! (`["secret"]` as a password; schemathesis found it), which no schema of this API allows:
//! every request body is an object. Limits and error answers are `web::JsonConfig`'s
//! (`http::json_config`): a non-object or a wrong field is 422 `invalid_body`, text that is
//! no JSON 400 `malformed_json`.

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;

use actix_web::error::JsonPayloadError;
use actix_web::{dev::Payload, web, FromRequest, HttpRequest};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::AppError;

/// A request body of type `T`, given as a JSON object.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T> Body<T> {
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Deref for Body<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for Body<T> {
    type Error = actix_web::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let object = web::Json::<Map<String, Value>>::from_request(req, payload);
        Box::pin(async move {
            let object = object.await?.into_inner();
            serde_json::from_value(Value::Object(object))
                .map(Body)
                .map_err(|e| AppError::from(JsonPayloadError::Deserialize(e)).into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct One {
        name: String,
    }

    async fn read(body: &str) -> Result<Body<One>, actix_web::Error> {
        let (req, mut payload) = TestRequest::post()
            .insert_header(("content-type", "application/json"))
            .app_data(crate::http::json_config())
            .set_payload(body.to_string())
            .to_http_parts();
        Body::<One>::from_request(&req, &mut payload).await
    }

    fn code(err: actix_web::Error) -> (u16, String) {
        let response = err.error_response();
        let status = response.status().as_u16();
        (status, format!("{err}"))
    }

    #[actix_web::test]
    async fn an_object_is_read_and_anything_else_is_refused_with_its_reason() {
        assert_eq!(read(r#"{"name": "a"}"#).await.unwrap().name, "a");
        // Serde's own reading would take these as `One { name: "a" }`.
        for array in [r#"["a"]"#, "[]", r#""a""#, "1", "null"] {
            let (status, message) = code(read(array).await.unwrap_err());
            assert_eq!(status, 422, "{array}: {message}");
            assert!(message.contains("expected a map"), "{array}: {message}");
        }
        let (status, message) = code(read(r#"{"name": "a", "more": 1}"#).await.unwrap_err());
        assert_eq!(status, 422, "{message}");
        assert!(message.contains("unknown field `more`"), "{message}");
        assert_eq!(code(read(r#"{"name": 1}"#).await.unwrap_err()).0, 422);
        assert_eq!(code(read("{").await.unwrap_err()).0, 400);
    }
}
