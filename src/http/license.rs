//! The licence: what is installed and in force, installing a key, going back to FREE.

use actix_web::web;
use serde::Deserialize;

use super::auth::AuthUser;
use super::views::{self, LicenseView};
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::license::{self as keys, LicenseError};
use crate::repo;
use crate::repo::licenses::NewLicense;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallLicense {
    pub key: String,
}

/// The licence installed and the limits in force
#[utoipa::path(
    get,
    operation_id = "get_license",
    path = "/license",
    tag = "license",
    responses(
        (status = 200, description = "The licence", body = LicenseView),
    ),
)]
pub async fn get(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<LicenseView>, AppError> {
    let installed = repo::licenses::current(&state.db).await?;
    Ok(web::Json(views::license(installed.as_ref(), chrono::Utc::now())))
}

/// Install a licence key
///
/// PUT /license: verifies the key offline against the licence public key and installs it
/// in place of any other. An expired but genuine key installs (it grants FREE).
#[utoipa::path(
    put,
    operation_id = "install_license",
    path = "/license",
    tag = "license",
    request_body = InstallLicense,
    responses(
        (status = 200, description = "The licence now installed", body = LicenseView),
        (status = 422, description = "The key does not verify; code is one of license_malformed, license_unknown_version, license_bad_signature, license_invalid_payload (or invalid_body for a body of the wrong shape)", body = ErrorBody),
    ),
)]
pub async fn install(
    user: AuthUser,
    state: web::Data<AppState>,
    body: web::Json<InstallLicense>,
) -> Result<web::Json<LicenseView>, AppError> {
    let key = body.into_inner().key;
    let payload = keys::verify(&key, &state.license_public_key).map_err(|error| match error {
        // The server's own public key is wrong: not the client's fault.
        LicenseError::InvalidPublicKey(_) => AppError::Internal(error.to_string()),
        refused => AppError::Unprocessable { code: refused.code(), message: refused.to_string() },
    })?;
    let installed = repo::licenses::install(&state.db, NewLicense::verified(&key, &payload)).await?;
    tracing::info!(user = %user.username, tier = %payload.tier, licensee = %payload.licensee, "licence installed");
    Ok(web::Json(views::license(Some(&installed), chrono::Utc::now())))
}

/// DELETE /license: back to FREE. Answers with the licence now in force.
#[utoipa::path(
    delete,
    operation_id = "remove_license",
    path = "/license",
    tag = "license",
    responses(
        (status = 200, description = "The licence now in force (FREE)", body = LicenseView),
    ),
)]
pub async fn remove(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<LicenseView>, AppError> {
    repo::licenses::remove(&state.db).await?;
    tracing::info!(user = %user.username, "licence removed");
    Ok(web::Json(views::license(None, chrono::Utc::now())))
}
