//! One error type for the HTTP layer. Every module's error maps into it once, and it
//! renders as `{"error":{"code":"snake_case","message":"…"}}` with the matching status.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::repo::RepoError;

// Clone: a read shared by several requests hands each the same outcome (http::coalesce).
#[derive(Debug, Clone, thiserror::Error)]
pub enum AppError {
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String },
    #[error("{0}")]
    TooManyRequests(String),
    #[error("{0}")]
    Unavailable(String),
    /// Too much at once: answered 503 with `Retry-After` (seconds).
    #[error("{message}")]
    Busy { message: String, retry_after_secs: u64 },
    #[error("internal error")]
    Internal(String),
}

impl AppError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        AppError::BadRequest { code: "bad_request", message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        AppError::Unprocessable { code: "validation_failed", message: message.into() }
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        AppError::Conflict { code, message: message.into() }
    }

    pub fn code(&self) -> &'static str {
        match self {
            AppError::BadRequest { code, .. } => code,
            AppError::Unauthorized(_) => "unauthorized",
            AppError::Forbidden(_) => "forbidden",
            AppError::NotFound(_) => "not_found",
            AppError::MethodNotAllowed(_) => "method_not_allowed",
            AppError::Conflict { code, .. } => code,
            AppError::Unprocessable { code, .. } => code,
            AppError::TooManyRequests(_) => "too_many_requests",
            AppError::Unavailable(_) => "unavailable",
            AppError::Busy { .. } => "busy",
            AppError::Internal(_) => "internal",
        }
    }
}

/// Every error: `{"error":{"code","message"}}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

impl<'a> ErrorBody<'a> {
    /// The body of an answer that is not an `AppError` (a refused WebSocket handshake).
    pub fn new(code: &'a str, message: impl Into<String>) -> Self {
        ErrorBody { error: ErrorDetail { code, message: message.into() } }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct ErrorDetail<'a> {
    /// snake_case and stable, e.g. `not_found`, `invalid_transition`, `validation_failed`.
    code: &'a str,
    message: String,
}

impl ResponseError for AppError {
    fn status_code(&self) -> StatusCode {
        match self {
            AppError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AppError::Conflict { .. } => StatusCode::CONFLICT,
            AppError::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            AppError::Unavailable(_) | AppError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let AppError::Internal(detail) = self {
            // The detail stays in the log; the client gets a generic message.
            tracing::error!(error = %detail, "internal error");
        }
        let mut response = HttpResponse::build(self.status_code());
        if matches!(self, AppError::Unauthorized(_)) {
            response.insert_header(("WWW-Authenticate", "Bearer"));
        }
        if let AppError::Busy { retry_after_secs, .. } = self {
            response.insert_header(("Retry-After", retry_after_secs.to_string()));
        }
        response.json(ErrorBody::new(self.code(), self.to_string()))
    }
}

impl From<RepoError> for AppError {
    fn from(err: RepoError) -> Self {
        match err {
            RepoError::NotFound(what) => AppError::NotFound(what),
            RepoError::Conflict(message) => AppError::conflict("conflict", message),
            RepoError::Db(db) => AppError::Internal(db.to_string()),
        }
    }
}

impl From<actix_web::error::BlockingError> for AppError {
    fn from(err: actix_web::error::BlockingError) -> Self {
        AppError::Internal(format!("blocking task: {err}"))
    }
}

impl From<actix_web::error::JsonPayloadError> for AppError {
    fn from(err: actix_web::error::JsonPayloadError) -> Self {
        use actix_web::error::JsonPayloadError as E;
        match err {
            E::ContentType => AppError::BadRequest {
                code: "unsupported_content_type",
                message: "expected Content-Type: application/json".into(),
            },
            E::OverflowKnownLength { .. } | E::Overflow { .. } => {
                AppError::BadRequest { code: "payload_too_large", message: "request body is too large".into() }
            }
            E::Deserialize(e) if e.is_data() => {
                AppError::Unprocessable { code: "invalid_body", message: e.to_string() }
            }
            E::Deserialize(e) => AppError::BadRequest { code: "malformed_json", message: e.to_string() },
            other => AppError::bad_request(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::body::to_bytes;

    #[actix_web::test]
    async fn renders_code_and_message() {
        let err = AppError::invalid("quality must be 0 to 51");
        assert_eq!(err.status_code(), StatusCode::UNPROCESSABLE_ENTITY);
        let body = to_bytes(err.error_response().into_body()).await.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["error"]["code"], "validation_failed");
        assert_eq!(json["error"]["message"], "quality must be 0 to 51");
    }

    #[actix_web::test]
    async fn internal_detail_is_not_leaked() {
        let err = AppError::Internal("password=hunter2 at db".into());
        let body = to_bytes(err.error_response().into_body()).await.unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("\"internal\""), "{text}");
    }

    #[test]
    fn statuses_map_as_documented() {
        assert_eq!(AppError::bad_request("x").status_code(), StatusCode::BAD_REQUEST);
        assert_eq!(AppError::Unauthorized("x".into()).status_code(), StatusCode::UNAUTHORIZED);
        assert_eq!(AppError::Forbidden("x".into()).status_code(), StatusCode::FORBIDDEN);
        assert_eq!(AppError::NotFound("x".into()).status_code(), StatusCode::NOT_FOUND);
        assert_eq!(AppError::conflict("c", "x").status_code(), StatusCode::CONFLICT);
        assert_eq!(AppError::from(RepoError::NotFound("job 1".into())).code(), "not_found");
    }
}
