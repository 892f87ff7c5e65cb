//! Nodes: listed with their load, their encoders and whether they are overloaded.

use condense::domain::node::{NodeRole, NodeStatus};
use condense::repo;
use serde_json::json;

use crate::api_test_on_both_databases;
use crate::common::api::{TestServer, PREFIXES};
use crate::common::rows::node;

async fn nodes_are_listed_with_load_and_overload(server: &TestServer) {
    let token = server.login().await;
    let facts = |name: &str, role: NodeRole, cores: i32| repo::nodes::NodeFacts {
        gpu: (role == NodeRole::Linked).then(|| "NVIDIA RTX 4000".to_string()),
        cores,
        memory_total: 16 << 30,
        max_jobs: 4,
        encoders: vec!["libx265".into(), "hevc_nvenc".into()],
        decoders: if role == NodeRole::Linked { vec!["nvidia".into()] } else { vec![] },
        ..node(name, role)
    };
    let main = repo::nodes::upsert(server.db(), facts("main", NodeRole::Main, 8)).await.unwrap();
    let busy = repo::nodes::upsert(server.db(), facts("busy", NodeRole::Linked, 4)).await.unwrap();
    let idle = repo::nodes::upsert(server.db(), facts("idle", NodeRole::Linked, 4)).await.unwrap();
    let gone = repo::nodes::upsert(server.db(), facts("gone", NodeRole::Linked, 2)).await.unwrap();
    repo::nodes::record_heartbeat(server.db(), main.id, 4.0, 8 << 30, 1).await.unwrap();
    repo::nodes::record_heartbeat(server.db(), busy.id, 6.0, 4 << 30, 5).await.unwrap();
    repo::nodes::record_heartbeat(server.db(), idle.id, 0.5, 1 << 30, 0).await.unwrap();
    repo::nodes::record_heartbeat(server.db(), gone.id, 0.0, 0, 3).await.unwrap();
    repo::nodes::set_status(server.db(), gone.id, NodeStatus::Offline, Some("no heartbeat for 90 s".into()))
        .await
        .unwrap();

    for prefix in PREFIXES {
        let (status, nodes) = server.get(&format!("{prefix}/nodes"), Some(&token)).await;
        assert_eq!(status, 200, "{nodes}");
        let nodes = nodes.as_array().unwrap();
        assert_eq!(nodes.len(), 4);
        let by_name = |name: &str| nodes.iter().find(|n| n["name"] == name).unwrap().clone();
        assert_eq!((&by_name("busy")["decoders"], &by_name("main")["decoders"]), (&json!(["nvidia"]), &json!([])));
        let busy = by_name("busy");
        let mut keys: Vec<&String> = busy.as_object().unwrap().keys().collect();
        keys.sort();
        let mut expected = vec![
            "id",
            "name",
            "role",
            "address",
            "status",
            "statusReason",
            "gpu",
            "load1",
            "cores",
            "loadRatio",
            "memoryUsed",
            "memoryTotal",
            "activeJobs",
            "maxJobs",
            "encoders",
            "decoders",
            "overloaded",
            "lastSeenAt",
            "identity",
            "hasCredential",
            "revoked",
            "window",
            "libraries",
            "sharedStorage",
            "transfer",
            "workDirFreeBytes",
        ];
        expected.sort();
        assert_eq!(keys, expected);
        // No schedule set: every node follows the default, always open.
        assert_eq!(
            (&busy["window"]["open"], &busy["window"]["followsDefault"], &busy["window"]["windows"]),
            (&json!(true), &json!(true), &json!([]))
        );
        assert_eq!(
            (&busy["role"], &busy["status"], &busy["loadRatio"]),
            (&json!("linked"), &json!("ONLINE"), &json!(1.5))
        );
        assert_eq!((&busy["activeJobs"], &busy["memoryUsed"]), (&json!(5), &json!(4_i64 << 30)));
        assert_eq!(busy["encoders"], json!(["libx265", "hevc_nvenc"]));
        // Not linked now: nothing known of its storage; it takes nothing by transfer.
        for name in ["busy", "main"] {
            let row = by_name(name);
            assert_eq!(
                (&row["sharedStorage"], &row["transfer"], &row["workDirFreeBytes"]),
                (&json!(null), &json!(false), &json!(null)),
                "{row:#}"
            );
        }
        // ONLINE average: (1 + 5 + 0) / 3 = 2; 5 is more than twice that.
        assert_eq!(busy["overloaded"], true);
        assert_eq!(by_name("main")["overloaded"], false);
        assert_eq!(by_name("main")["loadRatio"], 0.5);
        let gone = by_name("gone");
        assert_eq!(
            (&gone["status"], &gone["statusReason"], &gone["overloaded"]),
            (&json!("OFFLINE"), &json!("no heartbeat for 90 s"), &json!(false))
        );
    }
}
api_test_on_both_databases!(nodes_are_listed_with_load_and_overload);
