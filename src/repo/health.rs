//! Library health (issue 38): per library file the last check's result, keyed by the
//! library, the root it was found under and its path relative to that root
//! (`library_health_files`), and per library its latest run (`library_health_runs`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use entities::library_health_file::{self as file, Entity as Files};
use entities::library_health_run::{self as run, Entity as Runs};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
    Set, TransactionTrait,
};

use super::{now, Page, RepoError, RepoResult};
use crate::domain::library_health::{LastCheck, RunStatus};
use crate::domain::path_bytes;
use crate::media::health::{Depth, FileHealth, Verdict};

pub use crate::domain::paging::MAX_PAGE_SIZE;

/// One file of a library, where a run found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFile {
    /// The library's folder (as stored) the file is under.
    pub root: String,
    /// The whole path.
    pub path: PathBuf,
    pub size: i64,
    pub mtime_ns: i64,
}

impl FoundFile {
    /// The path below the root, readable and (where not UTF-8) its bytes.
    fn relative(&self) -> (String, Option<Vec<u8>>) {
        let relative = self.path.strip_prefix(&self.root).unwrap_or(&self.path);
        (path_bytes::readable(relative.as_os_str()).into_owned(), path_bytes::raw_if_not_utf8(relative.as_os_str()))
    }
}

/// A stored result's whole path.
pub fn path_of(model: &file::Model) -> PathBuf {
    Path::new(&model.root).join(path_bytes::from_stored(&model.path, model.path_raw.as_deref()))
}

/// A stored result's verdict; an unknown one (written by a newer version) reads as damaged,
/// which keeps the file from encoding rather than letting it through.
pub fn verdict_of(model: &file::Model) -> Verdict {
    match model.verdict.as_str() {
        "ok" => Verdict::Ok,
        "unreadable" => Verdict::Unreadable,
        _ => Verdict::Damaged,
    }
}

/// What the domain's rules read of a stored result.
pub fn last_check(model: &file::Model) -> LastCheck {
    LastCheck {
        verdict: verdict_of(model),
        size: model.size,
        mtime_ns: model.mtime_ns,
        ignored: model.ignored,
        message: model.message.clone(),
        first_error_seconds: model.first_error_seconds,
    }
}

/// Starts a run of `library_id`, replacing the last one; a conflict while one runs.
pub async fn start<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    library_id: i32,
    depth: Depth,
    all: bool,
    scheduled: bool,
) -> RepoResult<run::Model> {
    let txn = db.begin().await?;
    // Written first, no read (see `repo::forecasts::start`): an ended run goes, a running
    // one stays and the insert meets its key.
    Runs::delete_many()
        .filter(run::Column::LibraryId.eq(library_id))
        .filter(run::Column::Status.ne(RunStatus::Running.as_str()))
        .exec(&txn)
        .await?;
    let model = run::ActiveModel {
        library_id: Set(library_id),
        depth: Set(depth.as_str().to_string()),
        all: Set(all),
        scheduled: Set(scheduled),
        status: Set(RunStatus::Running.to_string()),
        files_total: Set(0),
        files_done: Set(0),
        started_at: Set(now()),
        finished_at: Set(None),
    }
    .insert(&txn)
    .await
    .map_err(|e| RepoError::unique(e, || format!("a health check of library {library_id} is running")))?;
    txn.commit().await?;
    Ok(model)
}

/// How many files the running run of `library_id` reads, once the walk has counted them.
pub async fn set_total(db: &impl ConnectionTrait, library_id: i32, total: u32) -> RepoResult<()> {
    Runs::update_many()
        .col_expr(run::Column::FilesTotal, Expr::value(i32::try_from(total).unwrap_or(i32::MAX)))
        .filter(run::Column::LibraryId.eq(library_id))
        .filter(run::Column::Status.eq(RunStatus::Running.as_str()))
        .exec(db)
        .await?;
    Ok(())
}

/// One more file done in the running run of `library_id`.
pub async fn advance(db: &impl ConnectionTrait, library_id: i32) -> RepoResult<()> {
    Runs::update_many()
        .col_expr(run::Column::FilesDone, Expr::col(run::Column::FilesDone).add(1))
        .filter(run::Column::LibraryId.eq(library_id))
        .filter(run::Column::Status.eq(RunStatus::Running.as_str()))
        .exec(db)
        .await?;
    Ok(())
}

/// Ends the running run of `library_id` with `status`; false when none runs.
pub async fn finish(db: &impl ConnectionTrait, library_id: i32, status: RunStatus) -> RepoResult<bool> {
    let result = Runs::update_many()
        .col_expr(run::Column::Status, Expr::value(status.to_string()))
        .col_expr(run::Column::FinishedAt, Expr::value(now()))
        .filter(run::Column::LibraryId.eq(library_id))
        .filter(run::Column::Status.eq(RunStatus::Running.as_str()))
        .exec(db)
        .await?;
    Ok(result.rows_affected > 0)
}

/// Runs left running by a stop of the node: nothing runs them any more.
pub async fn interrupt_running(db: &impl ConnectionTrait) -> RepoResult<u64> {
    let result = Runs::update_many()
        .col_expr(run::Column::Status, Expr::value(RunStatus::Interrupted.to_string()))
        .col_expr(run::Column::FinishedAt, Expr::value(now()))
        .filter(run::Column::Status.eq(RunStatus::Running.as_str()))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}

/// The latest run of `library_id`.
pub async fn run_of(db: &impl ConnectionTrait, library_id: i32) -> RepoResult<Option<run::Model>> {
    Ok(Runs::find_by_id(library_id).one(db).await?)
}

