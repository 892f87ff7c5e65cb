//! Stream rules (issue 37) through the real runtime: the library's filters leave files
//! alone at analysis, each SKIPPED job naming the rule, while a file the filters pass is
//! encoded.

use std::time::Duration;

use condense::domain::job::JobStatus;
use condense::domain::stream_rules::StreamRules;
use condense::repo;
use sea_orm::DatabaseConnection;

use crate::both_backends;
use crate::common::media as clips;
use crate::common::runtime::{library, start_runtime, wait_terminal};

both_backends!(filters_skip_files_with_the_rule_named, |db: DatabaseConnection| async move {
    let filtered = tempfile::tempdir().unwrap();
    std::fs::create_dir(filtered.path().join("Extras")).unwrap();
    clips::h264(&filtered.path().join("Extras"), "bonus.mkv", "64x64", 1);
    clips::h264(filtered.path(), "thin.mkv", "64x64", 1);
    let rules = StreamRules {
        skip_paths: vec!["Extras/**".into()],
        // Far above what any file reaches at 1080p's pixel rate.
        min_bitrate_kbps: Some(1_000_000),
        ..StreamRules::default()
    };
    repo::libraries::create(
        &db,
        repo::libraries::NewLibrary { stream_rules: rules, ..library(filtered.path(), false) },
    )
    .await
    .unwrap();
    let passed = tempfile::tempdir().unwrap();
    std::fs::create_dir(passed.path().join("Films")).unwrap();
    clips::h264(&passed.path().join("Films"), "kept.mkv", "64x64", 1);
    let rules = StreamRules { skip_paths: vec!["Extras/**".into(), "*.mkv".into()], ..StreamRules::default() };
    let other =
        repo::libraries::NewLibrary { name: "other".into(), stream_rules: rules, ..library(passed.path(), false) };
    repo::libraries::create(&db, other).await.unwrap();

    let _runtime = start_runtime(&db, 1, 0, condense::license::BUILTIN_PUBLIC_KEY).await;
    let jobs = wait_terminal(&db, 3, Duration::from_secs(240)).await;
    let by_name: std::collections::HashMap<_, _> = jobs.iter().map(|j| (j.file_name.as_str(), j)).collect();
    let bonus = by_name["bonus.mkv"];
    assert_eq!(bonus.status, JobStatus::Skipped);
    assert_eq!(bonus.skip_reason.as_deref(), Some("skipPaths: Extras/bonus.mkv matches \"Extras/**\""));
    let thin = by_name["thin.mkv"];
    assert_eq!(thin.status, JobStatus::Skipped);
    let reason = thin.skip_reason.as_deref().unwrap_or_default();
    assert!(reason.starts_with("minBitrateKbps: ") && reason.ends_with("under 1000000 kb/s"), "{reason}");
    // `*` stays within one folder: Films/kept.mkv is not matched by "*.mkv".
    let kept = by_name["kept.mkv"];
    assert_eq!(kept.status, JobStatus::Completed, "{:?} {:?}", kept.skip_reason, kept.failure_detail);
});
