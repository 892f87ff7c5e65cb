//! Integration tests: one binary (one link), real SQLite and PostgreSQL, the real
//! `condense` binary run as a child process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod access;
mod actions;
mod audio_ahead;
mod cluster;
mod common;
mod containment;
mod contract;
mod counts;
mod faults;
mod feed;
mod fidelity;
mod fs_safety;
mod fuzz;
mod health;
mod health_check;
mod health_nodes;
mod hostile;
mod http;
mod isolation;
mod ladder;
mod lifecycle;
mod media;
mod names;
mod notify;
mod process;
mod quality;
mod repo;
mod rules;
mod schedule;
mod spans;
mod sparse_copy;
mod stats;
mod streams;
mod streams_plan;
mod transfer;
mod transfer_flow;
mod two_pass;
