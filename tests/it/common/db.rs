//! A migrated database for one test, on SQLite (a temp file) or PostgreSQL (a schema of its
//! own in the `test` database, dropped at the end).

use condense::repo;
use sea_orm::{ConnectionTrait, DatabaseConnection};

pub fn postgres_url() -> String {
    std::env::var("TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

/// When set, a PostgreSQL server that does not answer fails the tests instead of skipping them.
fn postgres_required() -> bool {
    std::env::var("CONDENSE_REQUIRE_POSTGRES").is_ok_and(|v| v == "1")
}

pub struct TestDb {
    pub db: DatabaseConnection,
    schema: Option<(String, DatabaseConnection)>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("test.db").display());
        let db = repo::connect(&url).await.unwrap();
        repo::migrate(&db).await.unwrap();
        TestDb { db, schema: None, _dir: Some(dir) }
    }

    /// A fresh schema on the test PostgreSQL server, or None (with a SKIPPED line naming the
    /// test) where no server answers.
    pub async fn postgres(test: &str) -> Option<TestDb> {
        let (schema, admin, url) = Self::postgres_schema(test).await?;
        let db = repo::connect(&url).await.unwrap();
        repo::migrate(&db).await.unwrap();
        Some(TestDb { db, schema: Some((schema, admin)), _dir: None })
    }

    /// An empty schema and a URL whose connections use it (for a child process to migrate).
    pub async fn postgres_schema(test: &str) -> Option<(String, DatabaseConnection, String)> {
        let base = postgres_url();
        let admin = match repo::connect(&base).await {
            Ok(db) => db,
            Err(e) if !postgres_required() => {
                eprintln!("SKIPPED {test}: no PostgreSQL answers at {base}: {e}");
                return None;
            }
            Err(e) => panic!("PostgreSQL required (CONDENSE_REQUIRE_POSTGRES=1) but {base} fails: {e}"),
        };
        let schema = format!("t_{}", condense::security::generate_secret(12).to_lowercase());
        admin.execute_unprepared(&format!("CREATE SCHEMA \"{schema}\"")).await.unwrap();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        Some((schema, admin, url))
    }

    /// Closes the connections and drops the PostgreSQL schema.
    pub async fn finish(self) {
        let TestDb { db, schema, .. } = self;
        let _ = db.close().await;
        if let Some((schema, admin)) = schema {
            drop_schema(&admin, &schema).await;
        }
    }
}

pub async fn drop_schema(admin: &DatabaseConnection, schema: &str) {
    admin.execute_unprepared(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await.unwrap();
}

/// Runs an async test body against SQLite and against PostgreSQL, as two tests named
/// `<name>::sqlite` and `<name>::postgres`.
#[macro_export]
macro_rules! both_backends {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[actix_web::test]
            async fn sqlite() {
                let test_db = $crate::common::db::TestDb::sqlite().await;
                ($body)(test_db.db.clone()).await;
                test_db.finish().await;
            }

            #[actix_web::test]
            async fn postgres() {
                let name = concat!(module_path!(), "::postgres");
                let Some(test_db) = $crate::common::db::TestDb::postgres(name).await else { return };
                ($body)(test_db.db.clone()).await;
                test_db.finish().await;
            }
        }
    };
}
