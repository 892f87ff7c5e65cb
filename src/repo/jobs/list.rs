//! The job list: filters, the order and a page by number or after a cursor (`JobQuery`,
//! `Cursor`), each read from an index, with the page's total.

use chrono::{DateTime, Utc};
use entities::job::{self, Column, Entity};
use entities::sea_orm_active_enums as stored;
use sea_orm::sea_query::{Expr, Func, LikeExpr};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, Order, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Select,
};

use super::read::count_by_status;
use crate::domain::job::JobStatus;
use crate::repo::{Page, RepoResult};

pub use crate::domain::paging::MAX_PAGE_SIZE;
pub const DEFAULT_PAGE_SIZE: u64 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum JobSort {
    #[default]
    CreatedAt,
    UpdatedAt,
    CompletedAt,
    FileName,
    Status,
    Progress,
    SourceSize,
}

impl JobSort {
    pub const NAMES: &'static [(&'static str, JobSort)] = &[
        ("createdAt", JobSort::CreatedAt),
        ("updatedAt", JobSort::UpdatedAt),
        ("completedAt", JobSort::CompletedAt),
        ("fileName", JobSort::FileName),
        ("status", JobSort::Status),
        ("progress", JobSort::Progress),
        ("sourceSize", JobSort::SourceSize),
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, sort)| *sort == self).map_or("createdAt", |(name, _)| *name)
    }

    /// The sort of that name, in any case.
    pub fn named(name: &str) -> Option<Self> {
        Self::NAMES.iter().find(|(known, _)| known.eq_ignore_ascii_case(name)).map(|(_, sort)| *sort)
    }

    fn column(self) -> Column {
        match self {
            JobSort::CreatedAt => Column::CreatedAt,
            JobSort::UpdatedAt => Column::UpdatedAt,
            JobSort::CompletedAt => Column::CompletedAt,
            JobSort::FileName => Column::FileName,
            JobSort::Status => Column::Status,
            JobSort::Progress => Column::Progress,
            JobSort::SourceSize => Column::SourceSize,
        }
    }
}

/// Filters, order and page of a job listing.
#[derive(Debug, Clone, PartialEq)]
pub struct JobQuery {
    pub statuses: Vec<JobStatus>,
    pub library_id: Option<i32>,
    pub node: Option<String>,
    /// Case-insensitive substring of the file name.
    pub q: Option<String>,
    pub sort: JobSort,
    pub descending: bool,
    /// 1-based. Not used with `after`.
    pub page: u64,
    pub page_size: u64,
    /// A keyset page: the rows right after this one, in the query's order.
    pub after: Option<Cursor>,
}

impl Default for JobQuery {
    fn default() -> Self {
        JobQuery {
            statuses: Vec::new(),
            library_id: None,
            node: None,
            q: None,
            sort: JobSort::CreatedAt,
            descending: true,
            page: 1,
            page_size: DEFAULT_PAGE_SIZE,
            after: None,
        }
    }
}

/// Where a keyset page starts: right after the row with this sort value and id. `list` makes
/// one from the last row of every full page (`nextCursor`), and a client hands it back as
/// `after`. A page so found is read from the sort's index, however deep (an `OFFSET` walks
/// every row before it), and rows added or moved meanwhile shift nothing after the cursor.
/// Made only by `list` and `decode`, so its value always fits its sort.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    sort: JobSort,
    descending: bool,
    /// The row's sort value as JSON: a string (times as RFC 3339, status, file name), a number
    /// (progress, size), or null (no completion time).
    value: serde_json::Value,
    id: i32,
}

impl Cursor {
    /// The sort and direction (descending) of the listing that made it.
    pub fn order(&self) -> (JobSort, bool) {
        (self.sort, self.descending)
    }

    fn of(sort: JobSort, descending: bool, job: &job::Model) -> Self {
        use chrono::SecondsFormat::AutoSi;
        use sea_orm::ActiveEnum;
        let time = |at: &DateTime<Utc>| serde_json::Value::from(at.to_rfc3339_opts(AutoSi, true));
        let value = match sort {
            JobSort::CreatedAt => time(&job.created_at),
            JobSort::UpdatedAt => time(&job.updated_at),
            JobSort::CompletedAt => job.completed_at.as_ref().map_or(serde_json::Value::Null, time),
            JobSort::FileName => job.file_name.clone().into(),
            JobSort::Status => job.status.to_value().into(),
            JobSort::Progress => job.progress.into(),
            JobSort::SourceSize => job.source_size.into(),
        };
        Cursor { sort, descending, value, id: job.id }
    }

