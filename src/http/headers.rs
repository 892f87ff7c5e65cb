//! Protections sent with every answer. The dashboard is one origin serving its own bundles
//! (no inline script, no third-party host), so its Content-Security-Policy allows only
//! itself; the API's answers are data, never a page, so its policy allows nothing. Both
//! forbid framing (clickjacking) and content-type sniffing (a JSON body read as HTML).
//! The browser tests fail on any policy violation the dashboard causes (frontend/e2e).

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;

/// The dashboard's policy: scripts, styles, images, fonts and connections (the API and the
/// live feed, same origin) from the dashboard itself; inline styles are set through the
/// DOM (preact), which the policy allows, never written as attributes.
pub const DASHBOARD_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The API's policy: a JSON answer opened in a browser runs and loads nothing.
pub const API_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// Headers of a listener's answers, with its policy (`http::app` wraps each app in it). The
/// token middleware answers its refusals as responses (`guard::require_token`), not errors,
/// so that they pass through here and carry the headers too. (The request cannot be
/// kept here to turn an error into a response: a clone of it taken before routing makes the
/// router's own access to it fail.)
pub async fn with_policy(
    policy: &'static str,
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let mut response = next.call(req).await?.map_into_boxed_body();
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", policy),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
    ] {
        headers.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
    }
    Ok(response)
}
