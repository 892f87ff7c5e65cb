//! Schema migrations, run at start-up by `condense serve` and by `condense migrate`.

pub use sea_orm_migration::prelude::*;

mod m20261121_000001_initial;
mod m20261121_000002_jobs_created_at_index;
mod m20261123_000003_jobs_crash_count;
mod m20261123_000010_node_identity;
mod m20261125_000011_typed_enums;
mod m20261125_000012_user_token_version;
mod m20261125_000013_user_roles;
mod m20261125_000014_audit_log;
mod m20261125_000015_api_keys;
mod m20261125_000016_job_priority;
mod m20261125_000017_notifications;
mod m20261126_000018_connections;
mod m20261126_000019_job_counts;
mod m20261126_000020_job_list_indexes;
mod m20261127_000021_job_segments;
mod m20261127_000034_two_pass;
mod m20261127_000035_stream_rules;
mod m20261128_000022_job_skip_reason;
mod m20261128_000023_quality_mode;
mod m20261128_000024_library_forecasts;
mod m20261128_000025_keep_dolby_vision;
mod m20261128_000026_node_decoders;
mod m20261128_000027_job_counts_net_change;
mod m20261128_000037_library_health;
mod m20261128_000038_transfer;
mod m20261129_000030_keep_modified_time;
mod m20261129_000031_job_path_bytes;
mod m20261129_000032_key_scopes;
mod m20261129_000039_health_node;
mod m20261130_000033_license_trial;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261121_000001_initial::Migration),
            Box::new(m20261121_000002_jobs_created_at_index::Migration),
            Box::new(m20261123_000003_jobs_crash_count::Migration),
            Box::new(m20261123_000010_node_identity::Migration),
            Box::new(m20261125_000011_typed_enums::Migration),
            Box::new(m20261125_000012_user_token_version::Migration),
            Box::new(m20261125_000013_user_roles::Migration),
            Box::new(m20261125_000014_audit_log::Migration),
            Box::new(m20261125_000015_api_keys::Migration),
            Box::new(m20261125_000016_job_priority::Migration),
            Box::new(m20261125_000017_notifications::Migration),
            Box::new(m20261126_000018_connections::Migration),
            Box::new(m20261126_000019_job_counts::Migration),
            Box::new(m20261126_000020_job_list_indexes::Migration),
            Box::new(m20261127_000021_job_segments::Migration),
            Box::new(m20261128_000022_job_skip_reason::Migration),
            Box::new(m20261128_000023_quality_mode::Migration),
            Box::new(m20261128_000024_library_forecasts::Migration),
            Box::new(m20261128_000025_keep_dolby_vision::Migration),
            Box::new(m20261128_000026_node_decoders::Migration),
            Box::new(m20261128_000027_job_counts_net_change::Migration),
            Box::new(m20261129_000030_keep_modified_time::Migration),
            Box::new(m20261129_000031_job_path_bytes::Migration),
            Box::new(m20261129_000032_key_scopes::Migration),
            Box::new(m20261130_000033_license_trial::Migration),
            Box::new(m20261127_000034_two_pass::Migration),
            Box::new(m20261127_000035_stream_rules::Migration),
            Box::new(m20261128_000037_library_health::Migration),
            Box::new(m20261128_000038_transfer::Migration),
            Box::new(m20261129_000039_health_node::Migration),
        ]
    }
}
