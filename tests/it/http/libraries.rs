//! Libraries: created, read, updated in part and deleted, and every field validated.

use condense::domain::node::NodeRole;
use condense::repo;
use serde_json::{json, Value};

use super::media_dirs;
use crate::api_test_on_both_databases;
use crate::common::api::{code, message, TestServer, PREFIXES};
use crate::common::rows::node;

const LIBRARY_FIELDS: [&str; 22] = [
    "healthSchedule",
    "healthAction",
    "streamRules",
    "rateControl",
    "targetBitrateKbps",
    "qualityMode",
    "targetVmaf",
    "maxSizePercent",
    "keepDolbyVision",
    "keepModifiedTime",
    "id",
    "name",
    "paths",
    "targetCodec",
    "encoder",
    "quality",
    "preset",
    "watch",
    "enabled",
    "createdAt",
    "updatedAt",
    "lastScanAt",
];

/// A linked node that is up and runs the CPU encoder and `encoder`, decoding on `decoder`.
fn node_with(name: &str, encoder: &str, decoder: &str) -> repo::nodes::NodeFacts {
    repo::nodes::NodeFacts {
        cores: 8,
        memory_total: 16 << 30,
        max_jobs: 2,
        encoders: vec!["libx265".into(), encoder.into()],
        decoders: vec![decoder.into()],
        ..node(name, NodeRole::Linked)
    }
}

