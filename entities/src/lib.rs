//! sea-orm entities of condense. Closed sets (statuses, stages, roles, tiers, failure codes)
//! are typed columns (`sea_orm_active_enums`); the domain types in the `condense` crate give
//! them meaning and `condense::repo::enums` converts.

pub mod api_key;
pub mod audit_entry;
pub mod job;
pub mod job_event;
pub mod job_segment;
pub mod library;
pub mod library_forecast;
pub mod library_health_file;
pub mod library_health_run;
pub mod license;
pub mod license_trial;
pub mod node;
pub mod notification_delivery;
pub mod notification_target;
pub mod sea_orm_active_enums;
pub mod setting;
pub mod transfer_source;
pub mod user;

pub mod prelude {
    pub use super::api_key::Entity as ApiKey;
    pub use super::audit_entry::Entity as AuditEntry;
    pub use super::job::Entity as Job;
    pub use super::job_event::Entity as JobEvent;
    pub use super::job_segment::Entity as JobSegment;
    pub use super::library::Entity as Library;
    pub use super::library_forecast::Entity as LibraryForecast;
    pub use super::library_health_file::Entity as LibraryHealthFile;
    pub use super::library_health_run::Entity as LibraryHealthRun;
    pub use super::license::Entity as License;
    pub use super::license_trial::Entity as LicenseTrial;
    pub use super::node::Entity as Node;
    pub use super::notification_delivery::Entity as NotificationDelivery;
    pub use super::notification_target::Entity as NotificationTarget;
    pub use super::setting::Entity as Setting;
    pub use super::transfer_source::Entity as TransferSource;
    pub use super::user::Entity as User;
}
