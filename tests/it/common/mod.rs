//! Shared test helpers: databases on both backends, the API on a real socket in-process,
//! the actors without HTTP, the condense binary as a process, nodes of a cluster as
//! processes, licence keys, the transcoder child on its own, and the reverse proxy examples.

pub mod api;
pub mod cluster;
pub mod db;
pub mod health;
pub mod license;
pub mod media;
pub mod proxies;
pub mod rows;
pub mod runtime;
pub mod server;
pub mod shim;
pub mod streams;
pub mod tmpfs;
pub mod transcoder;
