//! Notifications: which events there are, what each kind of target is sent for one, and when
//! a failed delivery is tried again. Pure: `actors::notifier` sends what `request` builds,
//! from rows of the outbox (`repo::notifications`). docs/ARCHITECTURE.md has the flow.
//!
//! What each kind is sent follows the receiving product's documented API:
//! - `webhook`: the event as JSON, `X-Condense-Signature: sha256=<hex HMAC-SHA256 of the body>`
//!   with the target's secret, and the target's own headers;
//! - `discord`: a Discord webhook execution, `{"username","content"}` (at most 2,000
//!   characters of content);
//! - `ntfy`: a publish to the topic URL, the text as the body, `Title`, `Tags` and
//!   `Priority` headers, the secret as a bearer access token;
//! - `gotify`: `POST <server>/message` with `X-Gotify-Key: <application token>` (the
//!   secret) and `{"title","message","priority"}`;
//! - `apprise`: an Apprise API notify URL (`/notify/<key>` or `/notify`) with
//!   `{"title","body","type"}`;
//! - `email`: a mail over SMTP (`smtp://` with STARTTLS when offered, `smtps://`), sent by
//!   the notifier, from and to given in the URL's query.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::named_enum;

named_enum! {
    /// What happened (`test`: the "send test" action of one target; `file.replaced`: what
    /// connections are told, `domain::connect`).
    NotifyEvent, "notification event" {
        JobCompleted => "job.completed",
        JobFailed => "job.failed",
        QueueDrained => "queue.drained",
        NodeOffline => "node.offline",
        NodeOnline => "node.online",
        HealthChanged => "health.changed",
        DiskAtRisk => "disk.at_risk",
        Test => "test",
        FileReplaced => "file.replaced",
        FileDamaged => "file.damaged",
    }
}

named_enum! {
    /// Where a notification goes.
    TargetKind, "notification kind" {
        Webhook => "webhook",
        Discord => "discord",
        Ntfy => "ntfy",
        Gotify => "gotify",
        Apprise => "apprise",
        Email => "email",
    }
}

/// The events a user may subscribe a target to (the test is sent on request only).
pub const SUBSCRIBABLE: &[NotifyEvent] = &[
    NotifyEvent::JobCompleted,
    NotifyEvent::JobFailed,
    NotifyEvent::QueueDrained,
    NotifyEvent::NodeOffline,
    NotifyEvent::NodeOnline,
    NotifyEvent::HealthChanged,
    NotifyEvent::DiskAtRisk,
    NotifyEvent::FileDamaged,
];

/// The signature header of the generic webhook.
pub const SIGNATURE_HEADER: &str = "X-Condense-Signature";

/// How bad the news is, for the receivers that show it (ntfy's priority and tags, Gotify's
/// priority, Apprise's type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Success,
    Warning,
    Failure,
}

/// What a person reads: a title and a line or two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub title: String,
    pub text: String,
    pub level: Level,
}

/// One HTTP request to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What to send to one target for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A POST.
    Http(HttpRequest),
    /// A mail: the SMTP server URL (without from and to), sender, recipients, subject, text.
    Email { server: String, from: String, to: Vec<String>, subject: String, text: String },
}

/// A target as the notifier needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: TargetKind,
    pub url: String,
    pub secret: Option<String>,
    /// Extra headers (the generic webhook's; ntfy and Gotify take them too).
    pub headers: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    #[error("{0}")]
    Invalid(String),
}

fn invalid(message: impl Into<String>) -> NotifyError {
    NotifyError::Invalid(message.into())
}

/// The body of an event as stored in the outbox and sent to webhooks:
/// `{"event","at", …the event's own fields}`.
pub fn envelope(event: NotifyEvent, at: chrono::DateTime<chrono::Utc>, fields: serde_json::Value) -> serde_json::Value {
    let mut body = serde_json::json!({ "event": event.as_str(), "at": at.to_rfc3339() });
    if let (Some(obj), serde_json::Value::Object(more)) = (body.as_object_mut(), fields) {
        for (k, v) in more {
            obj.entry(k).or_insert(v);
        }
    }
    body
}