    /// `asc` or `desc`, as the API and the cursor's text spell it.
    fn direction(&self) -> &'static str {
        if self.descending {
            "desc"
        } else {
            "asc"
        }
    }

    /// The listing's order in the API's words, e.g. `fileName asc`.
    pub fn order_name(&self) -> String {
        format!("{} {}", self.sort.name(), self.direction())
    }

    /// The opaque text a client sees: base64url of `[sort, "asc"|"desc", value, id]`.
    pub fn encode(&self) -> String {
        use base64::Engine;
        let text = serde_json::json!([self.sort.name(), self.direction(), self.value, self.id]).to_string();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
    }

    /// Reads a cursor that `encode` made; None for anything else.
    pub fn decode(text: &str) -> Option<Self> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).ok()?;
        let (sort, order, value, id): (String, String, serde_json::Value, i32) = serde_json::from_slice(&bytes).ok()?;
        let sort = JobSort::named(&sort)?;
        let descending = match order.as_str() {
            "desc" => true,
            "asc" => false,
            _ => return None,
        };
        let cursor = Cursor { sort, descending, value, id };
        cursor.bound().ok()?;
        Some(cursor)
    }

    /// The sort value as the database compares it; Ok(None) for a NULL completion time.
    fn bound(&self) -> Result<Option<sea_orm::Value>, ()> {
        let time = |value: &serde_json::Value| {
            value
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|at| Some(sea_orm::Value::from(at.with_timezone(&Utc))))
                .ok_or(())
        };
        match self.sort {
            JobSort::CreatedAt | JobSort::UpdatedAt => time(&self.value),
            JobSort::CompletedAt if self.value.is_null() => Ok(None),
            JobSort::CompletedAt => time(&self.value),
            JobSort::FileName | JobSort::Status => {
                self.value.as_str().map(|t| Some(sea_orm::Value::from(t.to_owned()))).ok_or(())
            }
            JobSort::Progress => self.value.as_f64().map(|n| Some(sea_orm::Value::from(n))).ok_or(()),
            JobSort::SourceSize => self.value.as_i64().map(|n| Some(sea_orm::Value::from(n))).ok_or(()),
        }
    }

    /// The rows after the cursor's, in `(sort column, id)` order (NULL, no completion time,
    /// the smallest value), as consecutive ranges, each a seek into the sort's index: first the
    /// rest of the cursor's own value by id, then the values beyond it (and, descending by
    /// completion, the jobs without one). One row comparison `(column, id) < (value, id)`
    /// would say the same, but SQLite seeks on its first column only and then walks every
    /// row of a tied value: a batch of jobs registered at one instant made such a page walk
    /// 50,000 rows (BENCHMARKS.md, API).
    fn ranges(&self) -> Vec<sea_orm::sea_query::SimpleExpr> {
        let column = self.sort.column();
        let beyond_id = if self.descending { Column::Id.lt(self.id) } else { Column::Id.gt(self.id) };
        let nullable = self.sort == JobSort::CompletedAt;
        match (self.bound(), self.descending) {
            (Ok(Some(value)), descending) => {
                let ties = Expr::col(column).eq(value.clone()).and(beyond_id);
                let beyond = if descending { Expr::col(column).lt(value) } else { Expr::col(column).gt(value) };
                let mut ranges = vec![ties, beyond];
                if nullable && descending {
                    ranges.push(Expr::col(column).is_null());
                }
                ranges
            }
            // `decode` refuses a value that does not fit the sort: Err cannot happen here.
            (Ok(None) | Err(()), true) => vec![Expr::col(column).is_null().and(beyond_id)],
            (Ok(None) | Err(()), false) => {
                vec![Expr::col(column).is_null().and(beyond_id), Expr::col(column).is_not_null()]
            }
        }
    }
}

