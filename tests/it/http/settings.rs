//! The service's settings: read, changed in part, validated; the cluster token never shown.

use condense::repo;
use serde_json::json;

use crate::api_test_on_both_databases;
use crate::common::api::{code, message, TestServer, CLUSTER_TOKEN, PREFIXES};

async fn settings_round_trip(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let (status, settings) = server.get("/settings", token).await;
    assert_eq!(status, 200);
    // The cluster token is never served: only whether nodes can enroll.
    assert_eq!(settings, json!({"jobTimeoutHours": 24, "keepOriginals": false, "enrollmentOpen": true}));
    assert!(!settings.to_string().contains(CLUSTER_TOKEN));

    let (status, settings) = server.put("/settings", token, &json!({"jobTimeoutHours": 48})).await;
    assert_eq!(status, 200, "{settings}");
    assert_eq!((&settings["jobTimeoutHours"], &settings["keepOriginals"]), (&json!(48), &json!(false)));
    let (status, settings) = server.put("/api/settings", token, &json!({"keepOriginals": true})).await;
    assert_eq!(status, 200, "{settings}");
    assert_eq!((&settings["jobTimeoutHours"], &settings["keepOriginals"]), (&json!(48), &json!(true)));
    for prefix in PREFIXES {
        assert_eq!(server.get(&format!("{prefix}/settings"), token).await.1, settings);
    }
    // Stored where the rest of condense reads them.
    assert_eq!(repo::settings::get::<u32>(server.db(), "job_timeout_hours").await.unwrap(), Some(48));
    assert_eq!(repo::settings::get::<bool>(server.db(), "keep_originals").await.unwrap(), Some(true));

    for hours in [1, 720] {
        let (status, settings) = server.put("/settings", token, &json!({"jobTimeoutHours": hours})).await;
        assert_eq!((status, &settings["jobTimeoutHours"]), (200, &json!(hours)));
    }
    for hours in [0, 721, -5, 1_000_000_000_000_i64] {
        let (status, reply) =
            server.put("/settings", token, &json!({"jobTimeoutHours": hours, "keepOriginals": false})).await;
        assert_eq!((status, code(&reply)), (422, "validation_failed"), "{hours}: {reply}");
        assert!(message(&reply).contains("jobTimeoutHours"), "{reply}");
    }
    // A refused update changes nothing, not even the valid half.
    assert_eq!(server.get("/settings", token).await.1["keepOriginals"], true);
    let (status, reply) = server.put("/settings", token, &json!({"clusterToken": "mine now"})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
}
api_test_on_both_databases!(settings_round_trip);
