//! Media work that needs no FFmpeg: the plan, the partial folder and its manifest, containment
//! of outside paths, the replace protocol, the facts a probe returns, and the node's side of
//! the `condense-media` children that do the FFmpeg work (`transcoder`, `worker`). FFmpeg
//! itself is linked only into the `condense-media` crate (`media/` at the workspace root), so
//! this crate, and the node's binary, cannot reach it: `cargo tree -p condense -e normal`
//! names no rsmpeg (checked in `make lint`).

pub mod codec_params;
pub mod contain;
pub mod error;
pub mod event;
pub mod handle;
pub mod hdr_metadata;
pub mod health;
pub mod info;
pub mod keyframe;
pub mod layout;
pub mod manifest;
pub mod partial;
pub mod parts;
pub mod plan;
pub mod quality;
pub mod replace;
pub mod span_record;
pub mod span_transfer;
pub mod sparse;
pub mod stream_plan;
pub mod transcoder;
pub mod transfer;
pub mod worker;

pub use error::MediaError;