async fn libraries_crud(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let (dir, paths) = media_dirs(&["movies", "shows", "anime"]);
    // A symlink is stored as the folder it points to.
    let link = dir.path().join("link-to-movies");
    std::os::unix::fs::symlink(&paths[0], &link).unwrap();

    let (status, hevc) =
        server.post("/libraries", token, &json!({"name": "Movies", "paths": [link.display().to_string()]})).await;
    assert_eq!(status, 201, "{hevc}");
    let mut keys: Vec<&str> = hevc.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = LIBRARY_FIELDS.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    assert_eq!(hevc["paths"], json!([paths[0]]));
    assert_eq!(
        (&hevc["targetCodec"], &hevc["encoder"], &hevc["quality"], &hevc["preset"]),
        (&json!("hevc"), &json!("libx265"), &json!(28), &json!("medium"))
    );
    assert_eq!((&hevc["watch"], &hevc["enabled"], &hevc["lastScanAt"]), (&json!(true), &json!(true), &Value::Null));

    let (status, av1) = server
        .post(
            "/api/libraries",
            token,
            &json!({"name": "Shows", "paths": [paths[1]], "targetCodec": "av1", "watch": false}),
        )
        .await;
    assert_eq!(status, 201, "{av1}");
    assert_eq!(
        (&av1["encoder"], &av1["quality"], &av1["preset"], &av1["watch"]),
        (&json!("libsvtav1"), &json!(35), &json!("8"), &json!(false))
    );
    // A hardware encoder no node runs is refused with what is missing; once a node that is
    // up reports it, a library may use it.
    let body = json!({"name": "Anime", "paths": [paths[2]], "encoder": "hevc_nvenc", "quality": 0});
    let (status, refused) = server.post("/libraries", token, &body).await;
    assert_eq!((status, code(&refused)), (422, "validation_failed"), "{refused}");
    assert_eq!(
        message(&refused),
        "encoder hevc_nvenc cannot be used: no node runs it: it needs an NVIDIA GPU whose driver opens NVENC"
    );
    repo::nodes::upsert(server.db(), node_with("gpu", "hevc_nvenc", "nvidia")).await.unwrap();
    // The codec follows the encoder when only the encoder is given.
    let (status, nvenc) = server
        .post(
            "/libraries",
            token,
            &json!({"name": "Anime", "paths": [paths[2]], "encoder": "hevc_nvenc", "quality": 0}),
        )
        .await;
    assert_eq!(status, 201, "{nvenc}");
    assert_eq!((&nvenc["targetCodec"], &nvenc["quality"], &nvenc["preset"]), (&json!("hevc"), &json!(0), &json!("p5")));

    let (status, taken) = server.post("/libraries", token, &json!({"name": "Movies", "paths": [paths[1]]})).await;
    assert_eq!((status, code(&taken)), (409, "conflict"), "{taken}");

    for prefix in PREFIXES {
        let (status, list) = server.get(&format!("{prefix}/libraries"), token).await;
        assert_eq!(status, 200);
        let names: Vec<&str> = list.as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Movies", "Shows", "Anime"]);
        let (status, mut one) = server.get(&format!("{prefix}/libraries/{}", hevc["id"]), token).await;
        assert_eq!(status, 200);
        // A new library is scanned at once (in the background): the scan time may already
        // differ from the creation answer; nothing else may.
        one["lastScanAt"] = hevc["lastScanAt"].clone();
        assert_eq!(one, hevc);
    }

    // Partial updates: each field alone keeps the others.
    let id = hevc["id"].as_i64().unwrap();
    let (status, renamed) = server.put(&format!("/libraries/{id}"), token, &json!({"name": "  Films  "})).await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["name"], "Films");
    assert_eq!((&renamed["paths"], &renamed["encoder"]), (&hevc["paths"], &hevc["encoder"]));
    assert!(renamed["updatedAt"].as_str().unwrap() >= hevc["updatedAt"].as_str().unwrap());
    let (status, changed) = server
        .put(
            &format!("/api/libraries/{id}"),
            token,
            &json!({"targetCodec": "av1", "encoder": "libaom-av1", "quality": 60, "preset": "4", "watch": false, "enabled": false, "paths": [paths[0], format!("{}/", paths[2])], "name": null}),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(
        (&changed["targetCodec"], &changed["encoder"], &changed["quality"], &changed["preset"]),
        (&json!("av1"), &json!("libaom-av1"), &json!(60), &json!("4"))
    );
    assert_eq!(
        (&changed["watch"], &changed["enabled"], &changed["name"]),
        (&json!(false), &json!(false), &json!("Films"))
    );
    assert_eq!(changed["paths"], json!([paths[0], paths[2]]));
    let (status, same) = server.put(&format!("/libraries/{id}"), token, &json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(same["name"], "Films");
    let (status, clash) = server.put(&format!("/libraries/{id}"), token, &json!({"name": "Shows"})).await;
    assert_eq!((status, code(&clash)), (409, "conflict"), "{clash}");

    let (status, body) = server.delete(&format!("/libraries/{id}"), token).await;
    assert_eq!(status, 204, "{body}");
    for prefix in PREFIXES {
        let (status, body) = server.get(&format!("{prefix}/libraries/{id}"), token).await;
        assert_eq!((status, code(&body)), (404, "not_found"));
        let (status, body) = server.delete(&format!("{prefix}/libraries/{id}"), token).await;
        assert_eq!((status, code(&body)), (404, "not_found"));
        let (status, body) = server.put(&format!("{prefix}/libraries/{id}"), token, &json!({"watch": true})).await;
        assert_eq!((status, code(&body)), (404, "not_found"));
        for bad_id in ["abc", "1.5", "-", "99999999999999"] {
            let (status, body) = server.get(&format!("{prefix}/libraries/{bad_id}"), token).await;
            assert_eq!((status, code(&body)), (404, "not_found"), "{bad_id}");
        }
    }
}
api_test_on_both_databases!(libraries_crud);

/// The defaults of `streamRules`, as a new library shows them.
fn default_rules() -> Value {
    json!({
        "audioLanguages": [], "dropUndetermined": false, "dropCommentary": false, "audioCodec": "copy",
        "audioTranscode": ["dts", "truehd", "flac", "pcm"], "audioBitrateKbps": null, "keepOriginalAudio": false,
        "addStereo": false, "subtitleLanguages": [], "dropImageSubtitles": false, "maxHeight": null,
        "container": "keep", "minSizeMb": null, "minBitrateKbps": null, "skipPaths": [],
    })
}

async fn stream_rules_round_trip(server: &TestServer) {
    let token = server.login().await;
    let token = Some(token.as_str());
    let (_dir, paths) = media_dirs(&["films"]);
    let (status, plain) = server.post("/libraries", token, &json!({"name": "Plain", "paths": [paths[0]]})).await;
    assert_eq!(status, 201, "{plain}");
    assert_eq!(plain["streamRules"], default_rules());

    let rules = json!({
        "audioLanguages": ["eng", "deu"], "dropUndetermined": true, "dropCommentary": true, "audioCodec": "aac",
        "audioTranscode": ["dts", "pcm"], "audioBitrateKbps": 112, "keepOriginalAudio": true, "addStereo": true,
        "subtitleLanguages": ["eng"], "dropImageSubtitles": true, "maxHeight": 720, "container": "mp4",
        "minSizeMb": 50, "minBitrateKbps": 1500, "skipPaths": ["Extras/**", "**/*sample*"],
    });
    let (_dir2, paths2) = media_dirs(&["films"]);
    let (status, ruled) =
        server.post("/libraries", token, &json!({"name": "Ruled", "paths": [paths2[0]], "streamRules": rules})).await;
    assert_eq!(status, 201, "{ruled}");
    assert_eq!(ruled["streamRules"], rules);
    let id = ruled["id"].as_i64().unwrap();
    let (status, read) = server.get(&format!("/libraries/{id}"), token).await;
    assert_eq!((status, &read["streamRules"]), (200, &rules));

    // An update replaces the whole set; fields left out take their defaults.
    let (status, updated) = server
        .put(&format!("/libraries/{id}"), token, &json!({"streamRules": {"maxHeight": 1080, "container": "mkv"}}))
        .await;
    assert_eq!(status, 200, "{updated}");
    let mut expected = default_rules();
    expected["maxHeight"] = json!(1080);
    expected["container"] = json!("mkv");
    assert_eq!(updated["streamRules"], expected);
    // Another field's update keeps the rules.
    let (status, kept) = server.put(&format!("/libraries/{id}"), token, &json!({"watch": false})).await;
    assert_eq!((status, &kept["streamRules"]), (200, &expected));
    let (_, listed) = server.get("/libraries", token).await;
    let listed = listed.as_array().unwrap().iter().find(|l| l["id"] == json!(id)).unwrap().clone();
    assert_eq!(listed["streamRules"], expected);
}
api_test_on_both_databases!(stream_rules_round_trip);

#[actix_web::test]
async fn stream_rules_are_validated_with_the_field_named() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let token = Some(token.as_str());
    let (_dir, paths) = media_dirs(&["a"]);
    let a = paths[0].clone();
    let cases: Vec<(Value, &str)> = vec![
        (json!({"audioLanguages": ["en"]}), "streamRules.audioLanguages[0]"),
        (json!({"audioLanguages": ["eng", "Deu"]}), "streamRules.audioLanguages[1]"),
        (json!({"subtitleLanguages": ["english"]}), "streamRules.subtitleLanguages[0]"),
        (json!({"audioTranscode": ["DTS"]}), "streamRules.audioTranscode[0]"),
        (json!({"audioBitrateKbps": 8}), "streamRules.audioBitrateKbps"),
        (json!({"audioBitrateKbps": 1000}), "streamRules.audioBitrateKbps"),
        (json!({"maxHeight": 100}), "streamRules.maxHeight"),
        (json!({"maxHeight": 10000}), "streamRules.maxHeight"),
        (json!({"minSizeMb": 20_000_000}), "streamRules.minSizeMb"),
        (json!({"minBitrateKbps": 2_000_000}), "streamRules.minBitrateKbps"),
        (json!({"skipPaths": ["Extras/[a-"]}), "streamRules.skipPaths[0]"),
        (json!({"skipPaths": ["ok/*", "/abs/**"]}), "streamRules.skipPaths[1]"),
    ];
    for (rules, field) in &cases {
        let body = json!({"name": "x", "paths": [a], "streamRules": rules});
        let (status, reply) = server.post("/libraries", token, &body).await;
        assert_eq!((status, code(&reply)), (422, "validation_failed"), "{body}: {reply}");
        assert!(message(&reply).starts_with(field), "{body}: {reply}");
    }
    // Values of the wrong type are refused before any check.
    for rules in [json!({"audioCodec": "mp3"}), json!({"container": "avi"}), json!({"maxHeight": "720"})] {
        let (status, reply) =
            server.post("/libraries", token, &json!({"name": "x", "paths": [a], "streamRules": rules})).await;
        assert_eq!((status, code(&reply)), (422, "invalid_body"), "{rules}: {reply}");
    }
    let (status, made) = server.post("/libraries", token, &json!({"name": "x", "paths": [a]})).await;
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_i64().unwrap();
    let (status, reply) =
        server.put(&format!("/libraries/{id}"), token, &json!({"streamRules": {"maxHeight": 4321}})).await;
    assert_eq!((status, code(&reply)), (422, "validation_failed"), "{reply}");
    assert!(message(&reply).starts_with("streamRules.maxHeight"), "{reply}");
    // Nothing was stored.
    let (_, read) = server.get(&format!("/libraries/{id}"), token).await;
    assert_eq!(read["streamRules"], default_rules());
}

