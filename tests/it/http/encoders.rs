//! The encoder catalogue: each codec's encoders with their defaults, and the nodes that run
//! them.

use condense::domain::node::{NodeRole, NodeStatus};
use condense::repo;
use serde_json::{json, Value};

use super::media_dirs;
use crate::api_test_on_both_databases;
use crate::common::api::{TestServer, PREFIXES};
use crate::common::rows::node;

async fn encoders_are_served_with_their_defaults_and_the_nodes_that_run_them(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    // The test server's own node ("main") reports libx265.
    let facts = |name: &str, encoders: &[&str]| repo::nodes::NodeFacts {
        cores: 4,
        memory_total: 8 << 30,
        encoders: encoders.iter().map(std::string::ToString::to_string).collect(),
        ..node(name, NodeRole::Linked)
    };
    repo::nodes::upsert(server.db(), facts("gpu", &["libx265", "hevc_nvenc", "libsvtav1", "av1_vaapi"])).await.unwrap();
    let old = repo::nodes::upsert(server.db(), facts("old", &["libaom-av1"])).await.unwrap();
    repo::nodes::set_status(server.db(), old.id, NodeStatus::Offline, None).await.unwrap();

    let mut catalog = Value::Null;
    for prefix in PREFIXES {
        let (status, body) = server.get(&format!("{prefix}/encoders"), token).await;
        assert_eq!(status, 200, "{body}");
        catalog = body;
    }
    assert_eq!(catalog["defaultCodec"], "hevc");
    let codecs = catalog["codecs"].as_array().unwrap();
    let names = |codec: &Value| -> Vec<String> {
        codec["encoders"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!((&codecs[0]["codec"], &codecs[0]["defaultEncoder"]), (&json!("hevc"), &json!("libx265")));
    assert_eq!(names(&codecs[0]), ["libx265", "hevc_nvenc", "hevc_qsv", "hevc_vaapi"]);
    assert_eq!((&codecs[1]["codec"], &codecs[1]["defaultEncoder"]), (&json!("av1"), &json!("libsvtav1")));
    assert_eq!(names(&codecs[1]), ["libsvtav1", "libaom-av1", "av1_nvenc", "av1_qsv", "av1_vaapi"]);
    let encoder = |codec: usize, index: usize| codecs[codec]["encoders"][index].clone();
    let x265 = encoder(0, 0);
    assert_eq!(x265["hardware"], "cpu");
    assert_eq!(x265["quality"], json!({"min": 0, "max": 51, "default": 28}));
    assert_eq!(x265["defaultPreset"], "medium");
    assert!(x265["presets"].as_array().unwrap().contains(&json!("veryslow")));
    assert_eq!((&x265["available"], &x265["nodes"]), (&json!(true), &json!(["main", "gpu"])));
    let nvenc = encoder(0, 1);
    assert_eq!((&nvenc["hardware"], &nvenc["defaultPreset"]), (&json!("nvidia"), &json!("p5")));
    assert_eq!((&nvenc["available"], &nvenc["nodes"]), (&json!(true), &json!(["gpu"])));
    let vaapi = encoder(0, 3);
    assert_eq!(
        (&vaapi["presets"], &vaapi["defaultPreset"], &vaapi["available"]),
        (&json!([]), &Value::Null, &json!(false))
    );
    assert_eq!(encoder(1, 0)["quality"], json!({"min": 0, "max": 63, "default": 35}));
    // Two passes: libx265 and hevc_nvenc, with the bitrate's bounds; no AV1 encoder.
    let two_pass = json!({"minKbps": 50, "maxKbps": 200000});
    assert_eq!((&x265["twoPass"], &nvenc["twoPass"], &vaapi["twoPass"]), (&two_pass, &two_pass, &Value::Null));
    assert!((0..5).all(|i| encoder(1, i)["twoPass"].is_null()));
    // The hardware AV1 encoders on their own scales; the one no node runs says what it needs.
    assert_eq!(encoder(1, 4)["quality"], json!({"min": 0, "max": 255, "default": 140}));
    assert_eq!((&encoder(1, 4)["available"], &encoder(1, 4)["nodes"]), (&json!(true), &json!(["gpu"])));
    let av1_nvenc = encoder(1, 2);
    assert_eq!(av1_nvenc["available"], false);
    assert!(av1_nvenc["unavailableReason"].as_str().unwrap().contains("NVENC"), "{av1_nvenc}");
    // Only an OFFLINE node reports libaom-av1.
    let aom = encoder(1, 1);
    assert_eq!(
        (&aom["available"], &aom["nodes"], &aom["defaultPreset"]),
        (&json!(false), &json!(["old"]), &json!("6"))
    );

    // A library created without settings gets exactly the defaults served here.
    let (_dir, paths) = media_dirs(&["a", "b", "c"]);
    for (i, codec) in codecs.iter().enumerate() {
        let body = json!({"name": format!("lib-{i}"), "paths": [paths[i]], "targetCodec": codec["codec"]});
        let (status, library) = server.post("/libraries", token, &body).await;
        assert_eq!(status, 201, "{library}");
        let default =
            codec["encoders"].as_array().unwrap().iter().find(|e| e["name"] == codec["defaultEncoder"]).unwrap();
        assert_eq!(library["encoder"], codec["defaultEncoder"]);
        assert_eq!(library["quality"], default["quality"]["default"]);
        assert_eq!(library["preset"], default["defaultPreset"]);
    }
    let body = json!({"name": "gpu", "paths": [paths[2]], "encoder": "hevc_nvenc"});
    let (status, library) = server.post("/libraries", token, &body).await;
    assert_eq!(
        (status, &library["preset"], &library["quality"]),
        (201, &nvenc["defaultPreset"], &nvenc["quality"]["default"])
    );
    // An AV1 library moved to VAAPI's AV1 encoder keeps its quality at the same place on the
    // new scale (35 of 0-63 is 142 of 0-255), and back.
    let (status, library) = server.get("/libraries", token).await;
    assert_eq!(status, 200, "{library}");
    let av1 = library.as_array().unwrap().iter().find(|l| l["targetCodec"] == "av1").unwrap().clone();
    let path = format!("/libraries/{}", av1["id"]);
    let (status, moved) = server.put(&path, token, &json!({"encoder": "av1_vaapi"})).await;
    assert_eq!((status, &moved["encoder"], &moved["quality"]), (200, &json!("av1_vaapi"), &json!(142)), "{moved}");
    let (status, back) = server.put(&path, token, &json!({"encoder": "libsvtav1"})).await;
    assert_eq!((status, &back["quality"]), (200, &json!(35)), "{back}");
}
api_test_on_both_databases!(encoders_are_served_with_their_defaults_and_the_nodes_that_run_them);
