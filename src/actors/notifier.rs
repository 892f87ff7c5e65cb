//! Delivers the notification outbox (`repo::notifications`) on the main node: every
//! `POLL_EVERY` the rows that are due are sent (HTTP or SMTP) one at a time; a row goes once
//! its receiver took it, and a failure leaves it for a later try (`domain::notify::
//! retry_after`), with the error shown on its target. Nothing here blocks the pipeline: a
//! transition only writes rows; a receiver that is down only delays its own messages.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sea_orm::DatabaseConnection;

use crate::domain::connect::{self, Call, Connection, Method, Refresh, Replaced};
use crate::domain::net::OutboundDeny;
use crate::domain::notify::{self, Delivery, HttpRequest, NotifyEvent, Target, TargetKind};
use crate::domain::stats::{self, RunningJob};
use crate::repo;

/// How often the outbox is looked at.
pub const POLL_EVERY: Duration = Duration::from_secs(2);
/// How long one delivery may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(15);
/// Rows taken per look.
const BATCH: u64 = 50;
/// The most of an answer read: a Sonarr's list of series (each with its seasons and
/// images) runs to megabytes in a large library.
pub(super) const LOOKUP_LIMIT: usize = 64 << 20;
/// The most of any other answer read (kept for the error shown).
pub(super) const ANSWER_LIMIT: usize = 64 << 10;

/// How often the library disks are looked at for `disk.at_risk`.
pub const DISK_CHECK_EVERY: Duration = Duration::from_secs(60);

/// Writes `disk.at_risk` when a library path's filesystem goes above the line (see
/// `domain::notify::disks_newly_at_risk`); first at start, then every `DISK_CHECK_EVERY`.
/// Its own task, one look at a time: a mount that hangs stops only this.
pub async fn watch_disks(db: DatabaseConnection) {
    let mut at_risk = std::collections::BTreeSet::new();
    let mut every = tokio::time::interval(DISK_CHECK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let paths: Vec<String> = match repo::libraries::list(&db).await {
            Ok(libraries) => libraries.iter().flat_map(repo::libraries::paths_of).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "libraries unreadable for the disk check");
                continue;
            }
        };
        let used = tokio::task::spawn_blocking(move || {
            paths
                .into_iter()
                .filter_map(|p| crate::host::disk::space(std::path::Path::new(&p)).ok().map(|s| (p, s.used_percent())))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let (newly, now) = notify::disks_newly_at_risk(&at_risk, &used);
        at_risk = now;
        for (path, used_percent) in newly {
            let fields = serde_json::json!({ "disk": { "path": path, "usedPercent": used_percent } });
            if let Err(e) = repo::notifications::enqueue(&db, NotifyEvent::DiskAtRisk, fields).await {
                tracing::warn!(error = %e, "the disk.at_risk notification was not written");
            }
        }
    }
}

/// How often health is judged for `health.changed`.
pub const HEALTH_CHECK_EVERY: Duration = Duration::from_secs(30);

/// This machine's side of the health checks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostReading {
    pub load1: f64,
    pub cores: usize,
    pub memory_percent: f64,
}

impl HostReading {
    /// Read now (blocking: it reads /proc).
    pub fn now() -> HostReading {
        let (used, total) = crate::host::memory();
        HostReading {
            load1: crate::host::load1(),
            cores: crate::host::cores(),
            memory_percent: crate::host::memory_trend::percent(used, total),
        }
    }
}

/// Writes `health.changed` when the overall level of the health panel's checks changes and
/// holds (`domain::notify::HealthWatch`); a look every `HEALTH_CHECK_EVERY`.
pub async fn watch_health(db: DatabaseConnection) {
    let mut watch = notify::HealthWatch::default();
    let mut every = tokio::time::interval(HEALTH_CHECK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Ok(reading) = tokio::task::spawn_blocking(HostReading::now).await else { continue };
        if let Err(e) = look_at_health(&db, &mut watch, reading).await {
            tracing::warn!(error = %e, "the health.changed notification was not written");
        }
    }
}