/// Above this many matching rows, a filtered page in another order than the default walks the
/// sort's index on SQLite (see `filtered`): finding a page there reads about
/// `page size × all rows / matching rows` entries, while the filter's index needs every
/// matching row read and sorted.
const SQLITE_WALK_SORT_INDEX_ABOVE: u64 = 2_000;

/// The listing's filters. `walk_sort_index`: on SQLite, keep the status, library and node
/// conditions from choosing an index (a unary `+` on the column, SQLite's documented way), so
/// that the sort's index is walked instead. Without statistics for a skewed column SQLite
/// takes the filter's index whenever there is one: 100,000 QUEUED jobs sorted by name were
/// all read and sorted for each page of 50, 150 ms a page (BENCHMARKS.md, API). PostgreSQL
/// decides from its statistics.
fn filtered(query: &JobQuery, walk_sort_index: bool) -> Select<Entity> {
    let column = |column: Column| {
        use sea_orm::{EntityName, IdenStatic};
        if walk_sort_index {
            Expr::expr(Expr::cust(format!("+\"{}\".\"{}\"", Entity.table_name(), column.as_str())))
        } else {
            Expr::col(column)
        }
    };
    let mut select = Entity::find();
    if !query.statuses.is_empty() {
        let statuses = query.statuses.iter().map(|s| sea_orm::ActiveEnum::into_value(stored::JobStatus::from(*s)));
        select = select.filter(column(Column::Status).is_in(statuses));
    }
    if let Some(library_id) = query.library_id {
        select = select.filter(column(Column::LibraryId).eq(library_id));
    }
    if let Some(node) = &query.node {
        select = select.filter(column(Column::NodeName).eq(node.as_str()));
    }
    if let Some(q) = query.q.as_deref().filter(|q| !q.is_empty()) {
        let escaped = q.to_lowercase().replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
        select = select.filter(
            Expr::expr(Func::lower(Expr::col(Column::FileName)))
                .like(LikeExpr::new(format!("%{escaped}%")).escape('\\')),
        );
    }
    select
}

/// Whether a page of `query`, whose filters match `matching` rows, walks the sort's index
/// (see `filtered`).
pub fn walks_sort_index(backend: sea_orm::DbBackend, query: &JobQuery, matching: u64) -> bool {
    let filters = !query.statuses.is_empty() || query.library_id.is_some() || query.node.is_some();
    backend == sea_orm::DbBackend::Sqlite
        && filters
        && query.sort != JobSort::CreatedAt
        && matching > SQLITE_WALK_SORT_INDEX_ABOVE
}

/// The statements of one page of jobs, to be read in turn until the page is full: filters,
/// the order, then the page by number (`OFFSET`, one statement) or after a cursor (one per
/// range of `Cursor::ranges`), each limited to one row more than the page (whether another
/// follows). Ordered by the sort column then the id, both in the query's direction; a NULL
/// completion time counts as the smallest value on both backends. Every order and filter is
/// served by an index (migration `m20261126_000020_job_list_indexes`; checked with `EXPLAIN`
/// in tests/it/repo.rs).
pub fn page_selects(query: &JobQuery, walk_sort_index: bool) -> Vec<Select<Entity>> {
    let page_size = query.page_size.clamp(1, MAX_PAGE_SIZE);
    let (order, nulls) = if query.descending {
        (Order::Desc, sea_orm::sea_query::NullOrdering::Last)
    } else {
        (Order::Asc, sea_orm::sea_query::NullOrdering::First)
    };
    let ordered = |select: Select<Entity>| {
        let select = if query.sort == JobSort::CompletedAt {
            select.order_by_with_nulls(Column::CompletedAt, order.clone(), nulls)
        } else {
            select.order_by(query.sort.column(), order.clone())
        };
        select.order_by(Column::Id, order.clone()).limit(page_size + 1)
    };
    match &query.after {
        Some(cursor) => {
            cursor.ranges().into_iter().map(|range| ordered(filtered(query, walk_sort_index).filter(range))).collect()
        }
        None => vec![ordered(filtered(query, walk_sort_index)).offset((query.page.max(1) - 1) * page_size)],
    }
}

