//! GET /metrics: Prometheus text exposition format 0.0.4, written by hand.

use std::collections::HashMap;
use std::fmt::Write;

use actix_web::{web, HttpResponse};

use super::auth::AuthUser;
use crate::domain::job::JobStatus;
use crate::domain::node::NodeStatus;
use crate::error::AppError;
use crate::http::state::AppState;
use crate::repo;

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Prometheus metrics
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "statistics",
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4: condense_jobs{status}, condense_encode_fps, condense_bytes_saved_total, condense_node_status{node,status}, condense_build_info{version}", content_type = "text/plain", body = String),
    ),
)]
pub async fn metrics(_user: AuthUser, state: web::Data<AppState>) -> Result<HttpResponse, AppError> {
    let jobs = repo::jobs::count_by_status(&state.db).await?;
    let encoding = repo::jobs::in_statuses(&state.db, &[JobStatus::Encoding]).await?;
    let bytes_saved = repo::stats::saved_bytes_total(&state.db).await?;
    let nodes = repo::nodes::list(&state.db).await?;
    let text = render(&Metrics {
        jobs,
        encode_fps: encoding.iter().map(|job| job.fps).sum(),
        bytes_saved,
        nodes: nodes.into_iter().map(|node| (node.name, NodeStatus::from(node.status).to_string())).collect(),
        version: env!("CARGO_PKG_VERSION"),
    });
    Ok(HttpResponse::Ok().content_type(CONTENT_TYPE).body(text))
}

pub struct Metrics {
    pub jobs: HashMap<JobStatus, u64>,
    /// Sum of the speeds of the ENCODING jobs.
    pub encode_fps: f64,
    pub bytes_saved: i64,
    /// (name, status) of each node.
    pub nodes: Vec<(String, String)>,
    pub version: &'static str,
}

/// A label value with backslash, double quote and line feed escaped, as the format wants.
fn label(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

/// Writing to a String cannot fail, so `writeln!`'s results are ignored.
pub fn render(metrics: &Metrics) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# HELP condense_jobs Jobs in each status.");
    let _ = writeln!(out, "# TYPE condense_jobs gauge");
    for status in JobStatus::ALL {
        let n = metrics.jobs.get(status).copied().unwrap_or(0);
        let _ = writeln!(out, "condense_jobs{{status=\"{status}\"}} {n}");
    }
    let _ =
        writeln!(out, "# HELP condense_encode_fps Frames per second encoded right now, all ENCODING jobs together.");
    let _ = writeln!(out, "# TYPE condense_encode_fps gauge");
    let _ = writeln!(out, "condense_encode_fps {}", metrics.encode_fps);
    let _ = writeln!(out, "# HELP condense_bytes_saved_total Bytes saved by completed jobs.");
    let _ = writeln!(out, "# TYPE condense_bytes_saved_total counter");
    let _ = writeln!(out, "condense_bytes_saved_total {}", metrics.bytes_saved);
    let _ = writeln!(out, "# HELP condense_node_status 1 for the status each node is in, 0 for the others.");
    let _ = writeln!(out, "# TYPE condense_node_status gauge");
    for (node, current) in &metrics.nodes {
        for status in NodeStatus::ALL {
            let value = u8::from(status.as_str() == current);
            let _ = writeln!(out, "condense_node_status{{node=\"{}\",status=\"{status}\"}} {value}", label(node));
        }
    }
    let _ = writeln!(out, "# HELP condense_build_info The running version of condense.");
    let _ = writeln!(out, "# TYPE condense_build_info gauge");
    let _ = writeln!(out, "condense_build_info{{version=\"{}\"}} 1", label(metrics.version));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_status_and_escapes_labels() {
        let text = render(&Metrics {
            jobs: [(JobStatus::Queued, 3), (JobStatus::Completed, 2)].into(),
            encode_fps: 42.5,
            bytes_saved: 1234,
            nodes: vec![("main".into(), "ONLINE".into()), ("we\"ird\\node\n".into(), "OFFLINE".into())],
            version: "1.2.3",
        });
        let lines: Vec<&str> = text.lines().filter(|line| !line.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "condense_jobs{status=\"PENDING\"} 0",
                "condense_jobs{status=\"QUEUED\"} 3",
                "condense_jobs{status=\"ANALYZING\"} 0",
                "condense_jobs{status=\"ENCODING\"} 0",
                "condense_jobs{status=\"PAUSED\"} 0",
                "condense_jobs{status=\"COMPLETED\"} 2",
                "condense_jobs{status=\"SKIPPED\"} 0",
                "condense_jobs{status=\"FAILED\"} 0",
                "condense_jobs{status=\"CANCELLED\"} 0",
                "condense_encode_fps 42.5",
                "condense_bytes_saved_total 1234",
                "condense_node_status{node=\"main\",status=\"ONLINE\"} 1",
                "condense_node_status{node=\"main\",status=\"OFFLINE\"} 0",
                "condense_node_status{node=\"main\",status=\"DEGRADED\"} 0",
                r#"condense_node_status{node="we\"ird\\node\n",status="ONLINE"} 0"#,
                r#"condense_node_status{node="we\"ird\\node\n",status="OFFLINE"} 1"#,
                r#"condense_node_status{node="we\"ird\\node\n",status="DEGRADED"} 0"#,
                "condense_build_info{version=\"1.2.3\"} 1",
            ]
        );
        assert!(text.contains("# TYPE condense_bytes_saved_total counter\n"));
        assert!(text.ends_with('\n'));
    }
}
