//! sea-orm entities of condense. Status and kind columns are plain strings here; the
//! domain types in the `condense` crate give them meaning and the repository converts.

pub mod job;
pub mod job_event;
pub mod library;
pub mod license;
pub mod node;
pub mod setting;
pub mod user;

pub mod prelude {
    pub use super::job::Entity as Job;
    pub use super::job_event::Entity as JobEvent;
    pub use super::library::Entity as Library;
    pub use super::license::Entity as License;
    pub use super::node::Entity as Node;
    pub use super::setting::Entity as Setting;
    pub use super::user::Entity as User;
}
