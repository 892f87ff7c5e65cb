//! Encoding windows (`domain::schedule`), as settings: the default under `schedule`, a
//! node's own under `schedule.node.<id>`. A node without one follows the default; without a
//! default, every node may always encode.

use std::collections::HashMap;

use sea_orm::ConnectionTrait;

use super::settings;
use super::RepoResult;
use crate::domain::schedule::Schedule;

const DEFAULT_KEY: &str = "schedule";

fn node_key(node_id: i32) -> String {
    format!("schedule.node.{node_id}")
}

/// The default schedule (always open when none was set).
pub async fn default(db: &impl ConnectionTrait) -> RepoResult<Schedule> {
    Ok(settings::get_checked(db, DEFAULT_KEY).await?.unwrap_or_default())
}

pub async fn set_default(db: &impl ConnectionTrait, schedule: &Schedule) -> RepoResult<()> {
    settings::set(db, DEFAULT_KEY, schedule).await
}

/// A node's own schedule, if it has one.
pub async fn own(db: &impl ConnectionTrait, node_id: i32) -> RepoResult<Option<Schedule>> {
    settings::get_checked(db, &node_key(node_id)).await
}

/// Gives a node a schedule of its own, or (`None`) makes it follow the default again.
pub async fn set_own(db: &impl ConnectionTrait, node_id: i32, schedule: Option<&Schedule>) -> RepoResult<()> {
    match schedule {
        Some(schedule) => settings::set(db, &node_key(node_id), schedule).await,
        None => settings::remove(db, &node_key(node_id)).await,
    }
}

/// The schedule a node follows, and whether that is the default (it has none of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InForce {
    pub schedule: Schedule,
    pub follows_default: bool,
}

/// The schedule each of these nodes follows: its own, or the default.
pub async fn in_force(db: &impl ConnectionTrait, node_ids: &[i32]) -> RepoResult<HashMap<i32, InForce>> {
    let fallback = default(db).await?;
    let mut found = HashMap::with_capacity(node_ids.len());
    for &id in node_ids {
        let in_force = match own(db, id).await? {
            Some(schedule) => InForce { schedule, follows_default: false },
            None => InForce { schedule: fallback.clone(), follows_default: true },
        };
        found.insert(id, in_force);
    }
    Ok(found)
}
