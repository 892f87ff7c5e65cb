//! Rows a test writes straight into the database, with what the test does not care about
//! filled in: a node's facts, a job.

use condense::domain::job::JobStatus;
use condense::domain::node::NodeRole;
use condense::repo::jobs::NewJob;
use condense::repo::nodes::NodeFacts;

/// A node named `name` at `name.lan`: two cores, 1 GiB, one slot, the CPU's HEVC encoder,
/// no GPU and no hardware decoder. A test sets what it looks at over this
/// (`NodeFacts { cores: 8, ..node("a", NodeRole::Linked) }`).
pub fn node(name: &str, role: NodeRole) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        role,
        address: format!("{name}.lan"),
        gpu: None,
        cores: 2,
        memory_total: 1 << 30,
        max_jobs: 1,
        encoders: vec!["libx265".into()],
        decoders: vec![],
    }
}

/// A job of library `library_id` (of none when None) for the file at `path` (which need
/// not exist), of 1000 bytes.
pub fn new_job(library_id: Option<i32>, path: &str, status: JobStatus) -> NewJob {
    NewJob {
        library_id,
        file_path: path.to_string(),
        file_name: path.rsplit('/').next().unwrap().to_string(),
        status,
        target_codec: "hevc".into(),
        source_size: 1000,
        source_mtime_ns: Some(1),
        source_inode: Some(2),
        forced: false,
    }
}
