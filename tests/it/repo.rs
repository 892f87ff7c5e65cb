//! The repository layer on SQLite and PostgreSQL.

use std::path::Path;

use condense::domain::access::UserRole;
use condense::domain::job::{transition, FailureCode, JobEvent, JobSnapshot, JobStatus, Outcome, Stage};
use condense::domain::license::Tier;
use condense::domain::node::{NodeRole, NodeStatus};
use condense::repo::events::NewEvent;
use condense::repo::jobs::{Assignment, JobChange, JobQuery, JobSort, NewJob, StatusChange};
use condense::repo::libraries::{LibraryPatch, NewLibrary};
use condense::repo::licenses::NewLicense;
use condense::repo::nodes::NodeFacts;
use condense::repo::{self, RepoError};
use sea_orm::DatabaseConnection;

use crate::both_backends;
use crate::common::rows::new_job;

fn library(name: &str) -> NewLibrary {
    NewLibrary {
        name: name.to_string(),
        quality: 26,
        preset: "medium".into(),
        ..crate::common::runtime::library(Path::new(&format!("/media/{name}")), true)
    }
}

fn main_node(name: &str) -> NodeFacts {
    NodeFacts { address: "10.0.0.1".into(), ..crate::common::rows::node(name, NodeRole::Main) }
}

/// What the state machine makes of `event` for a job in `from` (no retries, crashes, force).
fn outcome(from: JobStatus, event: JobEvent) -> Outcome {
    transition(&JobSnapshot { status: from, retry_count: 0, forced: false, crash_count: 0, replacing: false }, &event)
        .unwrap()
}

/// The state machine's `event` on a job in `from`, with `change` and a history entry `kind`.
fn step(from: JobStatus, event: JobEvent, change: JobChange, kind: &str) -> StatusChange {
    StatusChange { outcome: outcome(from, event), change, failure_detail: None, event: NewEvent::new(kind) }
}

both_backends!(migrations_are_idempotent, |db: DatabaseConnection| async move {
    repo::migrate(&db).await.unwrap();
    repo::migrate(&db).await.unwrap();
    assert!(repo::ping(&db).await);
});

both_backends!(libraries_crud, |db: DatabaseConnection| async move {
    let movies = repo::libraries::create(&db, library("movies")).await.unwrap();
    assert_eq!(repo::libraries::paths_of(&movies), ["/media/movies"]);
    assert!(matches!(repo::libraries::create(&db, library("movies")).await, Err(RepoError::Conflict(_))));
    let shows = repo::libraries::create(&db, library("shows")).await.unwrap();

    let patch = LibraryPatch {
        paths: Some(vec!["/a".into(), "/b".into()]),
        quality: Some(22),
        enabled: Some(false),
        ..Default::default()
    };
    let updated = repo::libraries::update(&db, movies.id, patch).await.unwrap();
    assert_eq!(repo::libraries::paths_of(&updated), ["/a", "/b"]);
    assert_eq!(updated.quality, 22);
    assert!(!updated.enabled);
    assert_eq!(updated.name, "movies");
    let rename = LibraryPatch { name: Some("shows".into()), ..Default::default() };
    assert!(matches!(repo::libraries::update(&db, movies.id, rename).await, Err(RepoError::Conflict(_))));

    repo::libraries::mark_scanned(&db, shows.id).await.unwrap();
    assert!(repo::libraries::get(&db, shows.id).await.unwrap().last_scan_at.is_some());
    let names: Vec<_> = repo::libraries::list(&db).await.unwrap().into_iter().map(|l| l.name).collect();
    assert_eq!(names, ["movies", "shows"]);

    // Deleting a library removes its jobs and their events.
    let job = repo::jobs::insert(&db, new_job(Some(shows.id), "/media/shows/a.mkv", JobStatus::Pending)).await.unwrap();
    repo::libraries::delete(&db, shows.id).await.unwrap();
    assert!(matches!(repo::jobs::get(&db, job.id).await, Err(RepoError::NotFound(_))));
    assert!(repo::events::list(&db, job.id).await.unwrap().is_empty());
    assert!(matches!(repo::libraries::delete(&db, shows.id).await, Err(RepoError::NotFound(_))));
    assert!(matches!(repo::libraries::get(&db, 999).await, Err(RepoError::NotFound(_))));
});

