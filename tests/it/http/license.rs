//! The licence: installed, replaced and removed through the API, installed by `condense
//! serve` from `LICENSE_KEY`, and the installation's one trial of a paid tier.

use chrono::{DateTime, Duration, Utc};
use condense::actors::scheduler::effective_tier;
use condense::domain::access::UserRole;
use condense::domain::license::Tier;
use condense::repo;
use serde_json::{json, Value};

use crate::api_test_on_both_databases;
use crate::common::api::{code, message, TestServer, CLUSTER_TOKEN, PREFIXES};
use crate::common::cluster::{self, call};
use crate::common::db::{drop_schema, TestDb};
use crate::common::license::key;
use crate::common::server::{command, ServerProcess};

/// The trial of an installation that never started one.
fn unused() -> Value {
    json!({"used": false, "running": false, "tier": null, "startedAt": null, "endsAt": null, "daysLeft": 0})
}

async fn license_install_and_remove(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let free = json!({"tier": "FREE", "licensee": null, "expiresAt": null, "maxNodes": 1, "maxConcurrentJobs": 1, "effectiveTier": "FREE", "trial": unused()});
    assert_eq!(server.get("/license", token).await, (200, free.clone()));

    let pro = key(&server.license_private_key, Tier::Pro, None);
    let (status, installed) = server.put("/license", token, &json!({"key": format!("  {pro}\n")})).await;
    assert_eq!(status, 200, "{installed}");
    assert_eq!(
        installed,
        json!({"tier": "PRO", "licensee": "Ada Lovelace", "expiresAt": null, "maxNodes": null, "maxConcurrentJobs": null, "effectiveTier": "PRO", "trial": unused()})
    );
    for prefix in PREFIXES {
        assert_eq!(server.get(&format!("{prefix}/license"), token).await, (200, installed.clone()));
    }
    assert_eq!(repo::licenses::current(server.db()).await.unwrap().unwrap().key, pro);

    // Whole seconds: PostgreSQL keeps microseconds, SQLite nanoseconds.
    let expiry = DateTime::from_timestamp(Utc::now().timestamp() - 86400, 0).unwrap();
    let expired = key(&server.license_private_key, Tier::Supporter, Some(expiry));
    let (status, body) = server.put("/api/license", token, &json!({"key": expired})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["tier"], &body["effectiveTier"]), (&json!("SUPPORTER"), &json!("FREE")));
    assert_eq!((&body["maxNodes"], &body["maxConcurrentJobs"]), (&json!(1), &json!(1)));
    let shown: DateTime<Utc> = DateTime::parse_from_rfc3339(body["expiresAt"].as_str().unwrap()).unwrap().into();
    assert_eq!(shown, expiry);
    let trial = key(&server.license_private_key, Tier::Supporter, Some(Utc::now() + Duration::days(14)));
    let (status, body) = server.put("/license", token, &json!({"key": trial})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["effectiveTier"], &body["maxNodes"], &body["maxConcurrentJobs"]),
        (&json!("SUPPORTER"), &json!(3), &json!(5))
    );

    let (other_private_key, _) = condense::license::generate_keypair();
    let refused = [
        (key(&other_private_key, Tier::Pro, None), "license_bad_signature"),
        ("garbage".to_string(), "license_malformed"),
        (pro.replacen("CONDENSE1", "CONDENSE9", 1), "license_unknown_version"),
    ];
    for (bad, expected) in refused {
        let (status, reply) = server.put("/license", token, &json!({"key": bad})).await;
        assert_eq!((status, code(&reply)), (422, expected), "{reply}");
    }
    // A refused key leaves the installed one alone.
    assert_eq!(server.get("/license", token).await.1["effectiveTier"], "SUPPORTER");

    let (status, body) = server.delete("/license", token).await;
    assert_eq!((status, &body), (200, &free));
    assert_eq!(server.get("/api/license", token).await, (200, free));
}
api_test_on_both_databases!(license_install_and_remove);

