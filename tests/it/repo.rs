//! The repository layer on SQLite and PostgreSQL.

use condense::domain::job::JobStatus;
use condense::domain::node::{NodeRole, NodeStatus};
use condense::repo::events::NewEvent;
use condense::repo::jobs::{JobQuery, JobSort, NewJob, StatusChange};
use condense::repo::libraries::{LibraryPatch, NewLibrary};
use condense::repo::licenses::NewLicense;
use condense::repo::nodes::NodeFacts;
use condense::repo::{self, RepoError};
use entities::job;
use sea_orm::{DatabaseConnection, Set};

use crate::both_backends;

fn library(name: &str) -> NewLibrary {
    NewLibrary {
        name: name.to_string(),
        paths: vec![format!("/media/{name}")],
        target_codec: "hevc".into(),
        encoder: "libx265".into(),
        quality: 26,
        preset: "medium".into(),
        watch: true,
    }
}

fn new_job(library_id: i32, path: &str, status: JobStatus) -> NewJob {
    NewJob {
        library_id: Some(library_id),
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
    let job = repo::jobs::insert(&db, new_job(shows.id, "/media/shows/a.mkv", JobStatus::Pending)).await.unwrap();
    repo::libraries::delete(&db, shows.id).await.unwrap();
    assert!(matches!(repo::jobs::get(&db, job.id).await, Err(RepoError::NotFound(_))));
    assert!(repo::events::list(&db, job.id).await.unwrap().is_empty());
    assert!(matches!(repo::libraries::delete(&db, shows.id).await, Err(RepoError::NotFound(_))));
    assert!(matches!(repo::libraries::get(&db, 999).await, Err(RepoError::NotFound(_))));
});

both_backends!(job_status_changes_are_checked_and_recorded, |db: DatabaseConnection| async move {
    let lib = repo::libraries::create(&db, library("movies")).await.unwrap();
    let job = repo::jobs::insert(&db, new_job(lib.id, "/media/movies/a.mp4", JobStatus::Pending)).await.unwrap();
    assert_eq!(job.status, "PENDING");
    assert!(matches!(
        repo::jobs::insert(&db, new_job(lib.id, "/media/movies/a.mp4", JobStatus::Pending)).await,
        Err(RepoError::Conflict(_))
    ));

    let queued = repo::jobs::change_status(
        &db,
        job.id,
        JobStatus::Pending,
        StatusChange { to: JobStatus::Queued, set: job::ActiveModel::default(), event: NewEvent::new("queued") },
    )
    .await
    .unwrap();
    assert_eq!(queued.status, "QUEUED");

    let set = job::ActiveModel {
        stage: Set(Some("ANALYZING".into())),
        node_name: Set(Some("n1".into())),
        ..Default::default()
    };
    let change = StatusChange {
        to: JobStatus::Analyzing,
        set,
        event: NewEvent::new("started").on_node(Some("n1".into())).with_detail(serde_json::json!({"lease": "x"})),
    };
    let analyzing = repo::jobs::change_status(&db, job.id, JobStatus::Queued, change).await.unwrap();
    assert_eq!(analyzing.status, "ANALYZING");
    assert_eq!(analyzing.stage.as_deref(), Some("ANALYZING"));
    assert_eq!(analyzing.node_name.as_deref(), Some("n1"));

    // A stale caller (still thinks QUEUED) changes nothing and records nothing.
    let stale =
        StatusChange { to: JobStatus::Cancelled, set: job::ActiveModel::default(), event: NewEvent::new("cancelled") };
    let err = repo::jobs::change_status(&db, job.id, JobStatus::Queued, stale).await.unwrap_err();
    assert!(matches!(&err, RepoError::Conflict(m) if m.contains("ANALYZING")), "{err}");
    assert_eq!(repo::jobs::get(&db, job.id).await.unwrap().status, "ANALYZING");

    let missing = StatusChange { to: JobStatus::Queued, set: job::ActiveModel::default(), event: NewEvent::new("x") };
    assert!(matches!(
        repo::jobs::change_status(&db, 4242, JobStatus::Pending, missing).await,
        Err(RepoError::NotFound(_))
    ));

    let live = job::ActiveModel { progress: Set(42.5), fps: Set(31.0), ..Default::default() };
    repo::jobs::update_live(&db, job.id, live).await.unwrap();
    let read = repo::jobs::get(&db, job.id).await.unwrap();
    assert_eq!((read.progress, read.fps), (42.5, 31.0));

    let events = repo::events::list(&db, job.id).await.unwrap();
    let kinds: Vec<_> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["created", "queued", "started"]);
    let steps: Vec<_> = events.iter().map(|e| (e.from_status.as_deref(), e.to_status.as_deref())).collect();
    assert_eq!(
        steps,
        [(None, Some("PENDING")), (Some("PENDING"), Some("QUEUED")), (Some("QUEUED"), Some("ANALYZING"))]
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
        repo::jobs::insert(&db, new_job(lib, &format!("/m/Clip_{i}.mkv"), status)).await.unwrap();
    }
    repo::jobs::insert(&db, new_job(a.id, "/m/100%_done.mkv", JobStatus::Failed)).await.unwrap();

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
    repo::users::create(&db, "admin", "hash-1").await.unwrap();
    assert!(matches!(repo::users::create(&db, "admin", "h").await, Err(RepoError::Conflict(_))));
    repo::users::set_password_hash(&db, "admin", "hash-2").await.unwrap();
    assert_eq!(repo::users::find(&db, "admin").await.unwrap().unwrap().password_hash, "hash-2");
    assert!(matches!(repo::users::set_password_hash(&db, "ghost", "h").await, Err(RepoError::NotFound(_))));
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
    let license = |tier: &str| NewLicense {
        key: format!("key-{tier}"),
        tier: tier.into(),
        licensee: "Test".into(),
        expires_at: None,
    };
    repo::licenses::install(&db, license("SUPPORTER")).await.unwrap();
    repo::licenses::install(&db, license("PRO")).await.unwrap();
    assert_eq!(repo::licenses::current(&db).await.unwrap().unwrap().tier, "PRO");
    repo::licenses::remove(&db).await.unwrap();
    assert!(repo::licenses::current(&db).await.unwrap().is_none());
});