#[actix_web::test]
async fn library_fields_are_validated() {
    let server = TestServer::sqlite().await;
    let token = server.login().await;
    let token = Some(token.as_str());
    let (dir, paths) = media_dirs(&["a", "a/inner", "b"]);
    let file = dir.path().join("file.mkv");
    std::fs::write(&file, b"x").unwrap();
    let file = file.display().to_string();
    let a = paths[0].clone();
    let many: Vec<String> = (0..33).map(|n| format!("/tmp/{n}")).collect();

    let cases: Vec<(Value, &str)> = vec![
        (json!({"name": "", "paths": [a]}), "name"),
        (json!({"name": "   ", "paths": [a]}), "name"),
        (json!({"name": "x".repeat(101), "paths": [a]}), "name"),
        (json!({"name": "tab\tname", "paths": [a]}), "name"),
        (json!({"name": "x", "paths": []}), "paths"),
        (json!({"name": "x", "paths": many}), "paths"),
        (json!({"name": "x", "paths": ["relative/dir"]}), "paths[0]"),
        (json!({"name": "x", "paths": [""]}), "paths[0]"),
        (json!({"name": "x", "paths": [a, "/no/such/folder/anywhere"]}), "paths[1]"),
        (json!({"name": "x", "paths": [file]}), "paths[0]"),
        (json!({"name": "x", "paths": [a, paths[1]]}), "paths[1]"),
        (json!({"name": "x", "paths": [a, a]}), "paths[1]"),
        (json!({"name": "x", "paths": [a], "targetCodec": "h264"}), "targetCodec"),
        (json!({"name": "x", "paths": [a], "encoder": "libx264"}), "encoder"),
        (json!({"name": "x", "paths": [a], "targetCodec": "av1", "encoder": "libx265"}), "encoder"),
        (json!({"name": "x", "paths": [a], "targetCodec": "hevc", "encoder": "libsvtav1"}), "encoder"),
        (json!({"name": "x", "paths": [a], "quality": 52}), "quality"),
        (json!({"name": "x", "paths": [a], "targetCodec": "av1", "quality": 64}), "quality"),
        (json!({"name": "x", "paths": [a], "quality": -1}), "quality"),
        (json!({"name": "x", "paths": [a], "preset": ""}), "preset"),
        (json!({"name": "x", "paths": [a], "preset": "p".repeat(33)}), "preset"),
        // Each encoder takes its own presets (GET /encoders lists them); VAAPI takes none.
        (json!({"name": "x", "paths": [a], "encoder": "hevc_nvenc", "preset": "medium"}), "preset"),
        (json!({"name": "x", "paths": [a], "targetCodec": "av1", "preset": "14"}), "preset"),
        (json!({"name": "x", "paths": [a], "encoder": "hevc_vaapi", "preset": "medium"}), "preset"),
    ];
    for (body, field) in &cases {
        let (status, reply) = server.post("/libraries", token, body).await;
        assert_eq!(status, 422, "{body}: {reply}");
        assert_eq!(code(&reply), "validation_failed", "{body}");
        assert!(message(&reply).starts_with(field), "{body}: {reply}");
    }
    // The bounds themselves are accepted.
    let (status, edge) = server
        .post(
            "/libraries",
            token,
            &json!({"name": "x".repeat(100), "paths": [a], "targetCodec": "AV1", "quality": 63, "preset": "13"}),
        )
        .await;
    assert_eq!(status, 201, "{edge}");
    assert_eq!(edge["targetCodec"], "av1");
    let id = edge["id"].as_i64().unwrap();

    // An update must leave a valid library: a codec change needs a fitting encoder and quality.
    for (body, field) in [
        (json!({"targetCodec": "hevc"}), "encoder"),
        (json!({"targetCodec": "hevc", "encoder": "libx265"}), "quality"),
        (json!({"encoder": "hevc_qsv"}), "encoder"),
        (json!({"name": ""}), "name"),
        (json!({"paths": ["/no/such/folder/anywhere"]}), "paths[0]"),
        (json!({"quality": 64}), "quality"),
        (json!({"preset": " "}), "preset"),
    ] {
        let (status, reply) = server.put(&format!("/libraries/{id}"), token, &body).await;
        assert_eq!((status, code(&reply)), (422, "validation_failed"), "{body}: {reply}");
        assert!(message(&reply).starts_with(field), "{body}: {reply}");
    }
    let (status, reply) = server
        .put(&format!("/libraries/{id}"), token, &json!({"targetCodec": "hevc", "encoder": "libx265", "quality": 20}))
        .await;
    assert_eq!(status, 200, "{reply}");
    // SVT-AV1's preset 13 means nothing to x265: the new encoder gets its own default.
    assert_eq!(reply["preset"], "medium", "{reply}");
    // No node has a VAAPI device: the change is refused with what is missing.
    let (status, reply) = server.put(&format!("/libraries/{id}"), token, &json!({"encoder": "hevc_vaapi"})).await;
    assert_eq!((status, code(&reply)), (422, "validation_failed"), "{reply}");
    assert!(
        message(&reply).starts_with("encoder hevc_vaapi cannot be used: no node runs it: it needs a VAAPI device"),
        "{reply}"
    );
    // An encoder that takes no preset stores an empty one.
    repo::nodes::upsert(server.db(), node_with("amd", "hevc_vaapi", "vaapi")).await.unwrap();
    let (status, reply) = server.put(&format!("/libraries/{id}"), token, &json!({"encoder": "hevc_vaapi"})).await;
    assert_eq!((status, &reply["preset"]), (200, &json!("")), "{reply}");
    let (status, reply) = server.put(&format!("/libraries/{id}"), token, &json!({"id": 5})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
    let (status, reply) =
        server.post("/libraries", token, &json!({"name": "y", "paths": [paths[2]], "quality": "high"})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
    let (status, reply) =
        server.post("/libraries", token, &json!({"name": "y", "paths": [paths[2]], "lastScanAt": null})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
    let (status, reply) = server.post("/libraries", token, &json!({"paths": [paths[2]]})).await;
    assert_eq!((status, code(&reply)), (422, "invalid_body"), "{reply}");
    server.finish().await;
}