/// One look: judges the checks from `reading` and the database, as the health panel does,
/// and writes `health.changed` when that is news. Answers whether it wrote it.
pub async fn look_at_health(
    db: &DatabaseConnection,
    watch: &mut notify::HealthWatch,
    reading: HostReading,
) -> Result<bool, repo::RepoError> {
    use crate::domain::health;
    use crate::domain::job::JobStatus;

    let connected = repo::ping(db).await;
    let running = repo::jobs::in_statuses(db, &[JobStatus::Analyzing, JobStatus::Encoding]).await.ok();
    let nodes = repo::nodes::list(db).await.ok();
    let checks = health::checks(&health::Inputs {
        load1: reading.load1,
        cores: reading.cores,
        memory_percent: reading.memory_percent,
        database_connected: connected,
        stuck_jobs: running.map(|running| stats::stuck_count(running.iter().map(RunningJob::from), chrono::Utc::now())),
        nodes: nodes.map(|nodes| nodes.iter().map(|n| (n.role.into(), n.status.into())).collect()),
    });
    let Some((previous, overall)) = watch.look(health::overall(&checks)) else { return Ok(false) };
    tracing::info!(%previous, %overall, "health changed");
    let fields = serde_json::json!({ "health": { "previous": previous, "overall": overall, "checks": checks } });
    repo::notifications::enqueue(db, NotifyEvent::HealthChanged, fields).await?;
    Ok(true)
}

/// A stored target as the domain sends to it; `None` for a kind this build does not know.
pub fn target_of(model: &entities::notification_target::Model) -> Option<Target> {
    Some(Target {
        kind: model.kind.parse::<TargetKind>().ok()?,
        url: model.url.clone(),
        secret: model.secret.clone(),
        headers: repo::notifications::headers_of(model),
    })
}

/// Delivers the outbox for as long as the node runs. The first round tries everything that
/// waits, backoff or not: a restart is often what a user does after fixing a receiver.
pub async fn deliver_forever(db: DatabaseConnection) {
    let sender = Sender::new();
    let mut every = tokio::time::interval(POLL_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut first = true;
    loop {
        every.tick().await;
        let by = chrono::Utc::now() + if first { chrono::Duration::days(36_500) } else { chrono::Duration::zero() };
        first = false;
        if let Err(e) = deliver_due(&db, &sender, by).await {
            tracing::warn!(error = %e, "the notification outbox could not be read");
        }
    }
}

/// Sends every row due by `by`; answers how many were delivered.
pub async fn deliver_due(
    db: &DatabaseConnection,
    sender: &Sender,
    by: chrono::DateTime<chrono::Utc>,
) -> Result<usize, repo::RepoError> {
    let mut delivered = 0;
    for (row, model) in repo::notifications::due(db, by, BATCH).await? {
        let sent = match (target_of(&model), repo::connections::connection_of(&model)) {
            (Some(target), _) => sender.send(&target, &row.body).await,
            (None, Some(connection)) => sender.tell(&connection, &row.body).await,
            (None, None) => Err(format!("unknown kind {:?}", model.kind)),
        };
        match sent {
            Ok(()) => {
                repo::notifications::delivered(db, row.id, row.target_id).await?;
                delivered += 1;
            }
            Err(error) => {
                let attempts = u32::try_from(row.attempts).unwrap_or(0).saturating_add(1);
                let wait =
                    chrono::Duration::from_std(notify::retry_after(attempts)).unwrap_or(chrono::Duration::hours(1));
                tracing::info!(notification_target = %model.name, event = %row.event, attempts, %error, "notification not delivered; it will be tried again");
                repo::notifications::failed(db, &row, &error, chrono::Utc::now() + wait).await?;
            }
        }
    }
    Ok(delivered)
}

/// Sends a test notification to one target at once (not through the outbox) and records the
/// result on it; `Err` says why it did not arrive.
pub async fn send_test(db: &DatabaseConnection, model: &entities::notification_target::Model) -> Result<(), String> {
    let body = notify::envelope(NotifyEvent::Test, chrono::Utc::now(), serde_json::json!({}));
    let sent = match target_of(model) {
        Some(target) => Sender::new().send(&target, &body).await,
        None => Err(format!("unknown kind {:?}", model.kind)),
    };
    let recorded = match &sent {
        Ok(()) => repo::notifications::record_success(db, model.id).await,
        Err(e) => repo::notifications::record_failure(db, model.id, e).await,
    };
    if let Err(e) = recorded {
        tracing::warn!(error = %e, "the test's result was not recorded");
    }
    sent
}

/// Tries a connection at once (`domain::connect::probe`, which changes nothing) and records
/// the result on it; `Err` says why it did not answer.
pub async fn test_connection(
    db: &DatabaseConnection,
    model: &entities::notification_target::Model,
) -> Result<(), String> {
    let tried = match repo::connections::connection_of(model) {
        Some(connection) => Sender::new().call(connect::probe(&connection), ANSWER_LIMIT).await.map(|_| ()),
        None => Err(format!("unknown kind {:?}", model.kind)),
    };
    let recorded = match &tried {
        Ok(()) => repo::notifications::record_success(db, model.id).await,
        Err(e) => repo::notifications::record_failure(db, model.id, e).await,
    };
    if let Err(e) = recorded {
        tracing::warn!(error = %e, "the test's result was not recorded");
    }
    tried
}

/// `OUTBOUND_DENY`, set once at start-up (`serve`); unset, its default.
static OUTBOUND_DENY: OnceLock<OutboundDeny> = OnceLock::new();

/// Sets `OUTBOUND_DENY` for every sender of this process; the first call wins.
pub fn set_outbound_deny(deny: OutboundDeny) {
    if OUTBOUND_DENY.set(deny).is_err() {
        tracing::warn!("OUTBOUND_DENY was already set; the first value stays");
    }
}

fn outbound_deny() -> &'static OutboundDeny {
    OUTBOUND_DENY.get_or_init(OutboundDeny::default)
}