both_backends!(nodes_upsert_status_and_heartbeat, |db: DatabaseConnection| async move {
    let facts = NodeFacts {
        name: "node-a".into(),
        role: NodeRole::Main,
        address: "10.0.0.1".into(),
        gpu: None,
        cores: 2,
        memory_total: 1 << 30,
        max_jobs: 1,
        encoders: vec!["libx265".into()],
    };
    let first = repo::nodes::upsert(&db, facts.clone()).await.unwrap();
    assert_eq!(first.status, "ONLINE");
    let degraded =
        repo::nodes::set_status(&db, first.id, NodeStatus::Degraded, Some("path missing".into())).await.unwrap();
    assert_eq!(degraded.status_reason.as_deref(), Some("path missing"));

    let again = repo::nodes::upsert(&db, NodeFacts { cores: 4, ..facts }).await.unwrap();
    assert_eq!(again.id, first.id, "same name, same node");
    assert_eq!((again.cores, again.status.as_str(), again.status_reason.clone()), (4, "ONLINE", None));
    assert_eq!(again.encoders, serde_json::json!(["libx265"]));

    repo::nodes::record_heartbeat(&db, first.id, 1.5, 512, 1).await.unwrap();
    let read = repo::nodes::get(&db, first.id).await.unwrap();
    assert_eq!((read.load1, read.memory_used, read.active_jobs), (1.5, 512, 1));
    assert_eq!(repo::nodes::list(&db).await.unwrap().len(), 1);
    assert!(repo::nodes::find(&db, "nope").await.unwrap().is_none());
});

both_backends!(a_stale_lease_changes_nothing, |db: DatabaseConnection| async move {
    let lib = repo::libraries::create(&db, library("leases")).await.unwrap();
    let job = repo::jobs::insert(&db, new_job(lib.id, "/media/leases/a.mkv", JobStatus::Queued)).await.unwrap();
    let start = job::ActiveModel { lease_id: Set(Some("current".into())), ..Default::default() };
    let change = StatusChange { to: JobStatus::Encoding, set: start, event: NewEvent::new("started") };
    repo::jobs::change_status(&db, job.id, JobStatus::Queued, change).await.unwrap();

    // A transition under a lease the job no longer has is refused inside the UPDATE.
    let pause = |lease: &'static str| {
        let set = job::ActiveModel { lease_id: Set(None), ..Default::default() };
        let change = StatusChange { to: JobStatus::Paused, set, event: NewEvent::new("paused") };
        let db = db.clone();
        async move { repo::jobs::change_status_as(&db, job.id, JobStatus::Encoding, Some(lease), change).await }
    };
    assert!(matches!(pause("stale").await, Err(RepoError::Conflict(_))));
    // Live progress and events likewise.
    let progress = job::ActiveModel { progress: Set(50.0), ..Default::default() };
    let refused = repo::jobs::update_live_leased(&db, job.id, "stale", progress.clone()).await;
    assert!(matches!(refused, Err(RepoError::Conflict(_))), "{refused:?}");
    let refused = repo::jobs::record_event_leased(&db, job.id, "stale", NewEvent::new("replace_swapped")).await;
    assert!(matches!(refused, Err(RepoError::Conflict(_))), "{refused:?}");
    let now = repo::jobs::get(&db, job.id).await.unwrap();
    assert_eq!((now.status.as_str(), now.progress, now.lease_id.as_deref()), ("ENCODING", 0.0, Some("current")));
    let kinds: Vec<_> = repo::events::list(&db, job.id).await.unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["created", "started"]);

    // The holder's own lease passes.
    repo::jobs::update_live_leased(&db, job.id, "current", progress).await.unwrap();
    repo::jobs::record_event_leased(&db, job.id, "current", NewEvent::new("replace_swapped")).await.unwrap();
    let paused = pause("current").await.unwrap();
    assert_eq!((paused.status.as_str(), paused.progress, paused.lease_id), ("PAUSED", 50.0, None));
    // Released: the old holder can do nothing more.
    let late = repo::jobs::record_event_leased(&db, job.id, "current", NewEvent::new("late")).await;
    assert!(matches!(late, Err(RepoError::Conflict(_))), "{late:?}");
    let late = repo::jobs::update_live_leased(&db, job.id, "current", job::ActiveModel::default()).await;
    assert!(matches!(late, Err(RepoError::Conflict(_))), "{late:?}");
});
