//! GET /jobs/{id}/plan: what an encode of the job's file makes of each of its streams under
//! its library's stream rules (issue 37), before anything changes, or what the last
//! attempt ran with. docs/api.md describes the answer.

use actix_web::web;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::AuthUser;
use crate::domain::stream_rules::StreamRules;
use crate::error::{AppError, ErrorBody};
use crate::http::state::AppState;
use crate::media::info::MediaInfo;
use crate::media::plan::output_extension;
use crate::media::stream_plan::{plan_streams, StreamPlan};
use crate::repo;

/// Which plan the answer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PlanBasis {
    /// The plan the job's latest attempt ran with, as its history recorded it (a COMPLETED
    /// job whose library had stream rules then).
    Ran,
    /// The plan the next attempt would run with, under the library's current rules.
    Current,
}

/// A job's stream plan: every source stream with its fate and the rule that decided it, the
/// streams added, the output's container and video size.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobPlanView {
    pub job_id: i32,
    pub basis: PlanBasis,
    /// The rules the plan comes from (the defaults for a job without a library).
    pub rules: StreamRules,
    #[serde(flatten)]
    pub plan: StreamPlan,
}

/// The stream plan of a job's file
#[utoipa::path(
    get,
    operation_id = "get_job_plan",
    path = "/jobs/{id}/plan",
    tag = "jobs",
    params(("id" = i32, Path, description = "Numeric identifier; anything else is a 404.")),
    responses(
        (status = 200, description = "The plan: the one the latest attempt of a COMPLETED job ran with (basis ran), \
            else the one the next attempt would run with under the library's current rules (basis current)", body = JobPlanView),
        (status = 409, description = "The job's file has not been analysed yet: its streams are not known (code not_analysed)", body = ErrorBody),
    ),
)]
pub async fn get(
    _user: AuthUser,
    state: web::Data<AppState>,
    id: web::Path<i32>,
) -> Result<web::Json<JobPlanView>, AppError> {
    let id = id.into_inner();
    let job = repo::jobs::get(&state.db, id).await?;
    if crate::domain::job::JobStatus::from(job.status) == crate::domain::job::JobStatus::Completed {
        let events = repo::events::list(&state.db, id).await?;
        if let Some((rules, plan)) = recorded(events.iter().filter_map(|e| e.detail.as_ref())) {
            return Ok(web::Json(JobPlanView { job_id: id, basis: PlanBasis::Ran, rules, plan }));
        }
    }
    let info = job.probe.clone().and_then(|p| serde_json::from_value::<MediaInfo>(p).ok()).ok_or_else(|| {
        AppError::conflict(
            "not_analysed",
            format!("job {id} has not been analysed yet: its streams are known once its file is probed"),
        )
    })?;
    let rules = match job.library_id {
        Some(library) => repo::libraries::rules_of(&repo::libraries::get(&state.db, library).await?),
        None => StreamRules::default(),
    };
    let source = repo::jobs::source_path(&job);
    let plan = plan_streams(&info, &rules, output_extension(&source, &job.target_codec));
    Ok(web::Json(JobPlanView { job_id: id, basis: PlanBasis::Current, rules, plan }))
}

/// The latest rules and plan a job's history recorded (`streamRules` and `streamPlan` in an
/// attempt's detail, see `actors::job::prepare`), oldest detail first.
fn recorded<'a>(details: impl DoubleEndedIterator<Item = &'a serde_json::Value>) -> Option<(StreamRules, StreamPlan)> {
    details.rev().find_map(|detail| {
        let rules = serde_json::from_value(detail.get("streamRules")?.clone()).ok()?;
        let plan = serde_json::from_value(detail.get("streamPlan")?.clone()).ok()?;
        Some((rules, plan))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_recorded_plan_is_the_one_that_ran() {
        let plan = |container: &str| StreamPlan {
            streams: Vec::new(),
            container: container.into(),
            video_size: None,
            notes: Vec::new(),
            refused: None,
        };
        let rules = StreamRules { drop_commentary: true, ..StreamRules::default() };
        let with = |p: &StreamPlan| serde_json::json!({"streamRules": rules, "streamPlan": p, "encoder": "libx265"});
        let details =
            [with(&plan("mkv")), serde_json::json!({"outputSize": 3}), with(&plan("mp4")), serde_json::json!({})];
        let (found_rules, found) = recorded(details.iter()).unwrap();
        assert_eq!((found_rules, found.container.as_str()), (rules.clone(), "mp4"));
        assert_eq!(recorded([serde_json::json!({"reason": "x"})].iter()), None);
        // A detail that is not a recorded plan (a malformed one) is passed over.
        let broken = serde_json::json!({"streamRules": rules, "streamPlan": {"container": 3}});
        assert_eq!(recorded([with(&plan("mkv")), broken].iter()).map(|(_, p)| p.container), Some("mkv".into()));
    }
}
