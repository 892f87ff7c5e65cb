//! Shared test helpers: databases on both backends, and the condense binary as a process.

pub mod db;
pub mod media;
pub mod server;