both_backends!(job_status_changes_are_checked_and_recorded, |db: DatabaseConnection| async move {
    let lib = repo::libraries::create(&db, library("movies")).await.unwrap();
    let job = repo::jobs::insert(&db, new_job(Some(lib.id), "/media/movies/a.mp4", JobStatus::Pending)).await.unwrap();
    assert_eq!(job.status, JobStatus::Pending);
    assert!(matches!(
        repo::jobs::insert(&db, new_job(Some(lib.id), "/media/movies/a.mp4", JobStatus::Pending)).await,
        Err(RepoError::Conflict(_))
    ));

    let queue = step(JobStatus::Pending, JobEvent::Queue, JobChange::default(), "queued");
    let queued = repo::jobs::change_status(&db, job.id, JobStatus::Pending, queue).await.unwrap();
    assert_eq!(queued.status, JobStatus::Queued);
    assert!(queued.queued_at.is_some());

    let assignment =
        Assignment { node_id: 7, node_name: "n1".into(), lease_id: "x".into(), started_at: chrono::Utc::now() };
    let start = JobChange { stage: Some(Stage::Analyzing), assignment: Some(assignment), ..Default::default() };
    let change = StatusChange {
        event: NewEvent::new("started").on_node(Some("n1".into())).with_detail(serde_json::json!({"lease": "x"})),
        ..step(JobStatus::Queued, JobEvent::Start, start, "started")
    };
    let analyzing = repo::jobs::change_status(&db, job.id, JobStatus::Queued, change).await.unwrap();
    assert_eq!(analyzing.status, JobStatus::Analyzing);
    assert_eq!(analyzing.stage, Some(Stage::Analyzing.into()));
    assert_eq!(
        (analyzing.node_id, analyzing.node_name.as_deref(), analyzing.lease_id.as_deref()),
        (Some(7), Some("n1"), Some("x"))
    );
    assert!(analyzing.started_at.is_some());

    // A stale caller (still thinks QUEUED) changes nothing and records nothing.
    let stale = step(JobStatus::Queued, JobEvent::Cancel, JobChange::default(), "cancelled");
    let err = repo::jobs::change_status(&db, job.id, JobStatus::Queued, stale).await.unwrap_err();
    assert!(matches!(&err, RepoError::Conflict(m) if m.contains("ANALYZING")), "{err}");
    assert_eq!(repo::jobs::get(&db, job.id).await.unwrap().status, JobStatus::Analyzing);

    let missing = step(JobStatus::Pending, JobEvent::Queue, JobChange::default(), "x");
    assert!(matches!(
        repo::jobs::change_status(&db, 4242, JobStatus::Pending, missing).await,
        Err(RepoError::NotFound(_))
    ));

    let live = JobChange { progress: Some(42.5), fps: Some(31.0), ..Default::default() };
    repo::jobs::update_live(&db, job.id, live).await.unwrap();
    let read = repo::jobs::get(&db, job.id).await.unwrap();
    assert_eq!((read.progress, read.fps), (42.5, 31.0));

    let events = repo::events::list(&db, job.id).await.unwrap();
    let kinds: Vec<_> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["created", "queued", "started"]);
    let steps: Vec<_> = events.iter().map(|e| (e.from_status, e.to_status)).collect();
    let stored = |status: JobStatus| Some(status.into());
    assert_eq!(
        steps,
        [
            (None, stored(JobStatus::Pending)),
            (stored(JobStatus::Pending), stored(JobStatus::Queued)),
            (stored(JobStatus::Queued), stored(JobStatus::Analyzing))
        ]
    );
    assert_eq!(events[2].node_name.as_deref(), Some("n1"));
    assert_eq!(events[2].detail, Some(serde_json::json!({"lease": "x"})));
});

both_backends!(job_listing_filters_sorts_and_pages, |db: DatabaseConnection| async move {
    let a = repo::libraries::create(&db, library("a")).await.unwrap();
    let b = repo::libraries::create(&db, library("b")).await.unwrap();
    for i in 0..7 {
        let status = if i % 2 == 0 { JobStatus::Queued } else { JobStatus::Completed };
        let lib = if i < 5 { a.id } else { b.id };
        repo::jobs::insert(&db, new_job(Some(lib), &format!("/m/Clip_{i}.mkv"), status)).await.unwrap();
    }
    repo::jobs::insert(&db, new_job(Some(a.id), "/m/100%_done.mkv", JobStatus::Failed)).await.unwrap();

    let all = repo::jobs::list(&db, &JobQuery::default()).await.unwrap();
    assert_eq!((all.total, all.items.len(), all.page, all.page_size), (8, 8, 1, 50));
    // Newest first by default.
    assert_eq!(all.items[0].file_name, "100%_done.mkv");

    let queued = JobQuery { statuses: vec![JobStatus::Queued], ..Default::default() };
    assert_eq!(repo::jobs::list(&db, &queued).await.unwrap().total, 4);
    let two = JobQuery { statuses: vec![JobStatus::Queued, JobStatus::Failed], ..Default::default() };
    assert_eq!(repo::jobs::list(&db, &two).await.unwrap().total, 5);
    let in_b = JobQuery { library_id: Some(b.id), ..Default::default() };
    assert_eq!(repo::jobs::list(&db, &in_b).await.unwrap().total, 2);

    // Search is a case-insensitive substring; % and _ are literal.
    let q = |s: &str| JobQuery { q: Some(s.into()), ..Default::default() };
    assert_eq!(repo::jobs::list(&db, &q("clip_3")).await.unwrap().total, 1);
    assert_eq!(repo::jobs::list(&db, &q("CLIP")).await.unwrap().total, 7);
    assert_eq!(repo::jobs::list(&db, &q("%")).await.unwrap().total, 1);
    assert_eq!(repo::jobs::list(&db, &q("p_")).await.unwrap().total, 7);
    assert_eq!(repo::jobs::list(&db, &q("0%_")).await.unwrap().total, 1);

    let by_name = JobQuery { sort: JobSort::FileName, descending: false, page_size: 3, page: 2, ..Default::default() };
    let page = repo::jobs::list(&db, &by_name).await.unwrap();
    let names: Vec<_> = page.items.iter().map(|j| j.file_name.as_str()).collect();
    assert_eq!(names, ["Clip_2.mkv", "Clip_3.mkv", "Clip_4.mkv"]);
    assert_eq!(page.total, 8);
    let past_end = JobQuery { page: 9, page_size: 3, ..Default::default() };
    assert!(repo::jobs::list(&db, &past_end).await.unwrap().items.is_empty());
    let huge = JobQuery { page_size: 100_000, page: 0, ..Default::default() };
    let clamped = repo::jobs::list(&db, &huge).await.unwrap();
    assert_eq!((clamped.page_size, clamped.page), (repo::jobs::MAX_PAGE_SIZE, 1));

    let counts = repo::jobs::count_by_status(&db).await.unwrap();
    assert_eq!(counts.get(&JobStatus::Queued), Some(&4));
    assert_eq!(counts.get(&JobStatus::Completed), Some(&3));
    assert_eq!(counts.get(&JobStatus::Failed), Some(&1));
    assert_eq!(counts.get(&JobStatus::Encoding), None);

    let running = repo::jobs::in_statuses(&db, &[JobStatus::Failed]).await.unwrap();
    assert_eq!(running.len(), 1);
    assert!(repo::jobs::find_by_path(&db, "/m/Clip_0.mkv").await.unwrap().is_some());
    assert!(repo::jobs::find_by_path(&db, "/m/nope.mkv").await.unwrap().is_none());
});

