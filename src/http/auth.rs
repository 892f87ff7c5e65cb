//! Authentication: login, token refresh, logout, and `AuthUser`, the extractor every
//! protected handler takes. Tokens are HS256 JWTs (`security::issue_token`); a token is
//! accepted while it verifies, has not expired, the user whose id it carries still exists
//! (a user deleted and made again under the same name is another id), and it carries the
//! user's current token version (a password change or a logout moves it on, revoking every
//! older token at once). Tokens come in the Authorization header; the `token` query
//! parameter is read on WebSocket routes only, since query strings end up in proxies' logs.
//! API keys (`http::api_keys`) are accepted wherever a token is, in `X-Api-Key` (the *arr
//! convention) or as the bearer token; they begin with `ck_`, which no JWT does. A key is
//! its own principal: it acts within its scope and its creator's role (`Endpoint::allows_key`),
//! which the token middleware (`http::guard`) checks before the handler runs.

use super::body::Body;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest, HttpResponse};
use futures_util::future::LocalBoxFuture;
use serde::{Deserialize, Serialize};

use crate::domain::access::{KeyScope, UserRole};
use crate::error::{AppError, ErrorBody};
use crate::http::login_limit::client_address;
use crate::http::state::AppState;
use crate::repo;
use crate::security::{self, TokenError};

/// The user a request's token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUser {
    pub id: i32,
    pub username: String,
    /// The user's token version, which the token carried.
    pub token_version: i32,
    /// When the token's session began (Unix seconds): refreshes keep it.
    pub session_started: i64,
    /// The user's role; for a key, its creator's, which bounds what the key may do.
    pub role: UserRole,
    /// The API key the request came with; `None` for a login token.
    pub key: Option<ApiKeyPrincipal>,
}

/// An API key acting: which one (the audit log names it) and what it may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyPrincipal {
    pub id: i32,
    pub name: String,
    pub scope: KeyScope,
}

/// How API keys begin; login tokens (JWTs) never do, so one header can carry either.
pub const API_KEY_PREFIX: &str = "ck_";

/// The header the *arr applications send their key in.
const API_KEY_HEADER: &str = "x-api-key";

const MISSING: &str =
    "missing token: send the header \"Authorization: Bearer <token>\" with a token from POST /auth/login";
const NOT_BEARER: &str = "the Authorization header must read \"Bearer <token>\"";
const BAD_CREDENTIALS: &str = "invalid username or password";
const UNBOUND: &str = "the token names no user id (it was issued by an older version); log in again (POST /auth/login)";
const REVOKED: &str = "the token was revoked (a password change, a role change or a logout since it was issued); log in again (POST /auth/login)";

impl FromRequest for AuthUser {
    type Error = AppError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { authenticate(&req, TokenPlace::Header).await })
    }
}

/// Where a route looks for the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenPlace {
    /// The Authorization header only.
    Header,
    /// The header, or the `token` query parameter: WebSocket handshakes, on which browsers
    /// cannot set headers.
    HeaderOrQuery,
    /// The header, or an API key (never a login token) in the `apikey` query parameter:
    /// integration webhooks, whose senders may only take a URL.
    HeaderOrKeyQuery,
}

/// The request's user, from the token where `place` allows. The result is kept in the
/// request, so the middleware and the extractor check it once.
pub async fn authenticate(req: &HttpRequest, place: TokenPlace) -> Result<AuthUser, AppError> {
    if let Some(user) = req.extensions().get::<AuthUser>() {
        return Ok(user.clone());
    }
    let state =
        req.app_data::<web::Data<AppState>>().ok_or_else(|| AppError::Internal("AppState is not registered".into()))?;
    let token = token_of(req, place)?;
    if token.starts_with(API_KEY_PREFIX) {
        let user = key_user(state, &token).await?;
        req.extensions_mut().insert(user.clone());
        return Ok(user);
    }
    let claims = security::verify_token(&state.jwt_secret, &token).map_err(|error| match error {
        TokenError::Signing(detail) => AppError::Internal(detail),
        refused => AppError::Unauthorized(refused.to_string()),
    })?;
    let user_id = claims.uid.ok_or_else(|| AppError::Unauthorized(UNBOUND.into()))?;
    // Shared with the requests of the same user that wait at the same time; the read still
    // begins after this request arrived, so a revocation holds from the next request on.
    let db = state.db.clone();
    let read = move || {
        let db = db.clone();
        async move { Ok(repo::users::find_by_id(&db, user_id).await?) }
    };
    let user = state
        .reads
        .users
        .get(user_id, read)
        .await??
        .ok_or_else(|| AppError::Unauthorized("the token's user no longer exists; log in again".into()))?;
    if claims.ver != user.token_version {
        return Err(AppError::Unauthorized(REVOKED.into()));
    }
    let user = AuthUser {
        id: user.id,
        username: user.username,
        token_version: user.token_version,
        session_started: claims.session_started(),
        role: user.role.into(),
        key: None,
    };
    req.extensions_mut().insert(user.clone());
    Ok(user)
}

