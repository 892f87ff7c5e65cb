//! GET /encoders: the encoder table of `domain::encoding` as the dashboard's library form
//! needs it (per codec its encoders, presets, quality scale and defaults), with the nodes
//! that report each encoder opens on them, so the form copies no rules.

use actix_web::web;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::AuthUser;
use super::views;
use crate::domain::encoding::{Encoder, EncoderProfile, Hardware, QualityRange, TargetCodec, TwoPassRange};
use crate::domain::node::NodeStatus;
use crate::error::AppError;
use crate::http::state::AppState;
use crate::repo;

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EncoderCatalog {
    /// The codec a new library gets when none is chosen.
    pub default_codec: TargetCodec,
    pub codecs: Vec<CodecEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodecEntry {
    pub codec: TargetCodec,
    pub label: &'static str,
    /// The encoder a library of this codec gets when it names none.
    pub default_encoder: Encoder,
    /// In the order they are offered: the CPU encoder first.
    pub encoders: Vec<EncoderEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EncoderEntry {
    pub name: Encoder,
    pub label: &'static str,
    pub hardware: Hardware,
    /// Fastest first; empty when the encoder takes no preset.
    pub presets: &'static [&'static str],
    pub default_preset: Option<&'static str>,
    /// CRF or constant quality: lower keeps more detail.
    pub quality: QualityRange,
    /// A library's `rateControl` `twoPass`, with the bounds of its `targetBitrateKbps`;
    /// null: this encoder runs no two passes.
    pub two_pass: Option<TwoPassRange>,
    /// Some node that is not OFFLINE reports that this encoder opens on it.
    pub available: bool,
    /// The nodes that report it, whatever their status.
    pub nodes: Vec<String>,
    /// Why it is not available (null when it is): the hardware it needs that no node that
    /// is up has, or that only OFFLINE nodes run it.
    pub unavailable_reason: Option<String>,
}

/// What one node reports about its encoders.
#[derive(Debug, Clone)]
pub struct NodeEncoders {
    pub name: String,
    pub offline: bool,
    pub encoders: Vec<String>,
}

/// Target codecs and their encoders: presets, quality scale, defaults, and which nodes run each
#[utoipa::path(
    get,
    operation_id = "list_encoders",
    path = "/encoders",
    tag = "libraries",
    responses(
        (status = 200, description = "The encoder table", body = EncoderCatalog),
    ),
)]
pub async fn list(_user: AuthUser, state: web::Data<AppState>) -> Result<web::Json<EncoderCatalog>, AppError> {
    Ok(web::Json(catalog(&reports(&state.db).await?)))
}

/// What every node reports about its encoders.
pub async fn reports(db: &sea_orm::DatabaseConnection) -> Result<Vec<NodeEncoders>, AppError> {
    let nodes = repo::nodes::list(db).await?;
    Ok(views::nodes(&nodes)
        .into_iter()
        .map(|node| NodeEncoders {
            offline: node.status == NodeStatus::Offline.as_str(),
            name: node.name,
            encoders: node.encoders,
        })
        .collect())
}

/// The nodes of `reports` that run `encoder`.
fn reporting(reports: &[NodeEncoders], encoder: Encoder) -> Vec<&NodeEncoders> {
    reports.iter().filter(|n| n.encoders.iter().any(|e| e == encoder.as_str())).collect()
}

/// Why `encoder` is not available on these nodes, if it is not.
pub fn unavailable(reports: &[NodeEncoders], encoder: Encoder) -> Option<String> {
    unavailable_reason(encoder.profile(), &reporting(reports, encoder))
}

/// Why an encoder that these nodes report (`reporting`) is not available, if it is not.
fn unavailable_reason(profile: &EncoderProfile, reporting: &[&NodeEncoders]) -> Option<String> {
    if reporting.iter().any(|n| !n.offline) {
        return None;
    }
    if reporting.is_empty() {
        return Some(format!("no node runs it: {}", profile.hardware.missing()));
    }
    let names: Vec<&str> = reporting.iter().map(|n| n.name.as_str()).collect();
    Some(format!("only OFFLINE nodes run it ({})", names.join(", ")))
}