both_backends!(users_settings_and_licences, |db: DatabaseConnection| async move {
    assert_eq!(repo::users::count(&db).await.unwrap(), 0);
    repo::users::create(&db, "admin", "hash-1", UserRole::Admin).await.unwrap();
    assert!(matches!(repo::users::create(&db, "admin", "h", UserRole::Admin).await, Err(RepoError::Conflict(_))));
    let version = || async { repo::users::find(&db, "admin").await.unwrap().unwrap().token_version };
    assert_eq!(version().await, 0);
    repo::users::set_password_hash(&db, "admin", "hash-2").await.unwrap();
    assert_eq!(repo::users::find(&db, "admin").await.unwrap().unwrap().password_hash, "hash-2");
    assert!(matches!(repo::users::set_password_hash(&db, "ghost", "h").await, Err(RepoError::NotFound(_))));
    // A password change and a logout each revoke the user's tokens.
    assert_eq!(version().await, 1);
    repo::users::revoke_tokens(&db, "admin").await.unwrap();
    assert_eq!(version().await, 2);
    assert!(matches!(repo::users::revoke_tokens(&db, "ghost").await, Err(RepoError::NotFound(_))));
    assert_eq!(repo::users::count(&db).await.unwrap(), 1);

    assert_eq!(repo::settings::get::<u64>(&db, "job_timeout_hours").await.unwrap(), None);
    repo::settings::set(&db, "job_timeout_hours", &24u64).await.unwrap();
    repo::settings::set(&db, "job_timeout_hours", &48u64).await.unwrap();
    assert_eq!(repo::settings::get::<u64>(&db, "job_timeout_hours").await.unwrap(), Some(48));
    // A value of another shape reads as absent rather than failing.
    assert_eq!(repo::settings::get::<String>(&db, "job_timeout_hours").await.unwrap(), None);
    repo::settings::set(&db, "keep_originals", &true).await.unwrap();
    assert_eq!(repo::settings::all(&db).await.unwrap().len(), 2);

    assert!(repo::licenses::current(&db).await.unwrap().is_none());
    let license =
        |tier: Tier| NewLicense { key: format!("key-{tier}"), tier, licensee: "Test".into(), expires_at: None };
    repo::licenses::install(&db, license(Tier::Supporter)).await.unwrap();
    repo::licenses::install(&db, license(Tier::Pro)).await.unwrap();
    assert_eq!(repo::licenses::current(&db).await.unwrap().unwrap().tier, Tier::Pro);
    repo::licenses::remove(&db).await.unwrap();
    assert!(repo::licenses::current(&db).await.unwrap().is_none());
});

both_backends!(nodes_upsert_status_and_heartbeat, |db: DatabaseConnection| async move {
    let facts = main_node("node-a");
    let first = repo::nodes::upsert(&db, facts.clone()).await.unwrap();
    assert_eq!(first.status, NodeStatus::Online);
    let degraded =
        repo::nodes::set_status(&db, first.id, NodeStatus::Degraded, Some("path missing".into())).await.unwrap();
    assert_eq!(degraded.status_reason.as_deref(), Some("path missing"));

    let again = repo::nodes::upsert(&db, NodeFacts { cores: 4, ..facts }).await.unwrap();
    assert_eq!(again.id, first.id, "same name, same node");
    assert_eq!((again.cores, again.status, again.status_reason.clone()), (4, NodeStatus::Online.into(), None));
    assert_eq!(again.encoders, serde_json::json!(["libx265"]));

    repo::nodes::record_heartbeat(&db, first.id, 1.5, 512, 1).await.unwrap();
    let read = repo::nodes::get(&db, first.id).await.unwrap();
    assert_eq!((read.load1, read.memory_used, read.active_jobs), (1.5, 512, 1));
    assert_eq!(repo::nodes::list(&db).await.unwrap().len(), 1);
    assert!(repo::nodes::find(&db, "nope").await.unwrap().is_none());
});

both_backends!(a_stale_lease_changes_nothing, |db: DatabaseConnection| async move {
    let lib = repo::libraries::create(&db, library("leases")).await.unwrap();
    let job = repo::jobs::insert(&db, new_job(Some(lib.id), "/media/leases/a.mkv", JobStatus::Queued)).await.unwrap();
    let assignment =
        Assignment { node_id: 1, node_name: "n1".into(), lease_id: "current".into(), started_at: chrono::Utc::now() };
    let start = JobChange { assignment: Some(assignment), ..Default::default() };
    let change = step(JobStatus::Queued, JobEvent::Start, start, "started");
    repo::jobs::change_status(&db, job.id, JobStatus::Queued, change).await.unwrap();

    // A transition under a lease the job no longer has is refused inside the UPDATE.
    let pause = |lease: &'static str| {
        let change = step(JobStatus::Analyzing, JobEvent::Pause, JobChange::default(), "paused");
        let db = db.clone();
        async move { repo::jobs::change_status_as(&db, job.id, JobStatus::Analyzing, Some(lease), change).await }
    };
    assert!(matches!(pause("stale").await, Err(RepoError::Conflict(_))));
    // Live progress and events likewise.
    let progress = JobChange { progress: Some(50.0), ..Default::default() };
    let refused = repo::jobs::update_live_leased(&db, job.id, "stale", progress.clone()).await;
    assert!(matches!(refused, Err(RepoError::Conflict(_))), "{refused:?}");
    let refused = repo::jobs::record_event_leased(&db, job.id, "stale", NewEvent::new("replace_swapped")).await;
    assert!(matches!(refused, Err(RepoError::Conflict(_))), "{refused:?}");
    let now = repo::jobs::get(&db, job.id).await.unwrap();
    assert_eq!(
        (now.status, now.progress, now.lease_id.as_deref()),
        (JobStatus::Analyzing.into(), 0.0, Some("current"))
    );
    let kinds: Vec<_> = repo::events::list(&db, job.id).await.unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["created", "started"]);

    // The holder's own lease passes.
    repo::jobs::update_live_leased(&db, job.id, "current", progress).await.unwrap();
    repo::jobs::record_event_leased(&db, job.id, "current", NewEvent::new("replace_swapped")).await.unwrap();
    let paused = pause("current").await.unwrap();
    // Pausing releases the node: the lease goes with the transition.
    assert_eq!((paused.status, paused.progress, paused.lease_id), (JobStatus::Paused.into(), 50.0, None));
    // Released: the old holder can do nothing more.
    let late = repo::jobs::record_event_leased(&db, job.id, "current", NewEvent::new("late")).await;
    assert!(matches!(late, Err(RepoError::Conflict(_))), "{late:?}");
    let late = repo::jobs::update_live_leased(&db, job.id, "current", JobChange::default()).await;
    assert!(matches!(late, Err(RepoError::Conflict(_))), "{late:?}");
});