fn str_at<'a>(v: &'a serde_json::Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k)).and_then(serde_json::Value::as_str)
}

fn i64_at(v: &serde_json::Value, path: &[&str]) -> Option<i64> {
    path.iter().try_fold(v, |v, k| v.get(k)).and_then(serde_json::Value::as_i64)
}

/// Bytes as people read them: 1.5 GB, 700 MB, 12 KB.
pub fn human_bytes(bytes: i64) -> String {
    let b = bytes.unsigned_abs() as f64;
    let sign = if bytes < 0 { "-" } else { "" };
    let (value, unit) = if b >= 1e12 {
        (b / 1e12, "TB")
    } else if b >= 1e9 {
        (b / 1e9, "GB")
    } else if b >= 1e6 {
        (b / 1e6, "MB")
    } else if b >= 1e3 {
        (b / 1e3, "KB")
    } else {
        return format!("{bytes} B");
    };
    format!("{sign}{value:.1} {unit}")
}

/// The words for an event, from its envelope.
pub fn message(body: &serde_json::Value) -> Message {
    let event = str_at(body, &["event"]).and_then(|e| e.parse::<NotifyEvent>().ok());
    let file = str_at(body, &["job", "fileName"]).unwrap_or("a file");
    let node = str_at(body, &["node", "name"]).unwrap_or("a node");
    match event {
        Some(NotifyEvent::JobCompleted) => {
            let saved = i64_at(body, &["job", "bytesSaved"]).unwrap_or(0);
            let text = match (i64_at(body, &["job", "originalSize"]), i64_at(body, &["job", "outputSize"])) {
                (Some(before), Some(after)) if before > 0 => format!(
                    "{file}: {} saved ({} to {}, {:.0} % smaller)",
                    human_bytes(saved),
                    human_bytes(before),
                    human_bytes(after),
                    saved as f64 * 100.0 / before as f64
                ),
                _ => format!("{file}: {} saved", human_bytes(saved)),
            };
            Message { title: "condense: job completed".into(), text, level: Level::Success }
        }
        Some(NotifyEvent::JobFailed) => {
            let reason = str_at(body, &["job", "failureReason"]).unwrap_or("unknown reason");
            let detail = str_at(body, &["job", "failureDetail"]).map(|d| format!(" ({d})")).unwrap_or_default();
            Message {
                title: "condense: job failed".into(),
                text: format!("{file}: {reason}{detail}; the original is unchanged"),
                level: Level::Failure,
            }
        }
        Some(NotifyEvent::QueueDrained) => Message {
            title: "condense: queue drained".into(),
            text: "Every queued job has ended.".into(),
            level: Level::Info,
        },
        Some(NotifyEvent::NodeOffline) => {
            let reason = str_at(body, &["node", "reason"]).map(|r| format!(": {r}")).unwrap_or_default();
            Message {
                title: "condense: node offline".into(),
                text: format!("{node} went offline{reason}"),
                level: Level::Warning,
            }
        }
        Some(NotifyEvent::NodeOnline) => {
            Message { title: "condense: node online".into(), text: format!("{node} is online"), level: Level::Info }
        }
        Some(NotifyEvent::DiskAtRisk) => {
            let path = str_at(body, &["disk", "path"]).unwrap_or("a library disk");
            let used = body.get("disk").and_then(|d| d.get("usedPercent")).and_then(serde_json::Value::as_f64);
            let used = used.map_or_else(|| " is nearly full".to_string(), |u| format!(" is {u:.0} % full"));
            Message {
                title: "condense: library disk nearly full".into(),
                text: format!("{path}{used}; encodes there may fail for lack of space"),
                level: Level::Warning,
            }
        }
        Some(NotifyEvent::HealthChanged) => {
            let level = |key: &str| str_at(body, &["health", key]).unwrap_or("UNKNOWN").to_ascii_lowercase();
            let (from, to) = (level("previous"), level("overall"));
            let failing: Vec<&str> = body
                .pointer("/health/checks")
                .and_then(serde_json::Value::as_array)
                .map(|checks| {
                    checks
                        .iter()
                        .filter(|c| c.get("level").and_then(serde_json::Value::as_str) != Some("HEALTHY"))
                        .filter_map(|c| c.get("message").and_then(serde_json::Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            let why = if failing.is_empty() { String::new() } else { format!(": {}", failing.join("; ")) };
            let level = match to.as_str() {
                "healthy" => Level::Success,
                "critical" => Level::Failure,
                _ => Level::Warning,
            };
            Message {
                title: format!("condense: health {to}"),
                text: format!("Health went from {from} to {to}{why}"),
                level,
            }
        }
        Some(NotifyEvent::FileReplaced) => {
            let path = str_at(body, &["file", "path"]).unwrap_or("a file");
            Message {
                title: "condense: file replaced".into(),
                text: format!("{path} was replaced"),
                level: Level::Info,
            }
        }
        Some(NotifyEvent::FileDamaged) => {
            let path = str_at(body, &["file", "path"]).unwrap_or("a file");
            let verdict = str_at(body, &["file", "verdict"]).unwrap_or("damaged");
            let why = str_at(body, &["file", "message"]).map(|m| format!(": {m}")).unwrap_or_default();
            let at = body
                .pointer("/file/firstErrorSeconds")
                .and_then(serde_json::Value::as_f64)
                .map(|s| format!(" (at {s:.1} s)"))
                .unwrap_or_default();
            let regrab = match str_at(body, &["file", "regrab"]) {
                Some(r) => format!("; new copy: {r}"),
                None => String::new(),
            };
            Message {
                title: "condense: damaged file".into(),
                text: format!("{path} is {verdict}{why}{at}; it is not encoded until it changes{regrab}"),
                level: Level::Warning,
            }
        }
        Some(NotifyEvent::Test) => Message {
            title: "condense: test".into(),
            text: "A test notification from condense.".into(),
            level: Level::Info,
        },
        None => Message { title: "condense".into(), text: body.to_string(), level: Level::Info },
    }
}

/// `sha256=<hex>` of the body with the secret, as the webhook's signature header.
pub fn signature(secret: &str, body: &[u8]) -> String {
    // An HMAC takes a key of any length: this cannot fail.
    let mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).map(|mut mac| {
        mac.update(body);
        mac.finalize().into_bytes()
    });
    match mac {
        Ok(bytes) => format!("sha256={}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        Err(_) => String::new(),
    }
}

fn json_body(value: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

fn content_json() -> (String, String) {
    ("Content-Type".into(), "application/json".into())
}

/// Cuts `text` to at most `max` characters (Discord refuses longer content).
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// What to send `target` for the event whose envelope is `body`.
pub fn request(target: &Target, body: &serde_json::Value) -> Result<Delivery, NotifyError> {
    let msg = message(body);
    let with_extra = |mut headers: Vec<(String, String)>| {
        headers.extend(target.headers.iter().cloned());
        headers
    };
    Ok(match target.kind {
        TargetKind::Webhook => {
            let bytes = json_body(body);
            let mut headers = vec![content_json()];
            if let Some(secret) = target.secret.as_deref().filter(|s| !s.is_empty()) {
                headers.push((SIGNATURE_HEADER.into(), signature(secret, &bytes)));
            }
            Delivery::Http(HttpRequest { url: target.url.clone(), headers: with_extra(headers), body: bytes })
        }
        TargetKind::Discord => {
            let content = clip(&format!("**{}**\n{}", msg.title, msg.text), 2000);
            let payload = serde_json::json!({ "username": "condense", "content": content });
            Delivery::Http(HttpRequest {
                url: target.url.clone(),
                headers: vec![content_json()],
                body: json_body(&payload),
            })
        }
        TargetKind::Ntfy => {
            let (priority, tags) = match msg.level {
                Level::Info => ("default", "information_source"),
                Level::Success => ("default", "white_check_mark"),
                Level::Warning => ("high", "warning"),
                Level::Failure => ("high", "x"),
            };
            let mut headers = vec![
                ("Title".to_string(), msg.title.clone()),
                ("Tags".to_string(), tags.to_string()),
                ("Priority".to_string(), priority.to_string()),
            ];
            if let Some(token) = target.secret.as_deref().filter(|s| !s.is_empty()) {
                headers.push(("Authorization".into(), format!("Bearer {token}")));
            }
            Delivery::Http(HttpRequest {
                url: target.url.clone(),
                headers: with_extra(headers),
                body: msg.text.into_bytes(),
            })
        }
        TargetKind::Gotify => {
            let token = target
                .secret
                .as_deref()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| invalid("a Gotify target needs its application token as the secret"))?;
            let priority = match msg.level {
                Level::Info | Level::Success => 5,
                Level::Warning => 7,
                Level::Failure => 8,
            };
            let payload = serde_json::json!({ "title": msg.title, "message": msg.text, "priority": priority });
            let url = format!("{}/message", target.url.trim_end_matches('/'));
            let headers = with_extra(vec![content_json(), ("X-Gotify-Key".into(), token.to_string())]);
            Delivery::Http(HttpRequest { url, headers, body: json_body(&payload) })
        }
        TargetKind::Apprise => {
            let kind = match msg.level {
                Level::Info => "info",
                Level::Success => "success",
                Level::Warning => "warning",
                Level::Failure => "failure",
            };
            let payload = serde_json::json!({ "title": msg.title, "body": msg.text, "type": kind });
            Delivery::Http(HttpRequest {
                url: target.url.clone(),
                headers: with_extra(vec![content_json()]),
                body: json_body(&payload),
            })
        }
        TargetKind::Email => {
            let (server, from, to) = email_parts(&target.url, target.secret.as_deref())?;
            Delivery::Email { server, from, to, subject: msg.title, text: msg.text }
        }
    })
}

/// Splits an e-mail target's URL, `smtp[s]://[user[:password]@]host[:port]?from=…&to=…[&to=…]`,
/// into the server URL the SMTP client takes, the sender and the recipients. A secret is the
/// password where the URL has none.
pub fn email_parts(url: &str, secret: Option<&str>) -> Result<(String, String, Vec<String>), NotifyError> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    if !(base.starts_with("smtp://") || base.starts_with("smtps://")) {
        return Err(invalid("an e-mail target's URL starts with smtp:// or smtps://"));
    }
    let (mut from, mut to, mut keep) = (None, Vec::new(), Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value);
        match key {
            "from" => from = Some(value),
            "to" => to.extend(value.split(',').map(str::trim).filter(|v| !v.is_empty()).map(String::from)),
            _ => keep.push(pair.to_string()),
        }
    }
    let from =
        from.filter(|f| f.contains('@')).ok_or_else(|| invalid("an e-mail target's URL needs ?from=<address>"))?;
    if to.is_empty() || to.iter().any(|t| !t.contains('@')) {
        return Err(invalid("an e-mail target's URL needs &to=<address> (one or more)"));
    }
    let mut server = base.to_string();
    if let Some(password) = secret.filter(|s| !s.is_empty()) {
        // user@host with the password in the secret: user:password@host.
        let (scheme, rest) = base.split_once("://").unwrap_or(("smtp", base));
        if let Some((user, host)) = rest.split_once('@') {
            if !user.contains(':') {
                server = format!("{scheme}://{user}:{}@{host}", percent_encode(password));
            }
        }
    }
    if !keep.is_empty() {
        server = format!("{server}?{}", keep.join("&"));
    }
    Ok((server, from, to))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (b, hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Checks a target's settings as a user enters them: a URL of the kind's scheme, the
/// secret a kind needs, events it may subscribe to.
pub fn validate(kind: TargetKind, url: &str, secret: Option<&str>, events: &[NotifyEvent]) -> Result<(), NotifyError> {
    match kind {
        TargetKind::Email => {
            email_parts(url, secret)?;
        }
        _ => {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
                return Err(invalid(format!("a {kind} target's URL starts with http:// or https://")));
            }
        }
    }
    if !super::net::valid_authority(url) {
        return Err(invalid(format!("a {kind} target's URL names no host a request can go to")));
    }
    if kind == TargetKind::Gotify && secret.is_none_or(str::is_empty) {
        return Err(invalid("a Gotify target needs its application token as the secret"));
    }
    if events.is_empty() {
        return Err(invalid("choose at least one event"));
    }
    if let Some(e) = events.iter().find(|e| !SUBSCRIBABLE.contains(e)) {
        return Err(invalid(format!("{e} is not an event a target can subscribe to")));
    }
    Ok(())
}

/// How long after the `attempts`-th failed delivery the next try comes: 30 s, doubling, at
/// most an hour. A message is kept until it is delivered, however long that takes.
pub fn retry_after(attempts: u32) -> std::time::Duration {
    let seconds = 30u64.saturating_mul(1u64 << attempts.saturating_sub(1).min(20));
    std::time::Duration::from_secs(seconds.min(3600))
}

/// One custom header as entered: a name of token characters and a value without line breaks.
pub fn valid_header(name: &str, value: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        && !value.contains(['\r', '\n'])
}

/// Which library paths just became too full (`health::disk_risk`): those at risk now that
/// were not at the last look (`before`, the set answered then), each reported once until it
/// has been below the line again. Answers them and the set to keep for the next look.
pub fn disks_newly_at_risk(
    before: &std::collections::BTreeSet<String>,
    now: &[(String, f64)],
) -> (Vec<(String, f64)>, std::collections::BTreeSet<String>) {
    let risky: Vec<(String, f64)> = now.iter().filter(|(_, used)| super::health::disk_risk(*used)).cloned().collect();
    let newly = risky.iter().filter(|(path, _)| !before.contains(path)).cloned().collect();
    (newly, risky.into_iter().map(|(path, _)| path).collect())
}

/// Looks in a row a new overall health level must be seen on before it is reported: one
/// look at a load average crossing a line and back is not news.
pub const HEALTH_CONFIRM_LOOKS: u32 = 2;

/// Follows the overall health level from look to look (`actors::notifier::watch_health`) and
/// says when it changed: a level is reported once it held for `HEALTH_CONFIRM_LOOKS` looks,
/// from the level last reported (HEALTHY before the first report).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthWatch {
    reported: Option<super::health::HealthLevel>,
    candidate: Option<(super::health::HealthLevel, u32)>,
}

impl HealthWatch {
    /// One look found `level`: `Some((from, to))` when that is news.
    pub fn look(
        &mut self,
        level: super::health::HealthLevel,
    ) -> Option<(super::health::HealthLevel, super::health::HealthLevel)> {
        let reported = self.reported.unwrap_or(super::health::HealthLevel::Healthy);
        if level == reported {
            self.candidate = None;
            return None;
        }
        let seen = match self.candidate {
            Some((candidate, n)) if candidate == level => n.saturating_add(1),
            _ => 1,
        };
        if seen >= HEALTH_CONFIRM_LOOKS {
            self.reported = Some(level);
            self.candidate = None;
            return Some((reported, level));
        }
        self.candidate = Some((level, seen));
        None
    }
}

/// The outbox row's body for a job event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobFacts {
    pub id: i32,
    pub file_name: String,
    pub file_path: String,
    pub library_id: Option<i32>,
    pub status: String,
    pub original_size: i64,
    pub output_size: Option<i64>,
    pub bytes_saved: i64,
    pub failure_reason: Option<String>,
    pub failure_detail: Option<String>,
    pub node: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339("2026-11-25T20:00:00Z").unwrap().into()
    }

    fn completed() -> serde_json::Value {
        let job = JobFacts {
            id: 7,
            file_name: "film.mkv".into(),
            file_path: "/media/film.mkv".into(),
            library_id: Some(1),
            status: "COMPLETED".into(),
            original_size: 2_000_000_000,
            output_size: Some(800_000_000),
            bytes_saved: 1_200_000_000,
            failure_reason: None,
            failure_detail: None,
            node: Some("main".into()),
        };
        envelope(NotifyEvent::JobCompleted, at(), serde_json::json!({ "job": job }))
    }

    fn target(kind: TargetKind, url: &str, secret: Option<&str>) -> Target {
        Target { kind, url: url.into(), secret: secret.map(String::from), headers: vec![] }
    }

    fn http(delivery: Delivery) -> HttpRequest {
        match delivery {
            Delivery::Http(r) => r,
            other => panic!("expected HTTP, got {other:?}"),
        }
    }

    fn header<'a>(r: &'a HttpRequest, name: &str) -> Option<&'a str> {
        r.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    #[test]
    fn the_envelope_names_the_event_and_time_and_keeps_the_fields() {
        let body = completed();
        assert_eq!(body["event"], "job.completed");
        assert_eq!(body["at"], "2026-11-25T20:00:00+00:00");
        assert_eq!(body["job"]["bytesSaved"], 1_200_000_000);
    }

    #[test]
    fn a_completed_job_reads_as_bytes_saved() {
        let msg = message(&completed());
        assert_eq!(msg.text, "film.mkv: 1.2 GB saved (2.0 GB to 800.0 MB, 60 % smaller)");
        assert_eq!(msg.level, Level::Success);
    }

    #[test]
    fn the_signature_is_the_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_webhook_gets_the_envelope_signed_and_its_own_headers() {
        let mut t = target(TargetKind::Webhook, "http://h/hook", Some("s3cret"));
        t.headers = vec![("X-Team".into(), "media".into())];
        let r = http(request(&t, &completed()).unwrap());
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&r.body).unwrap(), completed());
        assert_eq!(header(&r, SIGNATURE_HEADER), Some(signature("s3cret", &r.body).as_str()));
        assert_eq!(header(&r, "X-Team"), Some("media"));
        let unsigned = http(request(&target(TargetKind::Webhook, "http://h/hook", None), &completed()).unwrap());
        assert_eq!(header(&unsigned, SIGNATURE_HEADER), None);
    }

    #[test]
    fn each_service_gets_its_documented_shape() {
        let body = completed();
        let discord = http(request(&target(TargetKind::Discord, "https://d/api/webhooks/1/x", None), &body).unwrap());
        let d: serde_json::Value = serde_json::from_slice(&discord.body).unwrap();
        assert_eq!(d["username"], "condense");
        assert!(d["content"].as_str().unwrap().contains("1.2 GB saved"));

        let ntfy = http(request(&target(TargetKind::Ntfy, "https://ntfy.sh/films", Some("tk_1")), &body).unwrap());
        assert_eq!(ntfy.url, "https://ntfy.sh/films");
        assert_eq!(header(&ntfy, "Title"), Some("condense: job completed"));
        assert_eq!(header(&ntfy, "Authorization"), Some("Bearer tk_1"));
        assert!(String::from_utf8(ntfy.body).unwrap().starts_with("film.mkv: 1.2 GB saved"));

        let gotify = http(request(&target(TargetKind::Gotify, "http://g/", Some("AppTok")), &body).unwrap());
        assert_eq!(gotify.url, "http://g/message");
        assert_eq!(header(&gotify, "X-Gotify-Key"), Some("AppTok"));
        let g: serde_json::Value = serde_json::from_slice(&gotify.body).unwrap();
        assert_eq!((g["title"].as_str(), g["priority"].as_i64()), (Some("condense: job completed"), Some(5)));
        assert!(request(&target(TargetKind::Gotify, "http://g", None), &body).is_err());

        let apprise = http(request(&target(TargetKind::Apprise, "http://a/notify/films", None), &body).unwrap());
        let a: serde_json::Value = serde_json::from_slice(&apprise.body).unwrap();
        assert_eq!((a["type"].as_str(), a["title"].as_str()), (Some("success"), Some("condense: job completed")));
    }

    #[test]
    fn a_failed_job_says_why_and_that_the_original_is_unchanged() {
        let body = envelope(
            NotifyEvent::JobFailed,
            at(),
            serde_json::json!({"job": {"fileName": "a.avi", "failureReason": "file validation failed"}}),
        );
        let msg = message(&body);
        assert_eq!(msg.text, "a.avi: file validation failed; the original is unchanged");
        assert_eq!(msg.level, Level::Failure);
    }

    #[test]
    fn a_damaged_file_reaches_every_kind_with_its_error() {
        let body = envelope(
            NotifyEvent::FileDamaged,
            at(),
            serde_json::json!({"file": {"path": "/m/a.mkv", "verdict": "damaged", "message": "invalid data", "firstErrorSeconds": 3.25}}),
        );
        let msg = message(&body);
        assert_eq!(msg.title, "condense: damaged file");
        assert_eq!(msg.text, "/m/a.mkv is damaged: invalid data (at 3.2 s); it is not encoded until it changes");
        assert_eq!(msg.level, Level::Warning);
        for kind in TargetKind::ALL {
            let url = match kind {
                TargetKind::Email => "smtp://m:25?from=c@x.org&to=a@x.org",
                TargetKind::Apprise => "http://a/notify/k",
                _ => "http://h/x",
            };
            match request(&target(*kind, url, Some("s")), &body).unwrap() {
                Delivery::Http(r) => {
                    let text = String::from_utf8_lossy(&r.body).into_owned();
                    assert!(text.contains("/m/a.mkv") || text.contains("file.damaged"), "{kind}: {text}");
                }
                Delivery::Email { subject, .. } => assert_eq!(subject, "condense: damaged file"),
            }
        }
        assert!(SUBSCRIBABLE.contains(&NotifyEvent::FileDamaged));
    }

    #[test]
    fn an_email_url_gives_the_server_the_sender_and_the_recipients() {
        let (server, from, to) = email_parts(
            "smtp://me@mail.example:587?from=condense%40example.org&to=a@x.org,b@x.org&tls=required",
            Some("p w"),
        )
        .unwrap();
        assert_eq!(server, "smtp://me:p%20w@mail.example:587?tls=required");
        assert_eq!(from, "condense@example.org");
        assert_eq!(to, ["a@x.org", "b@x.org"]);
        assert!(email_parts("http://mail", None).is_err());
        assert!(email_parts("smtp://mail?to=a@x.org", None).is_err());
        assert!(email_parts("smtp://mail?from=c@x.org", None).is_err());
        match request(&target(TargetKind::Email, "smtp://m:25?from=c@x.org&to=a@x.org", None), &completed()).unwrap() {
            Delivery::Email { subject, text, .. } => {
                assert_eq!(subject, "condense: job completed");
                assert!(text.contains("1.2 GB saved"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn targets_are_checked_as_entered() {
        let events = [NotifyEvent::JobCompleted];
        assert!(validate(TargetKind::Webhook, "https://example.org/hook", None, &events).is_ok());
        assert!(validate(TargetKind::Webhook, "ftp://example.org/hook", None, &events).is_err());
        assert!(validate(TargetKind::Webhook, "https://[example.org/hook", None, &events).is_err());
        assert!(validate(TargetKind::Gotify, "https://gotify.example", None, &events).is_err());
        assert!(validate(TargetKind::Discord, "https://discord.com/api/webhooks/1/x", None, &[]).is_err());
        assert!(validate(TargetKind::Webhook, "https://example.org/hook", None, &[NotifyEvent::Test]).is_err());
        assert!(validate(TargetKind::Email, "smtp://m?from=a@b.c&to=d@e.f", None, &events).is_ok());
    }

    #[test]
    fn retries_back_off_from_30_seconds_to_an_hour() {
        let secs: Vec<u64> = (1..=9).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(secs, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(retry_after(1000).as_secs(), 3600);
    }

    #[test]
    fn headers_with_line_breaks_or_odd_names_are_refused() {
        assert!(valid_header("X-Token", "abc"));
        assert!(!valid_header("X Token", "abc"));
        assert!(!valid_header("X-Token", "a\r\nInjected: 1"));
        assert!(!valid_header("", "a"));
    }

    #[test]
    fn long_discord_content_is_cut_to_its_limit() {
        let long = "x".repeat(3000);
        assert_eq!(clip(&long, 2000).chars().count(), 2000);
        assert_eq!(clip("short", 2000), "short");
    }

    #[test]
    fn a_disk_is_reported_when_it_crosses_the_line_and_again_only_after_it_was_below() {
        let look = |before: &std::collections::BTreeSet<String>, now: &[(&str, f64)]| {
            let now: Vec<(String, f64)> = now.iter().map(|(p, u)| ((*p).to_string(), *u)).collect();
            disks_newly_at_risk(before, &now)
        };
        let (newly, kept) = look(&Default::default(), &[("/a", 95.0), ("/b", 50.0), ("/c", 90.0)]);
        assert_eq!(newly, [("/a".to_string(), 95.0)]);
        let (newly, kept) = look(&kept, &[("/a", 97.0), ("/b", 91.0)]);
        assert_eq!(newly, [("/b".to_string(), 91.0)]);
        let (newly, kept) = look(&kept, &[("/a", 80.0), ("/b", 92.0)]);
        assert!(newly.is_empty());
        let (newly, _) = look(&kept, &[("/a", 93.0), ("/b", 92.0)]);
        assert_eq!(newly, [("/a".to_string(), 93.0)]);
        let body =
            envelope(NotifyEvent::DiskAtRisk, at(), serde_json::json!({"disk": {"path": "/a", "usedPercent": 93.2}}));
        assert_eq!(message(&body).text, "/a is 93 % full; encodes there may fail for lack of space");
    }

    #[test]
    fn a_health_level_is_news_once_it_held_for_two_looks() {
        use crate::domain::health::HealthLevel::{Critical, Healthy, Warning};
        let mut watch = HealthWatch::default();
        assert_eq!(watch.look(Healthy), None);
        assert_eq!(watch.look(Warning), None);
        assert_eq!(watch.look(Healthy), None, "one look is not news");
        assert_eq!(watch.look(Warning), None);
        assert_eq!(watch.look(Warning), Some((Healthy, Warning)));
        assert_eq!(watch.look(Warning), None, "reported once");
        assert_eq!(watch.look(Critical), None);
        assert_eq!(watch.look(Warning), None);
        assert_eq!(watch.look(Critical), None);
        assert_eq!(watch.look(Critical), Some((Warning, Critical)));
        assert_eq!(watch.look(Healthy), None);
        assert_eq!(watch.look(Healthy), Some((Critical, Healthy)));
        // Critical at start is news too (after two looks).
        let mut watch = HealthWatch::default();
        assert_eq!(watch.look(Critical), None);
        assert_eq!(watch.look(Critical), Some((Healthy, Critical)));
    }

    #[test]
    fn a_health_change_names_the_levels_and_what_is_wrong() {
        let body = envelope(
            NotifyEvent::HealthChanged,
            at(),
            serde_json::json!({"health": {"previous": "HEALTHY", "overall": "WARNING", "checks": [
                {"name": "cpu", "level": "HEALTHY", "message": "load 0.50 on 2 cores (0.25 per core)"},
                {"name": "nodes", "level": "WARNING", "message": "1 of 2 nodes offline"},
            ]}}),
        );
        let msg = message(&body);
        assert_eq!(msg.title, "condense: health warning");
        assert_eq!(msg.text, "Health went from healthy to warning: 1 of 2 nodes offline");
        assert_eq!(msg.level, Level::Warning);
        assert!(!SUBSCRIBABLE.contains(&NotifyEvent::FileReplaced));
        assert!(SUBSCRIBABLE.contains(&NotifyEvent::HealthChanged));
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1_500), "1.5 KB");
        assert_eq!(human_bytes(1_234_567_890), "1.2 GB");
    }
}
