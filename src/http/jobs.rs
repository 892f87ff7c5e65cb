//! Jobs, read side: a filtered, sorted, paginated listing, and one job with its history.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::IntoParams;

use super::auth::AuthUser;
use super::views::{JobDetailView, JobEventView, JobView, SegmentView};
use crate::domain::job::JobStatus;
use crate::domain::paging::MAX_PAGE;
use crate::error::AppError;
use crate::http::coalesce;
use crate::http::state::AppState;
use crate::repo;
use crate::repo::jobs::{Cursor, JobQuery, JobSort, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::repo::Page;

/// GET /jobs query parameters. Unknown parameters are ignored (the WebSocket-style `token`
/// among them); a known one with a bad value is a 400.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct JobsQuery {
    /// 1 to 1,000,000 (deeper pages: `after`).
    #[param(minimum = 1, maximum = 1000000)]
    pub page: Option<u64>,
    /// Larger values are served as the largest page size.
    #[param(schema_with = page_size)]
    pub page_size: Option<u64>,
    /// Comma-separated statuses, e.g. `QUEUED,ENCODING`, in any case.
    #[param(schema_with = status_list)]
    pub status: Option<String>,
    pub library_id: Option<i32>,
    /// Name of the node processing the job.
    pub node: Option<String>,
    /// Case-insensitive substring of the file name.
    pub q: Option<String>,
    /// A field to sort by, e.g. `createdAt` or `fileName`, in any case.
    #[param(schema_with = sort_name)]
    pub sort: Option<String>,
    /// `asc` or `desc` (the default), in any case.
    #[param(schema_with = order_name)]
    pub order: Option<String>,
    /// A keyset page: the jobs after this cursor, a page's `nextCursor` given back with the
    /// same sort and order (filters may differ). Read from an index however deep (a `page`
    /// number makes the database walk every row before it); not with a `page` above 1.
    pub after: Option<String>,
}

fn page_size() -> utoipa::openapi::schema::Object {
    super::schema::page_size(DEFAULT_PAGE_SIZE)
}

fn status_list() -> utoipa::openapi::schema::Object {
    let names: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
    super::schema::described(
        super::schema::any_case_list_of(&names),
        "Comma-separated statuses, e.g. `QUEUED,ENCODING`, in any case.",
    )
}

fn sort_name() -> utoipa::openapi::schema::Object {
    let names: Vec<&str> = JobSort::NAMES.iter().map(|(name, _)| *name).collect();
    super::schema::described(
        super::schema::any_case_one_of(&names),
        "A field to sort by, e.g. `createdAt` or `fileName`, in any case.",
    )
}

fn order_name() -> utoipa::openapi::schema::Object {
    super::schema::described(
        super::schema::any_case_one_of(&["asc", "desc"]),
        "`asc` or `desc` (the default), in any case.",
    )
}

