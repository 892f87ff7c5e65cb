//! Shared test helpers: databases on both backends, the API on a real socket in-process,
//! and the condense binary as a process.

pub mod api;
pub mod db;
pub mod media;
pub mod server;
pub mod shim;