#[actix_web::test]
async fn serve_installs_license_key_and_never_serves_the_cluster_token() {
    let dir = tempfile::tempdir().unwrap();
    let (private_key, public_key) = condense::license::generate_keypair();
    let get = |url: String, token: String| async move { call("GET", &url, Some(&token), None).await.1 };

    // A key that does not verify is reported, and the node starts anyway.
    let mut cmd = command(dir.path());
    cmd.env("ADMIN_PASSWORD", cluster::PASSWORD)
        .env("LICENSE_KEY", "CONDENSE1.not.valid")
        .env("CLUSTER_TOKEN", CLUSTER_TOKEN);
    let mut server = ServerProcess::start(cmd);
    let token = cluster::login(&server).await;
    assert_eq!(get(format!("{}/license", server.api), token.clone()).await["tier"], "FREE");
    let settings = get(format!("{}/settings", server.api), token).await;
    assert_eq!(settings["enrollmentOpen"], true, "{settings}");
    assert!(!settings.to_string().contains(CLUSTER_TOKEN), "{settings}");
    assert!(server.signal_and_wait(libc::SIGTERM).success());
    assert!(server.output().iter().any(|l| l.contains("LICENSE_KEY does not verify")), "{:#?}", server.output());

    // A genuine key for the configured public key is installed at start-up.
    let pro = key(&private_key, Tier::Pro, None);
    let mut cmd = command(dir.path());
    cmd.env("LICENSE_KEY", &pro).env("LICENSE_PUBLIC_KEY", &public_key);
    let mut server = ServerProcess::start(cmd);
    let token = cluster::login(&server).await;
    let license = get(format!("{}/license", server.api), token.clone()).await;
    assert_eq!((&license["tier"], &license["effectiveTier"]), (&json!("PRO"), &json!("PRO")), "{license}");
    assert_eq!(get(format!("{}/settings", server.api), token).await["enrollmentOpen"], false);
    assert!(server.signal_and_wait(libc::SIGTERM).success());
}

/// A time the API answered.
fn time(value: &Value) -> DateTime<Utc> {
    let text = value.as_str().unwrap_or_else(|| panic!("not a time: {value}"));
    DateTime::parse_from_rfc3339(text).unwrap().into()
}

/// One trial per installation, through the real server with the node's clock injected: a
/// paid key in force refuses it (and leaves it available), it grants its tier for 14 days
/// (also to the scheduler), a second one is refused, also after the key is removed, a key
/// installed during it wins, and at its end the tier is FREE again.
async fn license_trial_once_then_free(server: &TestServer) {
    let token = server.login().await;
    let viewer = super::user_with_role(server, &token, UserRole::Viewer).await;
    let admin = Some(token.as_str());
    let clock = &server.state.clock;
    let started = clock.now();
    let scheduler_tier = |now| effective_tier(server.db(), &server.state.license_public_key, now);
    assert_eq!(server.get("/license", admin).await.1["trial"], unused());

    // Only SUPPORTER and PRO can be tried, by an administrator.
    let refused = [
        (json!({"tier": "FREE"}), "validation_failed"),
        (json!({"tier": "GOLD"}), "validation_failed"),
        (json!({"tier": 2}), "invalid_body"),
        (json!({}), "invalid_body"),
        (json!({"tier": "PRO", "days": 30}), "invalid_body"),
    ];
    for (body, expected) in refused {
        let (status, reply) = server.post("/license/trial", admin, &body).await;
        assert_eq!((status, code(&reply)), (422, expected), "{body}: {reply}");
    }
    let (status, reply) = server.post("/license/trial", Some(&viewer), &json!({"tier": "PRO"})).await;
    assert_eq!((status, code(&reply)), (403, "forbidden"), "{reply}");

    // A paid key in force outranks a trial: starting one would waste it.
    let supporter = key(&server.license_private_key, Tier::Supporter, None);
    assert_eq!(server.put("/license", admin, &json!({"key": supporter})).await.0, 200);
    let (status, reply) = server.post("/license/trial", admin, &json!({"tier": "PRO"})).await;
    assert_eq!((status, code(&reply)), (409, "license_key_in_force"), "{reply}");
    assert!(message(&reply).contains("SUPPORTER"), "{reply}");
    assert_eq!(server.delete("/license", admin).await.1["trial"], unused());

    let (status, body) = server.post("/license/trial", admin, &json!({"tier": "PRO"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["tier"], &body["effectiveTier"], &body["maxNodes"], &body["maxConcurrentJobs"]),
        (&json!("FREE"), &json!("PRO"), &json!(null), &json!(null)),
        "{body}"
    );
    let trial = &body["trial"];
    assert_eq!(
        (&trial["used"], &trial["running"], &trial["tier"], &trial["daysLeft"]),
        (&json!(true), &json!(true), &json!("PRO"), &json!(14))
    );
    assert_eq!((time(&trial["startedAt"]), time(&trial["endsAt"])), (started, started + Duration::days(14)));
    assert_eq!(scheduler_tier(clock.now()).await, Tier::Pro);
    for prefix in PREFIXES {
        assert_eq!(server.get(&format!("{prefix}/license"), admin).await, (200, body.clone()));
    }

    // Once per installation: not again, not for another tier, not after the key is removed.
    let (status, reply) = server.post("/api/license/trial", admin, &json!({"tier": "SUPPORTER"})).await;
    assert_eq!((status, code(&reply)), (409, "trial_used"), "{reply}");
    assert!(message(&reply).contains("trial was used"), "{reply}");

    clock.set(started + Duration::days(13) + Duration::hours(1));
    let (_, body) = server.get("/license", admin).await;
    assert_eq!((&body["effectiveTier"], &body["trial"]["daysLeft"]), (&json!("PRO"), &json!(1)), "{body}");

    // A key installed during the trial wins, even a lower tier; removing it leaves the
    // trial running and still used.
    let supporter = key(&server.license_private_key, Tier::Supporter, None);
    let (status, body) = server.put("/license", admin, &json!({"key": supporter})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (&body["effectiveTier"], &body["maxConcurrentJobs"], &body["trial"]["running"]),
        (&json!("SUPPORTER"), &json!(5), &json!(true))
    );
    assert_eq!(scheduler_tier(clock.now()).await, Tier::Supporter);
    let (status, body) = server.delete("/license", admin).await;
    assert_eq!((status, &body["effectiveTier"], &body["trial"]["used"]), (200, &json!("PRO"), &json!(true)), "{body}");
    let (status, reply) = server.post("/license/trial", admin, &json!({"tier": "PRO"})).await;
    assert_eq!((status, code(&reply)), (409, "trial_used"), "{reply}");
    let row = repo::licenses::trial(server.db()).await.unwrap().unwrap();
    assert_eq!((row.tier, row.started_at), (Tier::Pro, started));

    // Day 14: back to FREE, for the API and the scheduler alike.
    clock.set(started + Duration::days(14));
    let (_, body) = server.get("/license", admin).await;
    assert_eq!(
        (&body["effectiveTier"], &body["maxNodes"], &body["maxConcurrentJobs"]),
        (&json!("FREE"), &json!(1), &json!(1)),
        "{body}"
    );
    assert_eq!(
        (&body["trial"]["used"], &body["trial"]["running"], &body["trial"]["daysLeft"], &body["trial"]["tier"]),
        (&json!(true), &json!(false), &json!(0), &json!("PRO"))
    );
    assert_eq!(scheduler_tier(clock.now()).await, Tier::Free);
    let (status, reply) = server.post("/license/trial", admin, &json!({"tier": "PRO"})).await;
    assert_eq!((status, code(&reply)), (409, "trial_used"), "{reply}");

    // Audited as the other licence writes, refusals included.
    let (_, log) = server.get("/audit?pageSize=500", admin).await;
    let trials: Vec<(String, u64)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["route"] == "/license/trial")
        .map(|e| (e["username"].as_str().unwrap().to_string(), e["status"].as_u64().unwrap()))
        .collect();
    let statuses: Vec<u64> = trials.iter().rev().map(|(_, status)| *status).collect();
    assert_eq!(statuses, [422, 422, 422, 422, 422, 403, 409, 200, 409, 409, 409], "{trials:?}");
    assert_eq!(trials.iter().filter(|(user, _)| user == "a-viewer").count(), 1);
}
api_test_on_both_databases!(license_trial_once_then_free, clock = "2026-12-01T09:00:00Z");