impl JobsQuery {
    pub fn into_repo_query(self) -> Result<JobQuery, AppError> {
        let invalid = |message: String| AppError::BadRequest { code: "invalid_query", message };
        let page = match self.page {
            Some(page) if page == 0 || page > MAX_PAGE => return Err(invalid(format!("page must be 1 to {MAX_PAGE}"))),
            Some(page) => page,
            None => 1,
        };
        let page_size = match self.page_size {
            Some(0) => return Err(invalid(format!("pageSize must be 1 to {MAX_PAGE_SIZE}"))),
            // Larger pages are served at the largest size rather than refused.
            Some(size) => size.min(MAX_PAGE_SIZE),
            None => DEFAULT_PAGE_SIZE,
        };
        let statuses = self
            .status
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<JobStatus>().map_err(|_| {
                    let known: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
                    invalid(format!("status {s:?} is not one of {}", known.join(", ")))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sort = match self.sort.as_deref() {
            None => JobSort::default(),
            Some(name) => JobSort::named(name).ok_or_else(|| {
                let known: Vec<&str> = JobSort::NAMES.iter().map(|(n, _)| *n).collect();
                invalid(format!("sort {name:?} is not one of {}", known.join(", ")))
            })?,
        };
        let descending = match self.order.as_deref() {
            None => true,
            Some(order) if order.eq_ignore_ascii_case("desc") => true,
            Some(order) if order.eq_ignore_ascii_case("asc") => false,
            Some(order) => return Err(invalid(format!("order must be asc or desc, not {order:?}"))),
        };
        let after = match self.after.as_deref().filter(|a| !a.is_empty()) {
            None => None,
            Some(_) if page > 1 => return Err(invalid("after and a page above 1 cannot be combined".into())),
            Some(text) => {
                let cursor = Cursor::decode(text)
                    .ok_or_else(|| invalid("after is not a cursor this server gave (nextCursor)".into()))?;
                if cursor.order() != (sort, descending) {
                    return Err(invalid(format!(
                        "after is a cursor of another order ({}): give the sort and order it was made with",
                        cursor.order_name()
                    )));
                }
                Some(cursor)
            }
        };
        Ok(JobQuery {
            statuses,
            library_id: self.library_id,
            node: self.node.filter(|n| !n.is_empty()),
            q: self.q.filter(|q| !q.is_empty()),
            sort,
            descending,
            page,
            page_size,
            after,
        })
    }
}

/// Jobs, filtered, sorted and paginated
#[utoipa::path(
    get,
    operation_id = "list_jobs",
    path = "/jobs",
    tag = "jobs",
    params(JobsQuery),
    responses(
        (status = 200, description = "One page of jobs", body = Page<JobView>),
    ),
)]
pub async fn list(
    _user: AuthUser,
    state: web::Data<AppState>,
    request: HttpRequest,
    query: web::Query<JobsQuery>,
) -> Result<HttpResponse, AppError> {
    let query = query.into_inner().into_repo_query()?;
    // The raw query string decides the page: requests that wait with the same one share it.
    let key = request.query_string().to_owned();
    let db = state.db.clone();
    let transfers = state.runtime.lifecycle.transfers.clone();
    coalesce::shared_json(&state.reads.job_pages, key, move || {
        let (db, query, transfers) = (db.clone(), query.clone(), transfers.clone());
        async move { Ok(repo::jobs::list(&db, &query).await?.map(|job| JobView::live(job, &transfers))) }
    })
    .await
}

/// One job with its history
#[utoipa::path(
    get,
    operation_id = "get_job",
    path = "/jobs/{id}",
    tag = "jobs",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 200, description = "The job and its events, oldest first", body = JobDetailView),
    ),
)]
pub async fn get(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<JobDetailView>, AppError> {
    let id = id.into_inner();
    let job = repo::jobs::get(&state.db, id).await?;
    let events = repo::events::list(&state.db, id).await?;
    let segments = repo::segments::of_job(&state.db, id).await?;
    Ok(web::Json(JobDetailView {
        job: JobView::live(&job, &state.runtime.lifecycle.transfers),
        events: events.iter().map(JobEventView::from).collect(),
        segments: segments.iter().map(SegmentView::from).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        let query = JobsQuery::default().into_repo_query().unwrap();
        assert_eq!((query.page, query.page_size, query.descending), (1, DEFAULT_PAGE_SIZE, true));
        let big = JobsQuery { page_size: Some(10_000), ..Default::default() }.into_repo_query().unwrap();
        assert_eq!(big.page_size, MAX_PAGE_SIZE);
        assert!(JobsQuery { page: Some(0), ..Default::default() }.into_repo_query().is_err());
        assert!(JobsQuery { page: Some(u64::MAX), ..Default::default() }.into_repo_query().is_err());
        assert!(JobsQuery { page: Some(MAX_PAGE), ..Default::default() }.into_repo_query().is_ok());
        assert!(JobsQuery { page_size: Some(0), ..Default::default() }.into_repo_query().is_err());
    }

    #[test]
    fn statuses_sort_and_order_are_parsed() {
        let query = JobsQuery {
            status: Some("queued, ENCODING,".into()),
            sort: Some("fileName".into()),
            order: Some("asc".into()),
            ..Default::default()
        }
        .into_repo_query()
        .unwrap();
        assert_eq!(query.statuses, [JobStatus::Queued, JobStatus::Encoding]);
        assert_eq!((query.sort, query.descending), (JobSort::FileName, false));
        for bad in [
            JobsQuery { status: Some("QUEUED,BOGUS".into()), ..Default::default() },
            JobsQuery { sort: Some("size".into()), ..Default::default() },
            JobsQuery { order: Some("up".into()), ..Default::default() },
        ] {
            assert_eq!(bad.into_repo_query().unwrap_err().code(), "invalid_query");
        }
    }
}