pub fn catalog(nodes: &[NodeEncoders]) -> EncoderCatalog {
    let codecs = TargetCodec::ALL
        .iter()
        .map(|&codec| CodecEntry {
            codec,
            label: codec.label(),
            default_encoder: codec.default_encoder(),
            encoders: codec
                .encoders()
                .map(|profile| {
                    let reporting = reporting(nodes, profile.encoder);
                    EncoderEntry {
                        name: profile.encoder,
                        label: profile.label,
                        hardware: profile.hardware,
                        presets: profile.presets,
                        default_preset: profile.default_preset,
                        quality: profile.quality,
                        two_pass: profile.two_pass_range(),
                        available: reporting.iter().any(|n| !n.offline),
                        nodes: reporting.iter().map(|n| n.name.clone()).collect(),
                        unavailable_reason: unavailable_reason(profile, &reporting),
                    }
                })
                .collect(),
        })
        .collect();
    EncoderCatalog { default_codec: TargetCodec::Hevc, codecs }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, offline: bool, encoders: &[&str]) -> NodeEncoders {
        NodeEncoders {
            name: name.into(),
            offline,
            encoders: encoders.iter().map(std::string::ToString::to_string).collect(),
        }
    }

    #[test]
    fn encoders_are_available_where_a_node_that_is_up_reports_them() {
        let nodes = [
            node("main", false, &["libx265", "libsvtav1", "h264_nvenc"]),
            node("gpu", true, &["libx265", "hevc_nvenc"]),
        ];
        let catalog = catalog(&nodes);
        let hevc = &catalog.codecs[0];
        assert_eq!((hevc.codec, hevc.default_encoder), (TargetCodec::Hevc, Encoder::Libx265));
        let names: Vec<Encoder> = hevc.encoders.iter().map(|e| e.name).collect();
        assert_eq!(names, [Encoder::Libx265, Encoder::HevcNvenc, Encoder::HevcQsv, Encoder::HevcVaapi]);
        let x265 = &hevc.encoders[0];
        assert_eq!((x265.available, x265.nodes.as_slice()), (true, &["main".to_string(), "gpu".to_string()][..]));
        // Only an OFFLINE node reports NVENC.
        assert_eq!((hevc.encoders[1].available, hevc.encoders[1].nodes.as_slice()), (false, &["gpu".to_string()][..]));
        assert!(!hevc.encoders[2].available && hevc.encoders[2].nodes.is_empty());
        let av1 = &catalog.codecs[1];
        assert_eq!((av1.encoders[0].name, av1.encoders[0].available), (Encoder::Libsvtav1, true));
        assert_eq!((av1.encoders[1].name, av1.encoders[1].available), (Encoder::LibaomAv1, false));
        // Each encoder not available says why.
        assert_eq!(x265.unavailable_reason, None);
        assert_eq!(hevc.encoders[1].unavailable_reason.as_deref(), Some("only OFFLINE nodes run it (gpu)"));
        let qsv = hevc.encoders[2].unavailable_reason.as_deref().unwrap();
        assert!(qsv.starts_with("no node runs it: it needs an Intel GPU with Quick Sync"), "{qsv}");
        let vaapi = hevc.encoders[3].unavailable_reason.as_deref().unwrap();
        assert!(vaapi.contains("VAAPI device"), "{vaapi}");
        assert_eq!(
            av1.encoders[1].unavailable_reason.as_deref(),
            Some("no node runs it: this build of FFmpeg does not have it")
        );
        // The hardware AV1 encoders are offered as the HEVC ones are, each with why not.
        let names: Vec<Encoder> = av1.encoders.iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [Encoder::Libsvtav1, Encoder::LibaomAv1, Encoder::Av1Nvenc, Encoder::Av1Qsv, Encoder::Av1Vaapi]
        );
        for (entry, needs) in av1.encoders.iter().skip(2).zip(["NVENC", "Quick Sync", "VAAPI device"]) {
            let why = entry.unavailable_reason.as_deref().unwrap();
            assert!(!entry.available && why.contains(needs), "{}: {why}", entry.name);
        }
    }
}
