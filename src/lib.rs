//! condense: a self-hosted media re-encoding service.
//!
//! Layers, each importing only downward: `http` (handlers) -> `actors` -> `domain` (pure
//! rules), `repo` (database), `media` (FFmpeg), `host` (machine facts).

pub mod actors;
pub mod cli;
pub mod config;
pub mod domain;
pub mod error;
pub mod host;
pub mod http;
pub mod license;
pub mod media;
pub mod repo;
pub mod security;
pub mod serve;
pub mod telemetry;

pub use http::app::{create_app, create_ui_app};
pub use http::state::AppState;