const TYPED_ENUMS_MIGRATION: &str = "m20261125_000011_typed_enums";

/// Takes the database back to before the typed-enum migration (which changes no schema, so
/// rows keep what they hold), writes `old_rows` (raw SQL, as an older version or a hand
/// edit may have left them), then migrates up again.
async fn migrate_over(db: &DatabaseConnection, old_rows: &[String]) -> Result<(), sea_orm::DbErr> {
    use migration::{Migrator, MigratorTrait};
    use sea_orm::ConnectionTrait;
    let names: Vec<String> = Migrator::migrations().iter().map(|m| m.name().to_string()).collect();
    let at = names.iter().position(|name| name == TYPED_ENUMS_MIGRATION).unwrap();
    Migrator::down(db, Some(u32::try_from(names.len() - at).unwrap())).await.unwrap();
    for sql in old_rows {
        db.execute_unprepared(sql).await.unwrap();
    }
    Migrator::up(db, None).await
}

both_backends!(older_spellings_are_converted_to_the_typed_columns, |db: DatabaseConnection| async move {
    let lib = repo::libraries::create(&db, library("old")).await.unwrap();
    let done =
        repo::jobs::insert(&db, new_job(Some(lib.id), "/media/old/done.mkv", JobStatus::Completed)).await.unwrap();
    let waiting =
        repo::jobs::insert(&db, new_job(Some(lib.id), "/media/old/waiting.mkv", JobStatus::Queued)).await.unwrap();
    let node = repo::nodes::upsert(&db, main_node("main")).await.unwrap();
    let key = NewLicense { key: "k".into(), tier: Tier::Pro, licensee: "Ada".into(), expires_at: None };
    repo::licenses::install(&db, key).await.unwrap();

    let (done_id, waiting_id) = (done.id, waiting.id);
    let old_rows = [
        // Other cases and stray spaces, as the case-blind parsing of before accepted.
        format!("UPDATE jobs SET status = 'completed', stage = ' Transferring', failure_code = 'TIMEOUT' WHERE id = {done_id}"),
        // A stage that names nothing: it only describes the moment, so it is dropped.
        format!("UPDATE jobs SET status = 'Queued ', stage = 'warming_up' WHERE id = {waiting_id}"),
        format!("UPDATE job_events SET to_status = 'completed' WHERE job_id = {done_id}"),
        // A node status that names nothing: OFFLINE until the node is heard from again.
        format!("UPDATE nodes SET role = 'MAIN', status = 'busy' WHERE id = {}", node.id),
        "UPDATE licenses SET tier = 'pro'".to_string(),
    ];
    migrate_over(&db, &old_rows).await.unwrap();

    let done = repo::jobs::get(&db, done_id).await.unwrap();
    assert_eq!((done.status, done.stage), (JobStatus::Completed.into(), Some(Stage::Transferring.into())));
    assert_eq!(done.failure_code, Some(FailureCode::Timeout.into()));
    let waiting = repo::jobs::get(&db, waiting_id).await.unwrap();
    assert_eq!((waiting.status, waiting.stage), (JobStatus::Queued.into(), None));
    let events = repo::events::list(&db, done_id).await.unwrap();
    assert_eq!(events[0].to_status, Some(JobStatus::Completed.into()));
    let node = repo::nodes::get(&db, node.id).await.unwrap();
    assert_eq!((node.role, node.status), (NodeRole::Main.into(), NodeStatus::Offline.into()));
    assert_eq!(repo::licenses::current(&db).await.unwrap().unwrap().tier, Tier::Pro);
    // The whole listing reads, as it would not have with a single unreadable row.
    let statuses: Vec<JobStatus> =
        repo::jobs::list(&db, &JobQuery::default()).await.unwrap().items.iter().map(|j| j.status.into()).collect();
    assert_eq!(statuses, [JobStatus::Queued, JobStatus::Completed]);
});

