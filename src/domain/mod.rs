//! Pure rules of the product: job and node states, failure reasons, encoders and the retry ladder,
//! health thresholds, licence tiers, segment spans and sessions, queue statistics and insights,
//! the live feed's per-subscriber bound, which node takes a job.
//! Nothing here does I/O; actors carry these rules out, persist and publish.

pub mod access;
pub mod arr;
pub mod byte_ranges;
pub mod connect;
pub mod encoding;
pub mod failures;
pub mod feed;
pub mod forecast;
pub mod health;
pub mod job;
pub mod library_health;
pub mod license;
pub mod limits;
pub mod link;
pub mod net;
pub mod node;
pub mod notify;
pub mod paging;
pub mod path_bytes;
pub mod placement;
pub mod quality;
pub mod rate;
pub mod regrab;
pub mod schedule;
pub mod segments;
pub mod session;
pub mod stats;
pub mod stream_rules;
pub mod transfer;

/// A string form of an enum was not one of its names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}")]
pub struct UnknownName {
    pub kind: &'static str,
    pub value: String,
}

/// Declares an enum whose variants have one canonical string form, used in the database,
/// in JSON and in query parameters.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident, $kind:literal { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $(#[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        /// In the API's document: a string, one of the names.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::domain::UnknownName;

            fn from_str(value: &str) -> Result<Self, Self::Err> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str().eq_ignore_ascii_case(value))
                    .ok_or_else(|| $crate::domain::UnknownName { kind: $kind, value: value.to_string() })
            }
        }
    };
}
pub(crate) use named_enum;
