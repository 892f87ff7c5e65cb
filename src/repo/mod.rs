//! Database access with sea-orm: every query and write lives here, nothing else in the
//! crate builds SQL. Works on SQLite (embedded default) and PostgreSQL alike.

pub mod api_keys;
pub mod audit;
pub mod connections;
pub mod enums;
pub mod events;
pub mod forecasts;
pub mod health;
pub mod jobs;
pub mod libraries;
pub mod licenses;
pub mod nodes;
pub mod notifications;
pub mod schedules;
pub mod segments;
pub mod settings;
pub mod stats;
pub mod transfers;
pub mod users;

use std::time::Duration;

use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr, SqlErr};

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("database error: {0}")]
    Db(#[from] DbErr),
}

impl RepoError {
    /// Turns a unique-constraint violation into a conflict with a readable message.
    fn unique(err: DbErr, message: impl FnOnce() -> String) -> Self {
        match err.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(_)) => RepoError::Conflict(message()),
            _ => RepoError::Db(err),
        }
    }
}

pub type RepoResult<T> = Result<T, RepoError>;

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
    pub page: u64,
    pub page_size: u64,
    /// Where the next page starts (`after`), for listings with keyset pages (jobs); null on the
    /// last page and in other listings.
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// The same page with each item seen through `view`.
    pub fn map<'a, U>(&'a self, view: impl FnMut(&'a T) -> U) -> Page<U> {
        Page {
            items: self.items.iter().map(view).collect(),
            total: self.total,
            page: self.page,
            page_size: self.page_size,
            next_cursor: self.next_cursor.clone(),
        }
    }
}

/// Opens the database. SQLite gets WAL journaling so readers never wait on the writer.
pub async fn connect(url: &str) -> RepoResult<DatabaseConnection> {
    let sqlite = url.starts_with("sqlite:");
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(if sqlite { 4 } else { 16 })
        .min_connections(1)
        .connect_timeout(Duration::from_secs(10))
        .acquire_timeout(Duration::from_secs(30))
        .sqlx_logging(false);
    let db = Database::connect(options).await?;
    if db.get_database_backend() == DbBackend::Sqlite {
        db.execute_unprepared("PRAGMA journal_mode=WAL").await?;
    }
    Ok(db)
}

/// Applies every pending migration. Safe to run on each start.
pub async fn migrate(db: &DatabaseConnection) -> RepoResult<()> {
    Migrator::up(db, None).await?;
    Ok(())
}

/// True when the database answers.
pub async fn ping(db: &DatabaseConnection) -> bool {
    db.ping().await.is_ok()
}

/// A name for the backend, for logs and the health page.
pub fn backend_name(db: &DatabaseConnection) -> &'static str {
    match db.get_database_backend() {
        DbBackend::Sqlite => "sqlite",
        DbBackend::Postgres => "postgres",
        DbBackend::MySql => "mysql",
    }
}

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}