/// The trial is kept in the database: `condense serve` restarted on the same database (SQLite
/// in DATA_DIR, or PostgreSQL) still shows it and refuses a second one, also once the key was
/// removed.
async fn trial_survives_restarts(dir: &std::path::Path, database_url: Option<&str>) {
    let start = || {
        let mut cmd = command(dir);
        cmd.env("ADMIN_PASSWORD", cluster::PASSWORD);
        if let Some(url) = database_url {
            cmd.env("DATABASE_URL", url);
        }
        ServerProcess::start(cmd)
    };
    let mut server = start();
    let token = cluster::login(&server).await;
    let (status, body) =
        call("POST", &format!("{}/license/trial", server.api), Some(&token), Some(json!({"tier": "SUPPORTER"}))).await;
    assert_eq!((status, &body["effectiveTier"]), (200, &json!("SUPPORTER")), "{body}");
    let trial = body["trial"].clone();
    assert!(server.signal_and_wait(libc::SIGTERM).success());

    for round in 0..2 {
        let mut server = start();
        let token = cluster::login(&server).await;
        let (_, body) = call("GET", &format!("{}/license", server.api), Some(&token), None).await;
        assert_eq!((&body["effectiveTier"], &body["trial"]), (&json!("SUPPORTER"), &trial), "round {round}: {body}");
        let (status, reply) =
            call("POST", &format!("{}/license/trial", server.api), Some(&token), Some(json!({"tier": "PRO"}))).await;
        assert_eq!((status, code(&reply)), (409, "trial_used"), "round {round}: {reply}");
        let (status, body) = call("DELETE", &format!("{}/license", server.api), Some(&token), None).await;
        assert_eq!((status, &body["trial"]), (200, &trial), "round {round}: {body}");
        assert!(server.signal_and_wait(libc::SIGTERM).success());
    }
}

#[actix_web::test]
async fn trial_survives_restarts_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    trial_survives_restarts(dir.path(), None).await;
}

#[actix_web::test]
async fn trial_survives_restarts_on_postgres() {
    let Some((schema, admin, url)) =
        TestDb::postgres_schema("http::license::trial_survives_restarts_on_postgres").await
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    trial_survives_restarts(dir.path(), Some(&url)).await;
    drop_schema(&admin, &schema).await;
}
