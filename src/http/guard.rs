//! The token middleware around every protected resource (`http::routes` wraps each in it):
//! the request's user (`auth::authenticate`), the one check of roles and key scopes against
//! the route table, and the audit entry of what the table audits (`http::audit`), refusals
//! included.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::web;

use crate::domain::access::{KeyScope, UserRole};
use crate::error::AppError;
use crate::http::audit::Pending;
use crate::http::auth::{authenticate, AuthUser, TokenPlace};
use crate::http::endpoint::{Endpoint, RouteTable};
use crate::http::state::AppState;

/// Middleware of every protected resource (see `http::routes`): refuses the request before
/// its path, query or body is looked at.
pub async fn require_token<B: MessageBody>(
    req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    guarded(req, next, TokenPlace::Header).await
}

/// The token, the role check, the request, and its audit entry when the route table audits
/// the route (`http::audit`): a refusal is written down as well as a change. Refusals are
/// answered as responses, not errors, so the middleware around (`http::headers`) sees them.
async fn guarded<B: MessageBody>(
    req: ServiceRequest,
    next: Next<B>,
    place: TokenPlace,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    let user = match authenticate(req.request(), place).await {
        Ok(user) => user,
        Err(refused) => return Ok(req.error_response(refused).map_into_right_body()),
    };
    let table = req.app_data::<web::Data<RouteTable>>().cloned();
    let endpoint = req.match_pattern().and_then(|pattern| table.as_ref()?.find(req.method(), &pattern).cloned());
    let pending = Pending::of(&req, &user, endpoint.as_ref());
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let answer = match require_role(&req, &user, endpoint.as_ref()) {
        Ok(()) => next.call(req).await.map(ServiceResponse::map_into_left_body),
        Err(refused) => Ok(req.error_response(refused).map_into_right_body()),
    };
    if let Some(pending) = pending {
        let status = match &answer {
            Ok(response) => response.status(),
            Err(error) => error.as_response_error().status_code(),
        };
        pending.record(state.as_ref(), status.as_u16()).await;
    }
    answer
}

/// The one check of roles and key scopes: the route table's role for this method and route
/// (`RouteTable`, app data) against the user's, and for an API key, the route's reach against
/// the key's scope as well. A route the table does not know (a method the resource refuses
/// anyway) needs the highest role and an `admin` key.
fn require_role(req: &ServiceRequest, user: &AuthUser, endpoint: Option<&Endpoint>) -> Result<(), AppError> {
    let needed = endpoint.map_or(UserRole::Admin, |e| e.role);
    if !user.role.allows(needed) {
        return Err(AppError::Forbidden(format!(
            "{} {} needs the role {needed} or higher; {} is {}",
            req.method(),
            super::prefix::asked_path(req.request()),
            user.username,
            user.role
        )));
    }
    let Some(key) = &user.key else { return Ok(()) };
    let reached = endpoint.map_or(key.scope == KeyScope::Admin, |e| key.scope.reaches(e.reach));
    if reached {
        Ok(())
    } else {
        Err(AppError::Forbidden(format!(
            "{} {} is out of reach of the API key {:?}: its scope is {} (see GET /openapi.json, API keys)",
            req.method(),
            super::prefix::asked_path(req.request()),
            key.name,
            key.scope
        )))
    }
}

/// `require_token` for WebSocket routes: the token may also be the `token` query parameter.
pub async fn require_token_or_query<B: MessageBody>(
    req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    guarded(req, next, TokenPlace::HeaderOrQuery).await
}

/// `require_token` for integration webhooks: an API key may also come as `?apikey=`.
pub async fn require_token_or_key_query<B: MessageBody>(
    req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    guarded(req, next, TokenPlace::HeaderOrKeyQuery).await
}
