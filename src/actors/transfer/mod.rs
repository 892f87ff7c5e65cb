//! A linked node's side of a transfer (issue 39), for a job whose library it does not see:
//! `client` downloads the source from the main node and uploads the output (and a span's
//! segments), resuming and checking the bytes; `parts` uploads a job's finished files while
//! it encodes; `spans` asks for a span and uploads its files; `ranges` fetches the ranges
//! of a source a span reads into a sparse copy; `folders` keeps each job's files in
//! WORK_DIR; `setup` is what the node's transfers share.
//! The main node's side is `actors::cluster::transfer`, `actors::cluster::span_transfer`
//! and `http::transfer`.

pub mod client;
pub mod folders;
pub mod parts;
pub mod ranges;
pub mod setup;
pub mod spans;

pub use self::client::{ClientError, Direction, Downloaded, Progress, Tail, TransferClient, PATIENCE};
pub use self::folders::{
    clear_job_dirs, has_spans_dirs, job_dir_ids, job_dirs, keep_only, make_job_dir, make_span_dir, remove_job_dir,
    remove_span_dir, reopen_copy, short_of_room_in, SOURCE_FILE, SOURCE_HASH_FILE, TAIL_FILE,
};
pub use self::setup::{Bearer, SpanSources, TransferSetup};