/// What the caller of a test, and a target's last error, may read of a failure: a status
/// code or one of these fixed phrases. Never the receiver's answer (an internal service's
/// error page) nor the system's connection error (refused, unreachable: together a port
/// scanner's readout); the details go to the log only.
mod wording {
    pub const REFUSED_ADDRESS: &str = "the target's address is refused (OUTBOUND_DENY)";
    pub const NO_ADDRESS: &str = "the target's name did not resolve";
    pub const NO_ANSWER: &str = "no answer in time";
    pub const UNREACHABLE: &str = "could not connect to the target";
    pub const UNREADABLE: &str = "the target's answer could not be read";
    pub const MAIL: &str = "the mail server did not take the message";
}

/// Refuses a URL whose host is, or resolves to, an address in `OUTBOUND_DENY`, before any
/// connection. (The connection resolves the name again: a name that changes its address in
/// between is not caught; see docs/security.md.)
async fn check_outbound(url: &str, default_port: u16) -> Result<(), String> {
    let Ok(uri) = url.parse::<awc::http::Uri>() else { return Ok(()) };
    let Some(host) = uri.host() else { return Ok(()) };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
        Some("https") => 443,
        Some("http") => 80,
        _ => default_port,
    });
    let deny = outbound_deny();
    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => match tokio::net::lookup_host((host, port)).await {
            Ok(found) => found.map(|addr| addr.ip()).collect(),
            Err(e) => {
                tracing::debug!(error = %e, "an outbound target's name did not resolve");
                return Err(wording::NO_ADDRESS.into());
            }
        },
    };
    if addresses.iter().any(|ip| deny.refuses(*ip)) {
        return Err(wording::REFUSED_ADDRESS.into());
    }
    Ok(())
}

/// A failed request in fixed words; the error itself is logged.
fn request_failure(error: &awc::error::SendRequestError) -> String {
    use awc::error::{ConnectError, SendRequestError};
    tracing::debug!(%error, "an outbound request failed");
    match error {
        SendRequestError::Timeout | SendRequestError::Connect(ConnectError::Timeout) => wording::NO_ANSWER.into(),
        SendRequestError::Connect(ConnectError::Resolver(_)) => wording::NO_ADDRESS.into(),
        _ => wording::UNREACHABLE.into(),
    }
}

/// Makes HTTP requests (rustls, Mozilla's roots) and SMTP sessions.
pub struct Sender {
    client: awc::Client,
}

impl Default for Sender {
    fn default() -> Self {
        Self::new()
    }
}

impl Sender {
    pub fn new() -> Sender {
        let builder = awc::Client::builder().timeout(SEND_TIMEOUT).disable_redirects();
        let client = match tls_config() {
            Ok(config) => builder.connector(awc::Connector::new().rustls_0_23(Arc::new(config))).finish(),
            Err(e) => {
                tracing::warn!(error = %e, "no TLS for notifications; https targets will fail");
                builder.finish()
            }
        };
        Sender { client }
    }