/// Every stored result of `library_id`, by (root, relative path).
pub async fn results_of(
    db: &impl ConnectionTrait,
    library_id: i32,
) -> RepoResult<HashMap<(String, String), file::Model>> {
    let rows = Files::find().filter(file::Column::LibraryId.eq(library_id)).all(db).await?;
    Ok(rows.into_iter().map(|r| ((r.root.clone(), r.path.clone()), r)).collect())
}

/// Records what a check found of `found`: a changed file's ignore goes with its old finding.
pub async fn record(
    db: &impl ConnectionTrait,
    library_id: i32,
    found: &FoundFile,
    health: &FileHealth,
    node: &str,
) -> RepoResult<file::Model> {
    let (relative, raw) = found.relative();
    let existing = Files::find()
        .filter(file::Column::LibraryId.eq(library_id))
        .filter(file::Column::Root.eq(found.root.as_str()))
        .filter(file::Column::Path.eq(relative.as_str()))
        .one(db)
        .await?;
    let error_count = i64::try_from(health.error_count).unwrap_or(i64::MAX);
    let mut model = match &existing {
        Some(row) => {
            let mut model: file::ActiveModel = row.clone().into();
            let same = row.size == found.size && row.mtime_ns == found.mtime_ns;
            model.ignored = Set(row.ignored && same);
            model
        }
        None => file::ActiveModel {
            library_id: Set(library_id),
            root: Set(found.root.clone()),
            path: Set(relative),
            ignored: Set(false),
            ..Default::default()
        },
    };
    model.path_raw = Set(raw);
    model.size = Set(found.size);
    model.mtime_ns = Set(found.mtime_ns);
    model.depth = Set(health.depth.as_str().to_string());
    model.verdict = Set(health.verdict.as_str().to_string());
    model.first_error_seconds = Set(health.first_error_seconds);
    model.message = Set(health.message.clone());
    model.error_count = Set(error_count);
    model.checked_at = Set(now());
    model.node = Set(Some(node.to_string()));
    Ok(match existing {
        Some(_) => model.update(db).await?,
        None => model.insert(db).await?,
    })
}

/// One stored result of `library_id`.
pub async fn result(db: &impl ConnectionTrait, library_id: i32, id: i32) -> RepoResult<file::Model> {
    Files::find_by_id(id)
        .filter(file::Column::LibraryId.eq(library_id))
        .one(db)
        .await?
        .ok_or_else(|| RepoError::NotFound(format!("health result {id} of library {library_id}")))
}

/// Sets whether a finding is ignored.
pub async fn set_ignored(
    db: &impl ConnectionTrait,
    library_id: i32,
    id: i32,
    ignored: bool,
) -> RepoResult<file::Model> {
    let mut model: file::ActiveModel = result(db, library_id, id).await?.into();
    model.ignored = Set(ignored);
    Ok(model.update(db).await?)
}

/// A page of the results of `library_id`, in `verdict` alone when given; damaged and
/// unreadable files first, then by path.
pub async fn page(
    db: &impl ConnectionTrait,
    library_id: i32,
    verdict: Option<Verdict>,
    page: u64,
    page_size: u64,
) -> RepoResult<Page<file::Model>> {
    let filtered = || {
        let find = Files::find().filter(file::Column::LibraryId.eq(library_id));
        match verdict {
            Some(v) => find.filter(file::Column::Verdict.eq(v.as_str())),
            None => find,
        }
    };
    let total = filtered().count(db).await?;
    let items = filtered()
        // "ok" sorts after "damaged" and before "unreadable": findings first by hand.
        .order_by_asc(Expr::cust("CASE verdict WHEN 'ok' THEN 1 ELSE 0 END"))
        .order_by_asc(file::Column::Root)
        .order_by_asc(file::Column::Path)
        .order_by_asc(file::Column::Id)
        .offset(crate::domain::paging::offset(page, page_size).unwrap_or(i64::MAX as u64))
        .limit(page_size)
        .all(db)
        .await?;
    Ok(Page { items, total, page, page_size, next_cursor: None })
}

/// How many stored results of `library_id` have each verdict.
pub async fn counts(db: &impl ConnectionTrait, library_id: i32) -> RepoResult<HashMap<String, u64>> {
    let rows: Vec<(String, i64)> = Files::find()
        .select_only()
        .column(file::Column::Verdict)
        .column_as(file::Column::Id.count(), "n")
        .filter(file::Column::LibraryId.eq(library_id))
        .group_by(file::Column::Verdict)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows.into_iter().map(|(v, n)| (v, u64::try_from(n).unwrap_or(0))).collect())
}

/// The stored result of the file at `path` in a library with these `roots`, if a check read
/// it (what an encode asks before it starts, `actors::job::prepare`).
pub async fn result_for_path(
    db: &impl ConnectionTrait,
    library_id: i32,
    roots: &[String],
    path: &Path,
) -> RepoResult<Option<file::Model>> {
    let Some((root, relative)) = roots.iter().find_map(|r| Some((r, path.strip_prefix(r).ok()?))) else {
        return Ok(None);
    };
    let readable = path_bytes::readable(relative.as_os_str()).into_owned();
    let row = Files::find()
        .filter(file::Column::LibraryId.eq(library_id))
        .filter(file::Column::Root.eq(root.as_str()))
        .filter(file::Column::Path.eq(readable))
        .one(db)
        .await?;
    // A path that is not UTF-8 is matched on its bytes, never on a readable form another
    // path may share.
    Ok(row.filter(|r| r.path_raw == path_bytes::raw_if_not_utf8(relative.as_os_str())))
}