/// The columns of a listed job: all but the probe, which no list shows and which, once every
/// file is probed after its scan, is most of a row (about 2 KB of JSON each, read, copied and
/// parsed for every row of every page). The listed rows' `probe` is `None`; `get` reads it.
fn without_probe(select: Select<Entity>) -> Select<Entity> {
    use sea_orm::{IdenStatic, Iterable};
    select
        .select_only()
        .columns(Column::iter().filter(|c| !matches!(c, Column::Probe)))
        .expr_as(Expr::cust("NULL"), Column::Probe.as_str())
}

/// One page of jobs (see `page_selects`) without their probes (`without_probe`), its
/// total, and `next_cursor` when more rows follow.
pub async fn list(db: &impl ConnectionTrait, query: &JobQuery) -> RepoResult<Page<job::Model>> {
    let page = if query.after.is_some() { 1 } else { query.page.max(1) };
    let page_size = query.page_size.clamp(1, MAX_PAGE_SIZE);
    let wanted = usize::try_from(page_size).unwrap_or(usize::MAX);
    // Filtered by status alone (or not at all), the total is the kept counts' sum.
    let by_status_only =
        query.library_id.is_none() && query.node.is_none() && query.q.as_deref().is_none_or(str::is_empty);
    let total = if by_status_only {
        let counts = count_by_status(db).await?;
        let statuses: std::collections::HashSet<JobStatus> = query.statuses.iter().copied().collect();
        counts.iter().filter(|(s, _)| statuses.is_empty() || statuses.contains(s)).map(|(_, n)| n).sum()
    } else {
        filtered(query, false).count(db).await?
    };
    let walk = walks_sort_index(db.get_database_backend(), query, total);
    let mut items = Vec::new();
    for select in page_selects(query, walk) {
        // One row past the page tells whether another follows; a later range reads only the
        // rows still missing.
        let missing = (wanted + 1).saturating_sub(items.len());
        if missing == 0 {
            break;
        }
        items.extend(without_probe(select).limit(u64::try_from(missing).unwrap_or(u64::MAX)).all(db).await?);
    }
    let more = items.len() > wanted;
    items.truncate(wanted);
    let next_cursor = items.last().filter(|_| more).map(|last| Cursor::of(query.sort, query.descending, last).encode());
    Ok(Page { items, total, page, page_size, next_cursor })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cursor reads back as it was made, for every sort; one whose value does not fit its
    /// sort, of an unknown sort or order, or not made by `encode` at all reads as nothing.
    #[test]
    fn cursors_read_back_and_forged_ones_are_refused() {
        use base64::Engine;
        let forged = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        let values = [
            (JobSort::CreatedAt, serde_json::json!("2026-11-26T12:00:00.123456789Z")),
            (JobSort::UpdatedAt, serde_json::json!("2026-11-26T12:00:00Z")),
            (JobSort::CompletedAt, serde_json::json!(null)),
            (JobSort::CompletedAt, serde_json::json!("2026-11-26T12:00:00.5+00:00")),
            (JobSort::FileName, serde_json::json!("Film 01 (2020) \"x\".mkv")),
            (JobSort::Status, serde_json::json!("QUEUED")),
            (JobSort::Progress, serde_json::json!(37.5)),
            (JobSort::SourceSize, serde_json::json!(9_000_000_000_i64)),
        ];
        assert_eq!(values.iter().map(|(sort, _)| *sort).collect::<std::collections::HashSet<_>>().len(), 7);
        for (sort, value) in values {
            for descending in [false, true] {
                let cursor = Cursor { sort, descending, value: value.clone(), id: 42 };
                assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor.clone()));
                assert_eq!(cursor.order(), (sort, descending));
            }
        }
        for text in [
            r#"["createdAt","desc","yesterday",1]"#,
            r#"["createdAt","desc",null,1]"#,
            r#"["progress","asc","12",1]"#,
            r#"["sourceSize","asc",1.5,1]"#,
            r#"["fileName","asc",7,1]"#,
            r#"["size","asc",7,1]"#,
            r#"["fileName","up","a",1]"#,
            r#"["fileName","asc","a","1"]"#,
            r#"["fileName","asc","a"]"#,
        ] {
            assert_eq!(Cursor::decode(&forged(text)), None, "{text}");
        }
        assert_eq!(Cursor::decode("not base64 at all!"), None);
        assert_eq!(Cursor::decode(""), None);
    }
}