    /// Sends the event whose envelope is `body` to `target`.
    pub async fn send(&self, target: &Target, body: &serde_json::Value) -> Result<(), String> {
        match notify::request(target, body).map_err(|e| e.to_string())? {
            Delivery::Http(request) => self.post(request).await,
            Delivery::Email { server, from, to, subject, text } => {
                check_outbound(&server, 25).await?;
                send_mail(&server, &from, &to, &subject, text).await.map_err(|e| {
                    tracing::debug!(error = %e, "a mail was not taken");
                    wording::MAIL.to_string()
                })
            }
        }
    }

    async fn post(&self, request: HttpRequest) -> Result<(), String> {
        let HttpRequest { url, headers, body } = request;
        self.call(Call { method: Method::Post, url, headers, body }, ANSWER_LIMIT).await.map(|_| ())
    }

    /// Tells a connection of the replaced file in the envelope `body`: the lookup its kind
    /// needs, then the refresh (`domain::connect`).
    pub async fn tell(&self, connection: &Connection, body: &serde_json::Value) -> Result<(), String> {
        let file: Replaced = body
            .get("file")
            .cloned()
            .and_then(|f| serde_json::from_value(f).ok())
            .ok_or_else(|| "the message names no file".to_string())?;
        let looked_up = match connect::lookup(connection) {
            Some(call) => Some(self.call(call, LOOKUP_LIMIT).await?),
            None => None,
        };
        match connect::refresh(connection, &file, looked_up.as_deref()).map_err(|e| e.to_string())? {
            Refresh::Calls(calls) => {
                for call in calls {
                    self.call(call, ANSWER_LIMIT).await?;
                }
            }
            Refresh::NotHeld(why) => {
                tracing::info!(kind = %connection.kind, %why, "nothing to refresh for a replaced file");
            }
        }
        Ok(())
    }

    /// Makes one call; answers the body of a 2xx answer (at most `limit` bytes;
    /// `LOOKUP_LIMIT` for a call whose answer is needed), else an error with the status
    /// alone, or a fixed phrase (`wording`).
    pub(super) async fn call(&self, call: Call, limit: usize) -> Result<Vec<u8>, String> {
        check_outbound(&call.url, 80).await?;
        let mut request = match call.method {
            Method::Get => self.client.get(&call.url),
            Method::Post => self.client.post(&call.url),
            Method::Delete => self.client.delete(&call.url),
        };
        for (name, value) in &call.headers {
            request = request.insert_header((name.as_str(), value.as_str()));
        }
        // The URL is not in the error: a Discord webhook's holds its token, a Plex URL may.
        let sent = match call.method {
            Method::Get | Method::Delete => request.send().await,
            Method::Post => request.send_body(call.body).await,
        };
        let mut response = sent.map_err(|e| request_failure(&e))?;
        let status = response.status();
        if status.is_success() {
            // Read what was answered: a lookup needs it (an answer it cannot read is a
            // failure), and the connection can be reused. For anything else the receiver
            // took the message, whatever the answer.
            return match response.body().limit(limit).await {
                Ok(answer) => Ok(answer.to_vec()),
                Err(e) if limit == LOOKUP_LIMIT => {
                    tracing::debug!(error = %e, "a lookup's answer could not be read");
                    Err(wording::UNREADABLE.into())
                }
                Err(_) => Ok(Vec::new()),
            };
        }
        // The answer's body is read (so the connection can be reused) and dropped: it is the
        // receiver's to show, not the caller's to read.
        let _ = response.body().limit(ANSWER_LIMIT).await;
        Err(format!("answered {status}"))
    }
}

pub(crate) fn tls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

async fn send_mail(server: &str, from: &str, to: &[String], subject: &str, text: String) -> Result<(), String> {
    use lettre::message::header::ContentType;
    use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

    let mut message = Message::builder()
        .from(from.parse().map_err(|e| format!("from {from:?}: {e}"))?)
        .subject(subject)
        .header(ContentType::TEXT_PLAIN);
    for address in to {
        message = message.to(address.parse().map_err(|e| format!("to {address:?}: {e}"))?);
    }
    let message = message.body(text).map_err(|e| e.to_string())?;
    let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(server)
        .map_err(|e| format!("the SMTP URL: {e}"))?
        .timeout(Some(SEND_TIMEOUT))
        .build();
    transport.send(message).await.map(|_| ()).map_err(|e| format!("SMTP: {e}"))
}
