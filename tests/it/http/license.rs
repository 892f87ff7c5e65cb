//! The licence: installed, replaced and removed through the API, and installed by `condense
//! serve` from `LICENSE_KEY`.

use chrono::{DateTime, Duration, Utc};
use condense::domain::license::Tier;
use condense::repo;
use serde_json::json;

use crate::api_test_on_both_databases;
use crate::common::api::{code, TestServer, CLUSTER_TOKEN, PREFIXES};
use crate::common::cluster::{self, call};
use crate::common::license::key;

async fn license_install_and_remove(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let free = json!({"tier": "FREE", "licensee": null, "expiresAt": null, "maxNodes": 1, "maxConcurrentJobs": 1, "effectiveTier": "FREE"});
    assert_eq!(server.get("/license", token).await, (200, free.clone()));

    let pro = key(&server.license_private_key, Tier::Pro, None);
    let (status, installed) = server.put("/license", token, &json!({"key": format!("  {pro}\n")})).await;
    assert_eq!(status, 200, "{installed}");
    assert_eq!(
        installed,
        json!({"tier": "PRO", "licensee": "Ada Lovelace", "expiresAt": null, "maxNodes": null, "maxConcurrentJobs": null, "effectiveTier": "PRO"})
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
    use crate::common::server::{command, ServerProcess};
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
