//! Each domain enum and its stored twin (`entities::sea_orm_active_enums`), converted variant
//! by variant. The matches are exhaustive both ways, so a variant added on one side only does
//! not compile; the tests below check that both sides spell every variant the same, since
//! the stored spelling is also what the cluster link and older rows carry.

use entities::sea_orm_active_enums as stored;

use crate::domain::access::UserRole;
use crate::domain::job::{FailureCode, JobStatus, Stage};
use crate::domain::license::Tier;
use crate::domain::node::{NodeRole, NodeStatus};

macro_rules! stored_as {
    ($($domain:ident { $($variant:ident),+ $(,)? })+) => {$(
        impl From<$domain> for stored::$domain {
            fn from(value: $domain) -> Self {
                match value {
                    $($domain::$variant => stored::$domain::$variant),+
                }
            }
        }

        impl From<stored::$domain> for $domain {
            fn from(value: stored::$domain) -> Self {
                match value {
                    $(stored::$domain::$variant => $domain::$variant),+
                }
            }
        }

        /// Lets queries compare a column with a domain value directly.
        impl From<$domain> for sea_orm::Value {
            fn from(value: $domain) -> Self {
                stored::$domain::from(value).into()
            }
        }

        impl PartialEq<$domain> for stored::$domain {
            fn eq(&self, other: &$domain) -> bool {
                $domain::from(*self) == *other
            }
        }

        impl PartialEq<stored::$domain> for $domain {
            fn eq(&self, other: &stored::$domain) -> bool {
                *self == $domain::from(*other)
            }
        }
    )+};
}

stored_as! {
    JobStatus { Pending, Queued, Analyzing, Encoding, Paused, Completed, Skipped, Failed, Cancelled }
    Stage { Analyzing, Encoding, Transferring }
    FailureCode {
        FileValidationFailed,
        InsufficientDiskSpace,
        UnsupportedCodec,
        TranscoderCrashed,
        PermissionDenied,
        Timeout,
        Miscellaneous,
        UnsupportedStream,
        UnsupportedContainer,
        OutOfMemory,
    }
    NodeStatus { Online, Offline, Degraded }
    NodeRole { Main, Linked }
    Tier { Free, Supporter, Pro }
    UserRole { Admin, Operator, Viewer }
}

#[cfg(test)]
mod tests {
    use sea_orm::ActiveEnum;

    use super::*;

    /// Every variant is spelt the same in the database, in the stored type's JSON (the
    /// cluster link) and in the domain (the API), and converts back to itself.
    fn same_spelling<D, S>(all: &[D], as_str: fn(D) -> &'static str)
    where
        D: Copy + std::fmt::Debug + PartialEq + From<S> + serde::Serialize,
        S: ActiveEnum<Value = String> + Copy + std::fmt::Debug + From<D> + serde::Serialize,
    {
        assert_eq!(all.len(), S::iter().count(), "{all:?}");
        for &domain in all {
            let stored = S::from(domain);
            assert_eq!(stored.to_value(), as_str(domain), "{domain:?}");
            assert_eq!(serde_json::to_value(stored).unwrap(), serde_json::to_value(domain).unwrap(), "{domain:?}");
            assert_eq!(D::from(stored), domain);
        }
    }

    #[test]
    fn stored_enums_spell_every_variant_as_the_domain_does() {
        same_spelling::<_, stored::JobStatus>(JobStatus::ALL, JobStatus::as_str);
        same_spelling::<_, stored::Stage>(Stage::ALL, Stage::as_str);
        same_spelling::<_, stored::FailureCode>(FailureCode::ALL, FailureCode::as_str);
        same_spelling::<_, stored::NodeStatus>(NodeStatus::ALL, NodeStatus::as_str);
        same_spelling::<_, stored::NodeRole>(NodeRole::ALL, NodeRole::as_str);
        same_spelling::<_, stored::Tier>(Tier::ALL, Tier::as_str);
        same_spelling::<_, stored::UserRole>(UserRole::ALL, UserRole::as_str);
    }

    #[test]
    fn stored_and_domain_values_compare_equal() {
        assert!(stored::JobStatus::Completed == JobStatus::Completed);
        assert!(JobStatus::Failed != stored::JobStatus::Completed);
    }
}