/// An API key as a principal: its scope, bounded by the role its creator has now (a demoted
/// creator's keys shrink with them). Found by its hash, so a revoked key (its row deleted)
/// is refused from the next request.
async fn key_user(state: &AppState, key: &str) -> Result<AuthUser, AppError> {
    let Some((key, user)) = repo::api_keys::find_by_hash(&state.db, &security::hash_secret(key)).await? else {
        return Err(AppError::Unauthorized("unknown or revoked API key".into()));
    };
    // The row is at hand: a write only when the recorded use is a minute old, so a busy
    // script does not take the database's write lock on every read.
    let scope = repo::api_keys::scope_of(&key)?;
    let stale = key.last_used_at.is_none_or(|at| chrono::Utc::now() - at >= repo::api_keys::TOUCH_EVERY);
    if stale {
        repo::api_keys::touch(&state.db, key.id).await?;
    }
    Ok(AuthUser {
        id: user.id,
        username: user.username,
        token_version: user.token_version,
        session_started: key.created_at.timestamp(),
        role: user.role.into(),
        key: Some(ApiKeyPrincipal { id: key.id, name: key.name, scope }),
    })
}

#[derive(Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

#[derive(Deserialize)]
struct KeyQuery {
    apikey: Option<String>,
}

fn token_of(req: &HttpRequest, place: TokenPlace) -> Result<String, AppError> {
    if let Some(value) = req.headers().get(API_KEY_HEADER) {
        let key = value.to_str().map(str::trim).unwrap_or_default();
        if !key.starts_with(API_KEY_PREFIX) {
            return Err(AppError::Unauthorized(format!(
                "X-Api-Key must hold an API key (they begin with {API_KEY_PREFIX})"
            )));
        }
        return Ok(key.to_string());
    }
    if let Some(value) = req.headers().get(header::AUTHORIZATION) {
        let value = value.to_str().map_err(|_| AppError::Unauthorized(NOT_BEARER.into()))?;
        let (scheme, token) = value.trim().split_once(' ').ok_or_else(|| AppError::Unauthorized(NOT_BEARER.into()))?;
        let token = token.trim();
        if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
            return Err(AppError::Unauthorized(NOT_BEARER.into()));
        }
        return Ok(token.to_string());
    }
    match place {
        TokenPlace::Header => return Err(AppError::Unauthorized(MISSING.into())),
        TokenPlace::HeaderOrKeyQuery => {
            let key = web::Query::<KeyQuery>::from_query(req.query_string())
                .ok()
                .and_then(|query| query.into_inner().apikey)
                .ok_or_else(|| AppError::Unauthorized(MISSING.into()))?;
            // Only keys: a login token in a URL would end up in the sender's logs.
            if !key.starts_with(API_KEY_PREFIX) {
                return Err(AppError::Unauthorized("the apikey parameter must hold an API key".into()));
            }
            return Ok(key);
        }
        TokenPlace::HeaderOrQuery => {}
    }
    web::Query::<TokenQuery>::from_query(req.query_string())
        .ok()
        .and_then(|query| query.into_inner().token)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| AppError::Unauthorized(MISSING.into()))
}