both_backends!(a_value_that_names_nothing_stops_the_migration, |db: DatabaseConnection| async move {
    let lib = repo::libraries::create(&db, library("odd")).await.unwrap();
    let job = repo::jobs::insert(&db, new_job(Some(lib.id), "/media/odd/a.mkv", JobStatus::Queued)).await.unwrap();
    let old_rows = [
        format!("UPDATE jobs SET status = 'DONE', stage = 'encoding' WHERE id = {}", job.id),
        "UPDATE job_events SET to_status = 'WAITING'".to_string(),
    ];
    let err = migrate_over(&db, &old_rows).await.unwrap_err().to_string();
    // Every problem is named, with its column.
    assert!(err.contains(r#"jobs.status holds ["DONE"]"#), "{err}");
    assert!(err.contains(r#"job_events.to_status holds ["WAITING"]"#), "{err}");
    // Nothing was written: the stage keeps its old spelling until the migration can run.
    let sql = format!("SELECT stage FROM jobs WHERE id = {}", job.id);
    let backend = sea_orm::ConnectionTrait::get_database_backend(&db);
    let row =
        sea_orm::ConnectionTrait::query_one(&db, sea_orm::Statement::from_string(backend, sql)).await.unwrap().unwrap();
    assert_eq!(row.try_get_by_index::<String>(0).unwrap(), "encoding");
});

// A replace cut short right after its swap, with a container change (c.avi -> c.mkv): the
// row records the output it swapped in, the source is gone. A scan then (the one at start-up
// after a crash) must neither drop the job nor take its output for a new file: the job's
// next attempt completes it (the fault suite's kill of the main node found both, once in
// many runs under load: the job's record lost, the output registered anew and SKIPPED).
both_backends!(a_scan_after_a_cut_short_swap_keeps_the_job_and_its_output, |db: DatabaseConnection| async move {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let media = std::fs::canonicalize(dir.path()).unwrap();
    let library = repo::libraries::create(
        &db,
        NewLibrary { paths: vec![media.display().to_string()], watch: false, ..library("swapped") },
    )
    .await
    .unwrap();
    let output = media.join("c.mkv");
    std::fs::write(&output, vec![7u8; 1000]).unwrap();
    let inode = i64::try_from(std::fs::metadata(&output).unwrap().ino()).unwrap();
    let source = media.join("c.avi").display().to_string();
    let job = repo::jobs::insert(
        &db,
        NewJob { source_inode: Some(inode), ..new_job(Some(library.id), &source, JobStatus::Queued) },
    )
    .await
    .unwrap();
    repo::jobs::update_live(&db, job.id, JobChange { output_size: Some(1000), ..Default::default() }).await.unwrap();
    // A user's own file next to it is new as ever.
    std::fs::write(media.join("d.mkv"), vec![1u8; 10]).unwrap();

    let (report, _) = condense::actors::library::scan(&db, library.id, std::time::Duration::ZERO).await.unwrap();
    assert_eq!((report.queued, report.removed), (1, 0), "{report:?}");
    assert_eq!(repo::jobs::get(&db, job.id).await.unwrap().file_path, source, "the job was dropped");
    let output_job = repo::jobs::find_by_path(&db, &output.display().to_string()).await.unwrap();
    assert!(output_job.is_none(), "the output was taken for a new file: {output_job:?}");
    assert!(repo::jobs::find_by_path(&db, &media.join("d.mkv").display().to_string()).await.unwrap().is_some());
});

// Found by `lifecycle::free_runs_one_job_at_a_time_and_a_pro_key_lifts_it`, slow in every
// full run: two jobs completing at once on SQLite, one completion failed with "database is
// locked" and waited two minutes for the lease sweep. The completion's transaction read the
// row before writing; in WAL mode a read transaction that another writer overtook cannot
// become a write one, and SQLite refuses it at once, without waiting. Completions at once
// must all be recorded.
both_backends!(completions_at_the_same_moment_are_all_recorded, |db: DatabaseConnection| async move {
    let lib = repo::libraries::create(&db, library("movies")).await.unwrap();
    let mut ids = Vec::new();
    for n in 0..16 {
        let path = format!("/media/movies/{n}.mkv");
        ids.push(repo::jobs::insert(&db, new_job(Some(lib.id), &path, JobStatus::Encoding)).await.unwrap().id);
    }
    let complete = |id: i32| {
        let db = db.clone();
        async move {
            let change =
                JobChange { source_inode: Some(1000 + i64::from(id)), output_size: Some(10), ..Default::default() };
            let step = step(JobStatus::Encoding, JobEvent::Complete, change, "completed");
            repo::jobs::change_status(&db, id, JobStatus::Encoding, step).await
        }
    };
    let results = futures_util::future::join_all(ids.iter().map(|&id| complete(id))).await;
    let failed: Vec<String> = results.iter().filter_map(|r| r.as_ref().err().map(ToString::to_string)).collect();
    assert!(failed.is_empty(), "{} of 16 completions failed: {failed:?}", failed.len());
});

// Forecasts of many libraries started at the same moment, each replacing an ended one, all
// start (a start read its row before writing inside one transaction: on SQLite a write
// committed in between refuses it at once, "database is locked", a 500 to the user); one
// of a library whose forecast runs is a conflict.
both_backends!(forecasts_started_at_the_same_moment_all_start, |db: DatabaseConnection| async move {
    use condense::domain::forecast::ForecastStatus;
    let mut ids = Vec::new();
    for n in 0..16 {
        let lib = repo::libraries::create(&db, library(&format!("lib{n}"))).await.unwrap();
        repo::forecasts::start(&db, lib.id, 1).await.unwrap();
        repo::forecasts::finish(&db, lib.id, ForecastStatus::Done).await.unwrap();
        ids.push(lib.id);
    }
    let results = futures_util::future::join_all(ids.iter().map(|&id| repo::forecasts::start(&db, id, 2))).await;
    let failed: Vec<String> = results.iter().filter_map(|r| r.as_ref().err().map(ToString::to_string)).collect();
    assert!(failed.is_empty(), "{} of 16 starts failed: {failed:?}", failed.len());
    let again = repo::forecasts::start(&db, ids[0], 2).await;
    assert!(matches!(again, Err(repo::RepoError::Conflict(_))), "{again:?}");
    assert_eq!(repo::forecasts::get(&db, ids[0]).await.unwrap().unwrap().files_total, 2);
});

/// Jobs per status counted from the rows themselves.
async fn counted(db: &DatabaseConnection) -> std::collections::HashMap<JobStatus, u64> {
    use sea_orm::{ConnectionTrait, Statement};
    let sql = "SELECT status, COUNT(*) AS n FROM jobs GROUP BY status";
    let rows = db.query_all(Statement::from_string(db.get_database_backend(), sql)).await.unwrap();
    rows.iter()
        .map(|r| {
            let status: String = r.try_get("", "status").unwrap();
            (status.parse().unwrap(), u64::try_from(r.try_get::<i64>("", "n").unwrap()).unwrap())
        })
        .collect()
}

// The queue's counts are kept by the database (issue 16): after inserts, transitions, a
// batch, a write that bypasses the code and a library's cascade, they are what counting the
// rows gives, and the job list's total is their sum.
both_backends!(the_kept_counts_are_what_counting_the_rows_gives, |db: DatabaseConnection| async move {
    use sea_orm::ConnectionTrait;
    let lib = repo::libraries::create(&db, library("movies")).await.unwrap();
    let other = repo::libraries::create(&db, library("shows")).await.unwrap();
    let same = |db: DatabaseConnection| async move {
        let kept = repo::jobs::count_by_status(&db).await.unwrap();
        assert_eq!(kept, counted(&db).await);
        let page = repo::jobs::list(&db, &JobQuery::default()).await.unwrap();
        assert_eq!(page.total, kept.values().sum::<u64>());
        let queued = JobQuery { statuses: vec![JobStatus::Queued, JobStatus::Queued], ..Default::default() };
        let page = repo::jobs::list(&db, &queued).await.unwrap();
        assert_eq!(page.total, kept.get(&JobStatus::Queued).copied().unwrap_or(0));
    };
    same(db.clone()).await;
    let a = repo::jobs::insert(&db, new_job(Some(lib.id), "/media/movies/a.mkv", JobStatus::Pending)).await.unwrap();
    repo::jobs::insert(&db, new_job(Some(lib.id), "/media/movies/b.mkv", JobStatus::Queued)).await.unwrap();
    repo::jobs::insert(&db, new_job(Some(other.id), "/media/shows/c.mkv", JobStatus::Encoding)).await.unwrap();
    same(db.clone()).await;
    let queue = step(JobStatus::Pending, JobEvent::Queue, JobChange::default(), "queued");
    repo::jobs::change_status(&db, a.id, JobStatus::Pending, queue).await.unwrap();
    // A live update changes no status, and no count.
    repo::jobs::update_live(&db, a.id, JobChange { progress: Some(5.0), ..Default::default() }).await.unwrap();
    same(db.clone()).await;
    let files: Vec<repo::jobs::FoundFile> = (0..1200)
        .map(|n| repo::jobs::FoundFile {
            path: format!("/media/shows/{n}.mkv").into(),
            file_name: format!("{n}.mkv"),
            size: 10,
            mtime_ns: 1,
            inode: i64::from(n),
        })
        .collect();
    assert_eq!(repo::jobs::register_batch(&db, other.id, "hevc", &files).await.unwrap(), 1200);
    same(db.clone()).await;
    // Whoever writes, through the code or not, the counts follow.
    db.execute_unprepared("UPDATE jobs SET status = 'FAILED' WHERE file_name LIKE '1%'").await.unwrap();
    same(db.clone()).await;
    // One statement whose moves cross (some QUEUED -> FAILED, as many FAILED -> QUEUED: no
    // net change), one that moves none, one that moves some one way.
    db.execute_unprepared(
        "UPDATE jobs SET status = CASE status WHEN 'QUEUED' THEN 'FAILED' ELSE 'QUEUED' END \
         WHERE id IN (SELECT id FROM jobs WHERE status = 'QUEUED' ORDER BY id LIMIT 50) \
         OR id IN (SELECT id FROM jobs WHERE status = 'FAILED' ORDER BY id LIMIT 50)",
    )
    .await
    .unwrap();
    same(db.clone()).await;
    db.execute_unprepared("UPDATE jobs SET progress = progress + 1").await.unwrap();
    same(db.clone()).await;
    db.execute_unprepared("UPDATE jobs SET status = 'PAUSED' WHERE id % 3 = 0").await.unwrap();
    same(db.clone()).await;
    repo::libraries::delete(&db, other.id).await.unwrap();
    same(db.clone()).await;
    assert_eq!(counted(&db).await.values().sum::<u64>(), 2);
});

/// 60 jobs in two libraries with ties in every sort column: sizes in 7 values, progress in 5,
/// one batch's creation time, a third completed (the rest without a completion time), four
/// statuses, two nodes.
async fn varied_jobs(db: &DatabaseConnection) -> (i32, i32) {
    use sea_orm::ConnectionTrait;
    let movies = repo::libraries::create(db, library("movies")).await.unwrap();
    let shows = repo::libraries::create(db, library("shows")).await.unwrap();
    for (lib, range) in [(movies.id, 0..40), (shows.id, 40..60)] {
        let files: Vec<repo::jobs::FoundFile> = range
            .map(|n: i64| repo::jobs::FoundFile {
                path: format!("/media/x/{n}.mkv").into(),
                file_name: format!("Film {:02}.mkv", n % 23),
                size: 1000 + n % 7,
                mtime_ns: 1,
                inode: n,
            })
            .collect();
        repo::jobs::register_batch(db, lib, "hevc", &files).await.unwrap();
    }
    for sql in [
        // Found files wait for the probe after a scan; these stand for probed ones.
        "UPDATE jobs SET status = 'QUEUED'",
        "UPDATE jobs SET progress = (id % 5) * 25.5",
        "UPDATE jobs SET status = 'COMPLETED', completed_at = created_at, node_name = 'n1' WHERE id % 3 = 0",
        "UPDATE jobs SET status = 'FAILED', node_name = 'n2' WHERE id % 3 = 1 AND id % 2 = 0",
        "UPDATE jobs SET status = 'ENCODING', node_name = 'n1' WHERE id % 7 = 2",
    ] {
        db.execute_unprepared(sql).await.unwrap();
    }
    // Later completion times for some, so that they differ and tie.
    let later = chrono::Utc::now() + chrono::Duration::seconds(30);
    for id in [3, 6, 9] {
        use sea_orm::{ActiveModelTrait, Set};
        let mut job: entities::job::ActiveModel = repo::jobs::get(db, id).await.unwrap().into();
        job.completed_at = Set(Some(later));
        job.updated_at = Set(later + chrono::Duration::seconds(id.into()));
        job.update(db).await.unwrap();
    }
    (movies.id, shows.id)
}

/// Every row a query lists, one page of `page_size` after another, following `nextCursor`.
async fn by_cursor(db: &DatabaseConnection, query: &JobQuery, page_size: u64) -> Vec<i32> {
    let mut ids = Vec::new();
    let mut query = JobQuery { page_size, after: None, ..query.clone() };
    loop {
        let page = repo::jobs::list(db, &query).await.unwrap();
        assert!(page.items.len() as u64 <= page_size);
        ids.extend(page.items.iter().map(|j| j.id));
        let Some(next) = page.next_cursor else { break };
        assert_eq!(page.items.len() as u64, page_size, "a cursor only after a full page");
        query.after = Some(repo::jobs::Cursor::decode(&next).expect("a cursor the server made reads back"));
    }
    ids
}

// Keyset pages (issue 16): for every sort, both orders and each filter, following the cursors
// gives exactly the rows of the one-page listing, in its order, which is the sort value then
// the id (NULL the smallest); and numbered pages give the same.
both_backends!(cursor_pages_list_every_row_once_in_every_order, |db: DatabaseConnection| async move {
    let (movies, _) = varied_jobs(&db).await;
    let filters = [
        JobQuery::default(),
        JobQuery { statuses: vec![JobStatus::Queued, JobStatus::Completed], ..Default::default() },
        JobQuery { library_id: Some(movies), ..Default::default() },
        JobQuery { node: Some("n1".into()), ..Default::default() },
        JobQuery { q: Some("film 1".into()), ..Default::default() },
    ];
    for filter in &filters {
        for (_, sort) in JobSort::NAMES {
            for descending in [false, true] {
                let query = JobQuery { sort: *sort, descending, page_size: 500, ..filter.clone() };
                let whole = repo::jobs::list(&db, &query).await.unwrap();
                assert_eq!(whole.next_cursor, None);
                assert_eq!(whole.total, whole.items.len() as u64);
                assert!(!whole.items.is_empty(), "{query:?} lists nothing");
                let expected: Vec<i32> = whole.items.iter().map(|j| j.id).collect();
                if sea_orm::ConnectionTrait::get_database_backend(&db) == sea_orm::DbBackend::Sqlite {
                    // The same rows when SQLite is kept to the sort's index (`walks_sort_index`).
                    let walked = repo::jobs::page_selects(&query, true).remove(0).all(&db).await.unwrap();
                    assert_eq!(walked.iter().map(|j| j.id).collect::<Vec<_>>(), expected, "{query:?} walked");
                }
                // Text columns follow the database's collation; the others are checked here.
                let mut sorted = whole.items.clone();
                let key = |j: &entities::job::Model| match sort {
                    JobSort::CreatedAt => (j.created_at.timestamp_nanos_opt(), 0.0, j.id),
                    JobSort::UpdatedAt => (j.updated_at.timestamp_nanos_opt(), 0.0, j.id),
                    JobSort::CompletedAt => (j.completed_at.and_then(|t| t.timestamp_nanos_opt()), 0.0, j.id),
                    JobSort::Progress => (None, j.progress, j.id),
                    JobSort::SourceSize => (Some(j.source_size), 0.0, j.id),
                    JobSort::FileName | JobSort::Status => (None, 0.0, 0),
                };
                sorted.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap());
                if descending {
                    sorted.reverse();
                }
                if !matches!(sort, JobSort::FileName | JobSort::Status) {
                    assert_eq!(sorted.iter().map(|j| j.id).collect::<Vec<_>>(), expected, "{query:?}");
                }
                for page_size in [1, 7, 50] {
                    assert_eq!(by_cursor(&db, &query, page_size).await, expected, "{query:?} by {page_size}");
                }
                let mut numbered = Vec::new();
                for page in 1.. {
                    let query = JobQuery { page, page_size: 7, ..query.clone() };
                    let items = repo::jobs::list(&db, &query).await.unwrap().items;
                    if items.is_empty() {
                        break;
                    }
                    numbered.extend(items.iter().map(|j| j.id));
                }
                assert_eq!(numbered, expected, "{query:?} by page number");
            }
        }
    }
    // Jobs added between two pages come before the cursor (newest first): the pages after
    // it are the rest of the listing as it was.
    let first = repo::jobs::list(&db, &JobQuery { page_size: 10, ..Default::default() }).await.unwrap();
    let before: Vec<i32> = repo::jobs::list(&db, &JobQuery { page_size: 500, ..Default::default() })
        .await
        .unwrap()
        .items
        .iter()
        .map(|j| j.id)
        .collect();
    repo::jobs::insert(&db, new_job(Some(movies), "/media/x/new.mkv", JobStatus::Queued)).await.unwrap();
    let cursor = repo::jobs::Cursor::decode(first.next_cursor.as_deref().unwrap()).unwrap();
    let rest =
        repo::jobs::list(&db, &JobQuery { page_size: 500, after: Some(cursor), ..Default::default() }).await.unwrap();
    assert_eq!(rest.items.iter().map(|j| j.id).collect::<Vec<_>>(), before[10..]);
    assert_eq!(rest.page, 1);
});

// Every order and filter of the job list is read from an index (issue 16): `EXPLAIN` of the
// listing's own statements shows no sort of the table (SQLite: no temporary B-tree for the
// ORDER BY; PostgreSQL, with sorting and sequential scans priced out: no Sort node) and, for
// a filter in the default order, no scan of the whole table; after a cursor, each statement
// enters the index at its start (SQLite: SEARCH; PostgreSQL: an Index Cond).
both_backends!(every_order_and_filter_of_the_job_list_is_read_from_an_index, |db: DatabaseConnection| async move {
    use sea_orm::{ConnectionTrait, DbBackend, QueryTrait, Statement, TransactionTrait};
    let (movies, _) = varied_jobs(&db).await;
    let backend = db.get_database_backend();
    let plan_of = |query: JobQuery, walk_sort_index: bool| {
        let db = db.clone();
        async move {
            let mut plans = Vec::new();
            for select in repo::jobs::page_selects(&query, walk_sort_index) {
                let statement = select.build(backend);
                let txn = db.begin().await.unwrap();
                let explain = if backend == DbBackend::Postgres {
                    txn.execute_unprepared("SET LOCAL enable_seqscan = off").await.unwrap();
                    txn.execute_unprepared("SET LOCAL enable_sort = off").await.unwrap();
                    "EXPLAIN"
                } else {
                    "EXPLAIN QUERY PLAN"
                };
                let sql = format!("{explain} {}", statement.sql);
                let values = statement.values.unwrap_or(sea_orm::Values(Vec::new()));
                let rows = txn.query_all(Statement::from_sql_and_values(backend, sql, values)).await.unwrap();
                txn.rollback().await.unwrap();
                let column = if backend == DbBackend::Postgres { "QUERY PLAN" } else { "detail" };
                plans
                    .push(rows.iter().map(|r| r.try_get::<String>("", column).unwrap()).collect::<Vec<_>>().join("\n"));
            }
            plans
        }
    };
    let plan = |query: JobQuery| plan_of(query, false);
    // What a plan shows, on each backend: the cursor's own value entered with its id, an
    // index entered at a bound, rows sorted, the whole table read.
    let pg = backend == DbBackend::Postgres;
    let ties_seek = |p: &str| if pg { p.contains("(id < ") || p.contains("(id > ") } else { p.contains("=? AND id") };
    let seeks = |p: &str| {
        if pg {
            p.contains("Index Cond")
        } else {
            !p.lines().any(|l| l.starts_with("SCAN")) && p.contains("SEARCH jobs USING")
        }
    };
    let sorts_itself = |p: &str| if pg { p.contains("Sort  (") } else { p.contains("TEMP B-TREE") };
    let whole_table = |p: &str| {
        if pg {
            p.contains("Seq Scan")
        } else {
            p.lines().any(|l| l.starts_with("SCAN jobs") && !l.contains("INDEX"))
        }
    };
    let fine = |plan: &str| !sorts_itself(plan) && !whole_table(plan);
    for (_, sort) in JobSort::NAMES {
        for descending in [false, true] {
            let query = JobQuery { sort: *sort, descending, ..Default::default() };
            let plans = plan(query.clone()).await;
            assert!(plans.len() == 1 && fine(&plans[0]), "{sort:?} desc={descending}:\n{plans:?}");
            // Deep pages after a cursor: the same index, entered where each range starts;
            // cursors on a job with and without a completion time.
            let whole = repo::jobs::list(&db, &JobQuery { page_size: 500, ..query.clone() }).await.unwrap();
            for at in [3, 25, 50] {
                let page = repo::jobs::list(&db, &JobQuery { page_size: at, ..query.clone() }).await.unwrap();
                let after = repo::jobs::Cursor::decode(page.next_cursor.as_deref().unwrap()).unwrap();
                let plans = plan(JobQuery { after: Some(after), ..query.clone() }).await;
                // The first range, the cursor's own value, seeks on the id too: a tied value
                // (a batch registered at one instant) is not walked from its start.
                assert!(
                    plans.iter().all(|p| fine(p) && seeks(p)) && ties_seek(&plans[0]),
                    "{sort:?} desc={descending} after {at} ({:?}):\n{}",
                    whole.items[at as usize - 1].completed_at,
                    plans.join("\n--\n")
                );
            }
        }
    }
    for filter in [
        JobQuery { statuses: vec![JobStatus::Completed], ..Default::default() },
        JobQuery { library_id: Some(movies), ..Default::default() },
        JobQuery { node: Some("n1".into()), ..Default::default() },
    ] {
        let plans = plan(filter.clone()).await;
        assert!(fine(&plans[0]), "{filter:?}:\n{plans:?}");
        // In another order, a filter that matches many rows walks the sort's index (on
        // SQLite by the listing's choice, `walks_sort_index`; PostgreSQL's planner chooses).
        let sqlite = backend == DbBackend::Sqlite;
        for (_, sort) in JobSort::NAMES.iter().filter(|(_, sort)| *sort != JobSort::CreatedAt) {
            let query = JobQuery { sort: *sort, ..filter.clone() };
            assert_eq!(repo::jobs::walks_sort_index(backend, &query, 100_000), sqlite);
            assert!(!repo::jobs::walks_sort_index(backend, &query, 50));
            let plans = plan_of(query, sqlite).await;
            assert!(!sorts_itself(&plans[0]), "{filter:?} by {sort:?}:\n{plans:?}");
        }
    }
    assert!(!repo::jobs::walks_sort_index(backend, &JobQuery::default(), 100_000));
    let by_name = JobQuery { sort: JobSort::FileName, ..Default::default() };
    assert!(!repo::jobs::walks_sort_index(backend, &by_name, 100_000), "no filter: the sort's index anyway");
});
