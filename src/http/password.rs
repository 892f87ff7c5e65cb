//! A new password, as every endpoint that sets one takes it (`PUT /auth/password` for the
//! caller's own, `POST /users` and `PUT /users/{username}/password` for an administrator):
//! its bounds and strength checked, then hashed off the async workers.

use actix_web::web;

use crate::error::AppError;
use crate::security;

/// Long enough for any passphrase; bounds the work of hashing one.
pub const MAX_PASSWORD_CHARS: usize = 1024;

/// Checks the password's length and hashes it off the async workers.
pub(crate) async fn hash(password: String) -> Result<String, AppError> {
    if password.chars().count() > MAX_PASSWORD_CHARS {
        return Err(AppError::invalid(format!("password must be at most {MAX_PASSWORD_CHARS} characters")));
    }
    security::check_password_strength(&password).map_err(|error| AppError::invalid(format!("password: {error}")))?;
    web::block(move || security::hash_password(&password)).await?.map_err(|error| AppError::Internal(error.to_string()))
}