/// The client a request comes from: the TCP peer, or whom a trusted proxy forwarded for
/// (`TRUSTED_PROXIES`); from anyone else the header is the client's to forge.
pub fn client_of(req: &HttpRequest) -> Option<IpAddr> {
    let peer = req.peer_addr().map(|addr| addr.ip());
    let Some(state) = req.app_data::<web::Data<AppState>>() else { return peer };
    let forwarded: Vec<&str> =
        req.headers().get_all("x-forwarded-for").filter_map(|value| value.to_str().ok()).collect();
    client_address(peer, &forwarded, &state.trusted_proxies)
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenResponse {
    pub token: String,
    pub expires_at: chrono::DateTime<chrono::Utc>,
}

/// POST /auth/login. A wrong password and an unknown user get the same answer after the
/// same work; failed attempts slow down per client network and username, per client
/// network, and per account for clients that failed (`http::login_limit`); failures are
/// logged and audited with the client's address; password checks at once are bounded.
#[utoipa::path(
    post,
    path = "/auth/login",
    tag = "auth",
    request_body = LoginRequest,
    responses(
        (status = 200, description = "A token to send as `Authorization: Bearer <token>`", body = TokenResponse),
        (status = 401, description = "Wrong username or password (the same answer for both)", body = ErrorBody),
        (status = 429, description = "Too many failed logins from this client for this user, or from this client: wait the seconds the message gives (code too_many_requests)", body = ErrorBody),
        (status = 503, description = "Too many password checks at once: try again after Retry-After seconds (code busy)", body = ErrorBody),
    ),
)]
pub async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: Body<LoginRequest>,
) -> Result<web::Json<TokenResponse>, AppError> {
    let LoginRequest { username, password } = body.into_inner();
    let ip = client_of(&req);
    let delay = state.login_limiter.begin(ip, &username, Instant::now()).map_err(|wait| {
        AppError::TooManyRequests(format!("too many failed logins; try again in {} seconds", whole_seconds(wait)))
    })?;
    if !delay.is_zero() {
        // This client has failed before and this account is under attack: slower, not refused.
        actix_web::rt::time::sleep(delay).await;
    }
    let user = repo::users::find(&state.db, &username).await?;
    let stored_hash = user.as_ref().map(|user| user.password_hash.clone());
    let verified = {
        let _slot = password_check_slot(&state).await.inspect_err(|_| state.login_limiter.withdraw(ip, &username))?;
        // argon2 takes tens of milliseconds of CPU: off the async workers.
        web::block(move || match stored_hash {
            Some(hash) => security::verify_password(&password, &hash),
            None => security::verify_dummy_password(&password),
        })
        .await?
    };
    let Some(user) = user.as_ref().filter(|_| verified).cloned() else {
        state.login_limiter.failed(ip, &username, Instant::now());
        let client = ip.map(|ip| ip.to_string());
        tracing::warn!(username = %username, client = client.as_deref().unwrap_or("unknown"), "failed login");
        let entry = crate::repo::audit::NewEntry {
            username: username.chars().take(128).collect(),
            // The account's role when it exists; an unknown name is written as a viewer.
            role: user.map_or(UserRole::Viewer, |user| user.role.into()),
            method: req.method().to_string(),
            route: "/auth/login".into(),
            path: super::prefix::asked_path(&req),
            status: 401,
            key: None,
            client,
        };
        if let Err(error) = repo::audit::append(&state.db, entry).await {
            tracing::error!(%error, "the failed login's audit entry could not be written");
        }
        return Err(AppError::Unauthorized(BAD_CREDENTIALS.into()));
    };
    state.login_limiter.succeeded(ip, &username);
    tracing::info!(username = %user.username, "logged in");
    let now = chrono::Utc::now();
    let grant = security::Grant {
        user_id: user.id,
        username: &user.username,
        version: user.token_version,
        session_started: now.timestamp(),
    };
    token_for(&state, &grant, now)
}

/// How long a login waits in line for a password check before it is answered 503.
pub const PASSWORD_CHECK_WAIT: Duration = Duration::from_secs(10);

/// A place among the password checks running at once (`AppState::password_checks`).
async fn password_check_slot(state: &AppState) -> Result<tokio::sync::OwnedSemaphorePermit, AppError> {
    let busy = || AppError::Busy {
        message: "too many logins at once; try again in a few seconds".into(),
        retry_after_secs: 2,
    };
    match actix_web::rt::time::timeout(PASSWORD_CHECK_WAIT, state.password_checks.clone().acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        Ok(Err(_)) | Err(_) => Err(busy()),
    }
}

