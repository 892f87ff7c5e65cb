//! The actors without HTTP: a main node's runtime over a test database, a library row to
//! give it, and the jobs read straight from the database.

use std::path::Path;
use std::time::{Duration, Instant};

use condense::actors::Runtime;
use condense::domain::job::JobStatus;
use condense::repo;
use condense::repo::jobs::JobQuery;
use condense::repo::libraries::NewLibrary;
use entities::job;
use sea_orm::DatabaseConnection;

/// A main node's actors over `db` (see `api::start_main_node`).
pub async fn start_runtime(db: &DatabaseConnection, max_jobs: usize, throttle: u64, public_key: &str) -> Runtime {
    super::api::start_main_node(db, max_jobs, throttle, public_key).await.runtime
}

/// A library over `path` that encodes fast (x265 ultrafast, CRF 30).
pub fn library(path: &Path, watch: bool) -> NewLibrary {
    NewLibrary {
        name: "films".into(),
        paths: vec![path.to_string_lossy().into_owned()],
        target_codec: "hevc".into(),
        encoder: "libx265".into(),
        quality: 30,
        preset: "ultrafast".into(),
        watch,
        quality_mode: "crf".into(),
        target_vmaf: 95.0,
        max_size_percent: 80,
        keep_dolby_vision: false,
        keep_modified_time: false,
        stream_rules: Default::default(),
        rate_control: "crf".into(),
        target_bitrate_kbps: None,
    }
}

/// Every job, by file name.
pub async fn all_jobs(db: &DatabaseConnection) -> Vec<job::Model> {
    let mut items = repo::jobs::list(db, &JobQuery { page_size: 500, ..Default::default() }).await.unwrap().items;
    items.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    items
}

/// Waits until `n` jobs exist and all are in a terminal status.
pub async fn wait_terminal(db: &DatabaseConnection, n: usize, limit: Duration) -> Vec<job::Model> {
    let deadline = Instant::now() + limit;
    loop {
        let jobs = all_jobs(db).await;
        let terminal = jobs.iter().all(|j| JobStatus::from(j.status).is_terminal());
        if jobs.len() == n && terminal {
            return jobs;
        }
        if Instant::now() >= deadline {
            // With the history of each job still running: what it did last, and since when.
            let mut said = Vec::new();
            for job in &jobs {
                let mut line = format!("{} {:?} {:?}", job.file_name, job.status, job.failure_reason);
                if !JobStatus::from(job.status).is_terminal() {
                    for e in repo::events::list(db, job.id).await.unwrap_or_default() {
                        line +=
                            &format!("\n    {} {} {:?}->{:?} {:?}", e.at, e.kind, e.from_status, e.to_status, e.detail);
                    }
                }
                said.push(line);
            }
            panic!("jobs did not finish:\n{}", said.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
