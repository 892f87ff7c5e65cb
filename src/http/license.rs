//! The licence: what is installed and in force, installing a key, going back to FREE, and
//! the installation's one trial of a paid tier.

use super::body::Body;
use std::str::FromStr;

use actix_web::web;
use serde::Deserialize;

use super::auth::AuthUser;
use super::views::{self, LicenseView};
use crate::domain::license::{effective_tier, Tier, Trial, TrialRefusal, TrialTier};
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::license::{self as keys, LicenseError};
use crate::repo;
use crate::repo::licenses::NewLicense;
use crate::repo::RepoError;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallLicense {
    pub key: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartTrial {
    /// The paid tier to try: SUPPORTER or PRO.
    // Text, checked in the handler: serde_json reports a number where an enum is due as a
    // syntax error, which would answer 400 malformed_json for a well-formed body.
    #[schema(value_type = TrialTier)]
    pub tier: String,
}

/// The licence as it stands now: the installed key and the trial, read with the node's
/// clock (the one the scheduler reads the tier with).
async fn in_force(state: &AppState) -> Result<LicenseView, AppError> {
    let installed = repo::licenses::current(&state.db).await?;
    let trial = repo::licenses::trial(&state.db).await?;
    Ok(views::license(installed.as_ref(), trial.as_ref(), state.clock.now()))
}

/// The licence installed, the trial and the limits in force
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
    Ok(web::Json(in_force(&state).await?))
}

/// Install a licence key
///
/// PUT /license: verifies the key offline against the licence public key and installs it
/// in place of any other. An expired but genuine key installs (it grants FREE). A key in
/// force outranks a running trial.
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
    body: Body<InstallLicense>,
) -> Result<web::Json<LicenseView>, AppError> {
    let key = body.into_inner().key;
    let payload = keys::verify(&key, &state.license_public_key).map_err(|error| match error {
        // The server's own public key is wrong: not the client's fault.
        LicenseError::InvalidPublicKey(_) => AppError::Internal(error.to_string()),
        refused => AppError::Unprocessable { code: refused.code(), message: refused.to_string() },
    })?;
    repo::licenses::install(&state.db, NewLicense::verified(&key, &payload)).await?;
    tracing::info!(user = %user.username, tier = %payload.tier, licensee = %payload.licensee, "licence installed");
    Ok(web::Json(in_force(&state).await?))
}

/// DELETE /license: removes the key, back to FREE (or to the trial while it runs). The
/// trial stays used. Answers with the licence now in force.
#[utoipa::path(
    delete,
    operation_id = "remove_license",
    path = "/license",
    tag = "license",
    responses(
        (status = 200, description = "The licence now in force: FREE, or the trial while it runs", body = LicenseView),
    ),
)]
pub async fn remove(user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<LicenseView>, AppError> {
    repo::licenses::remove(&state.db).await?;
    tracing::info!(user = %user.username, "licence removed");
    Ok(web::Json(in_force(&state).await?))
}

/// Start the trial of a paid tier
///
/// POST /license/trial: SUPPORTER or PRO for 14 days, once per installation (kept in the
/// database; removing the key does not give it back). When it ends the tier falls back to
/// FREE: running jobs finish, and only what starts next sees FREE's limits.
#[utoipa::path(
    post,
    operation_id = "start_license_trial",
    path = "/license/trial",
    tag = "license",
    request_body = StartTrial,
    responses(
        (status = 200, description = "The licence now in force, with the trial running", body = LicenseView),
        (status = 409, description = "No trial started: trial_used (this installation's trial was started before) or license_key_in_force (a paid key is in force and would outrank it)", body = ErrorBody),
        (status = 422, description = "validation_failed: the tier is not SUPPORTER or PRO (invalid_body for a body of another shape)", body = ErrorBody),
    ),
)]
pub async fn start_trial(
    user: AuthUser,
    state: web::Data<AppState>,
    body: Body<StartTrial>,
) -> Result<web::Json<LicenseView>, AppError> {
    let asked = body.into_inner().tier;
    let tier = TrialTier::from_str(&asked).map_err(|_| {
        AppError::invalid(format!("tier: SUPPORTER or PRO can be tried (FREE needs no trial), not {asked:?}"))
    })?;
    let now = state.clock.now();
    let previous = repo::licenses::trial(&state.db).await?;
    let installed = repo::licenses::current(&state.db).await?;
    let key = installed.map_or(Tier::Free, |key| effective_tier(key.tier.into(), key.expires_at, now));
    let trial = Trial::start(tier, previous.as_ref(), key, now).map_err(refused)?;
    repo::licenses::start_trial(&state.db, trial).await.map_err(|error| match error {
        // Another request started it between the read and this write.
        RepoError::Conflict(message) => AppError::conflict("trial_used", message),
        other => other.into(),
    })?;
    tracing::info!(user = %user.username, tier = %trial.tier, ends_at = %trial.ends_at, "licence trial started");
    Ok(web::Json(in_force(&state).await?))
}

fn refused(refusal: TrialRefusal) -> AppError {
    AppError::conflict(refusal.code(), refusal.to_string())
}
