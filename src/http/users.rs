//! Users of the dashboard and API, and their roles (`domain::access`); only administrators
//! reach these endpoints (the route table says so).

use super::body::Body;
use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::auth::AuthUser;
use super::password::hash;
use super::views::UserView;
use crate::domain::access::UserRole;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::repo;

pub const MAX_USERNAME_CHARS: usize = 64;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// 1 to 64 characters, no `/`, no control characters, no spaces at either end.
    #[schema(schema_with = username_schema)]
    pub username: String,
    /// 8 to 1024 characters.
    #[schema(min_length = 8, max_length = 1024)]
    pub password: String,
    /// The new user's role; `viewer` when left out, so nobody gets more than was asked for.
    #[serde(default)]
    pub role: Option<UserRole>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRole {
    /// Read as text and then parsed, so an unknown role is a validation error naming the
    /// field, like every other bad value.
    #[schema(value_type = UserRole)]
    pub role: String,
}

/// A user's new password.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetPassword {
    /// 8 to 1024 characters.
    #[schema(min_length = 8, max_length = 1024)]
    pub password: String,
}

fn username_schema() -> utoipa::openapi::schema::Object {
    super::schema::described(
        super::schema::untrimmed_name(MAX_USERNAME_CHARS),
        "1 to 64 characters, no `/`, no control characters, no spaces at either end.",
    )
}

/// Every user
#[utoipa::path(
    get,
    operation_id = "list_users",
    path = "/users",
    tag = "users",
    responses(
        (status = 200, description = "Users, oldest first", body = Vec<UserView>),
    ),
)]
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<Vec<UserView>>, AppError> {
    let users = repo::users::list(&state.db).await?;
    Ok(web::Json(users.iter().map(UserView::from).collect()))
}

/// Create a user
#[utoipa::path(
    post,
    operation_id = "create_user",
    path = "/users",
    tag = "users",
    request_body = CreateUser,
    responses(
        (status = 201, description = "Created", body = UserView),
        (status = 409, description = "The username is taken (code conflict)", body = ErrorBody),
    ),
)]
pub async fn create(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<CreateUser>,
) -> Result<HttpResponse, AppError> {
    let CreateUser { username, password, role } = body.into_inner();
    check_username(&username)?;
    let hash = hash(password).await?;
    let created = repo::users::create(&state.db, &username, &hash, role.unwrap_or(UserRole::Viewer)).await?;
    tracing::info!(user = %user.username, created = %created.username, "user created");
    Ok(HttpResponse::Created().json(UserView::from(&created)))
}

/// Set a user's password
#[utoipa::path(
    put,
    path = "/users/{username}/password",
    tag = "users",
    params(("username" = String, Path)),
    request_body = SetPassword,
    responses(
        (status = 204, description = "Changed"),
    ),
)]
pub async fn set_password(
    user: AuthUser,
    state: web::Data<AppState>,
    username: web::Path<String>,
    body: Body<SetPassword>,
) -> Result<HttpResponse, AppError> {
    let username = username.into_inner();
    let hash = hash(body.into_inner().password).await?;
    repo::users::set_password_hash(&state.db, &username, &hash).await?;
    tracing::info!(user = %user.username, target = %username, "password changed");
    Ok(HttpResponse::NoContent().finish())
}

/// Set a user's role
///
/// Revokes every token of that user, so none goes on acting with the old role.
#[utoipa::path(
    put,
    path = "/users/{username}/role",
    tag = "users",
    params(("username" = String, Path)),
    request_body = SetRole,
    responses(
        (status = 204, description = "Changed; the user's tokens are revoked"),
        (status = 409, description = "It would leave no administrator (code conflict)", body = ErrorBody),
    ),
)]
pub async fn set_role(
    user: AuthUser,
    state: web::Data<AppState>,
    username: web::Path<String>,
    body: Body<SetRole>,
) -> Result<HttpResponse, AppError> {
    let username = username.into_inner();
    let role: UserRole = body.into_inner().role.parse().map_err(|error| AppError::invalid(format!("role: {error}")))?;
    repo::users::set_role(&state.db, &username, role).await?;
    tracing::info!(user = %user.username, target = %username, %role, "role changed");
    Ok(HttpResponse::NoContent().finish())
}

/// Delete a user
#[utoipa::path(
    delete,
    operation_id = "delete_user",
    path = "/users/{username}",
    tag = "users",
    params(("username" = String, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 409, description = "It is the last user, or the last administrator", body = ErrorBody),
    ),
)]
pub async fn delete(
    user: AuthUser,
    state: web::Data<AppState>,
    username: web::Path<String>,
) -> Result<HttpResponse, AppError> {
    let username = username.into_inner();
    repo::users::delete(&state.db, &username).await?;
    tracing::info!(user = %user.username, deleted = %username, "user deleted");
    Ok(HttpResponse::NoContent().finish())
}

fn check_username(username: &str) -> Result<(), AppError> {
    let chars = username.chars().count();
    if chars == 0 || chars > MAX_USERNAME_CHARS {
        return Err(AppError::invalid(format!("username must be 1 to {MAX_USERNAME_CHARS} characters")));
    }
    // The name is a path segment of /users/{username}/…, and is typed at a login prompt.
    if username.trim() != username || username.chars().any(|c| c.is_control() || c == '/') {
        return Err(AppError::invalid(
            "username must not contain '/', control characters, or leading or trailing spaces",
        ));
    }
    Ok(())
}