/// POST /auth/refresh: a new token for the caller, with a new expiry, in the same session:
/// never past `SESSION_MAX_HOURS` after the login.
#[utoipa::path(
    post,
    path = "/auth/refresh",
    tag = "auth",
    responses(
        (status = 200, description = "The new token; its expiry is cut at the session's end (SESSION_MAX_HOURS after the login)", body = TokenResponse),
    ),
)]
pub async fn refresh(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<TokenResponse>, AppError> {
    no_key(&user, "refresh")?;
    let grant = security::Grant {
        user_id: user.id,
        username: &user.username,
        version: user.token_version,
        session_started: user.session_started,
    };
    token_for(&state, &grant, chrono::Utc::now())
}

/// POST /auth/logout: revokes every token of the caller, this one included.
#[utoipa::path(
    post,
    path = "/auth/logout",
    tag = "auth",
    responses(
        (status = 204, description = "Logged out: every token of this user is refused from now on"),
    ),
)]
pub async fn logout(user: AuthUser, state: web::Data<AppState>) -> Result<HttpResponse, AppError> {
    no_key(&user, "log out")?;
    repo::users::revoke_tokens(&state.db, &user.username).await?;
    tracing::info!(username = %user.username, "logged out");
    Ok(HttpResponse::NoContent().finish())
}

fn token_for(
    state: &AppState,
    grant: &security::Grant<'_>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<web::Json<TokenResponse>, AppError> {
    let (token, expires_at) =
        security::issue_token(&state.jwt_secret, grant, state.token_ttl_hours, state.session_max_hours, now).map_err(
            |error| match error {
                TokenError::SessionOver => AppError::Unauthorized(error.to_string()),
                other => AppError::Internal(other.to_string()),
            },
        )?;
    Ok(web::Json(TokenResponse { token, expires_at }))
}

/// Who is calling: what the dashboard shows and hides by role.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub username: String,
    /// The user's role (for an API key, its creator's, which bounds the key).
    pub role: UserRole,
    /// The request came with an API key rather than a login token.
    pub api_key: bool,
    /// The key's scope, when the request came with one.
    pub key_scope: Option<KeyScope>,
}

/// GET /auth/me: the caller's name and role.
#[utoipa::path(
    get,
    path = "/auth/me",
    tag = "auth",
    responses(
        (status = 200, description = "The caller", body = Me),
    ),
)]
pub async fn me(user: AuthUser) -> web::Json<Me> {
    let key_scope = user.key.as_ref().map(|key| key.scope);
    web::Json(Me { username: user.username, role: user.role, api_key: key_scope.is_some(), key_scope })
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChangePassword {
    pub current_password: String,
    /// 8 to 1024 characters.
    #[schema(min_length = 8, max_length = 1024)]
    pub new_password: String,
}

/// PUT /auth/password: the caller changes their own password, giving the current one. Every
/// token of theirs is revoked, this one included: the dashboard signs in again.
#[utoipa::path(
    put,
    path = "/auth/password",
    tag = "auth",
    request_body = ChangePassword,
    responses(
        (status = 204, description = "Changed; every token of this user is refused from now on"),
        (status = 403, description = "The current password is wrong, or the request came with an API key (code forbidden)", body = ErrorBody),
        (status = 422, description = "The new password is too weak or too long (validation_failed)", body = ErrorBody),
    ),
)]
pub async fn change_password(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<ChangePassword>,
) -> Result<HttpResponse, AppError> {
    no_key(&user, "change a password")?;
    let ChangePassword { current_password, new_password } = body.into_inner();
    let stored = repo::users::find(&state.db, &user.username)
        .await?
        .ok_or_else(|| AppError::Unauthorized("the token's user no longer exists; log in again".into()))?
        .password_hash;
    let _slot = password_check_slot(&state).await?;
    // argon2 takes tens of milliseconds of CPU: off the async workers.
    if !web::block(move || security::verify_password(&current_password, &stored)).await? {
        return Err(AppError::Forbidden("the current password is wrong".into()));
    }
    let hash = crate::http::password::hash(new_password).await?;
    repo::users::set_password_hash(&state.db, &user.username, &hash).await?;
    tracing::info!(username = %user.username, "own password changed");
    Ok(HttpResponse::NoContent().finish())
}

/// Sessions are for login tokens: an API key cannot turn itself into one (a read-only key
/// would come out with its user's whole role) or end its user's sessions.
fn no_key(user: &AuthUser, what: &str) -> Result<(), AppError> {
    match user.key {
        Some(_) => Err(AppError::Forbidden(format!(
            "an API key cannot {what}: it is not a session (revoke it with DELETE /api-keys/{{id}})"
        ))),
        None => Ok(()),
    }
}

fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}
