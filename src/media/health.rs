//! What a library health check (issue 38) found in one file, seen from the node. The check
//! itself runs in a `condense-media media` child (`worker::check_health`), with the same
//! isolation, limits and time limits as validation: it only reads the file, never writes
//! beside it. Two depths: `quick` parses every header and demuxes every packet to the end;
//! `thorough` also decodes every frame of every video and audio stream.

use serde::{Deserialize, Serialize};

/// How deep a check reads a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Depth {
    /// Container and every stream's headers parse; every packet demuxes to the end with
    /// monotonic timestamps; the duration matches; keyframes decode.
    Quick,
    /// Quick, and every frame of every video and audio stream decodes without error.
    Thorough,
}

impl Depth {
    pub fn as_str(self) -> &'static str {
        match self {
            Depth::Quick => "quick",
            Depth::Thorough => "thorough",
        }
    }

    /// The depth `as_str` writes, as a request names it or a row stores it; None for any
    /// other text.
    pub fn parse(text: &str) -> Option<Depth> {
        [Depth::Quick, Depth::Thorough].into_iter().find(|d| d.as_str() == text)
    }
}

/// A file's state after a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Nothing wrong found at this depth.
    Ok,
    /// The file opens but has errors: `first_error_seconds`, `message`, `error_count`.
    Damaged,
    /// The file cannot be read as media at all (not media, no streams, unreadable): `message`.
    Unreadable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Damaged => "damaged",
            Verdict::Unreadable => "unreadable",
        }
    }
}

/// Decoder or demuxer errors counted on one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamErrors {
    /// The stream's index in the file.
    pub index: usize,
    /// "video", "audio", ...
    pub kind: String,
    pub errors: u64,
}

/// What one check of one file found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileHealth {
    pub depth: Depth,
    pub verdict: Verdict,
    /// Where the first error is, in seconds from the file's start (damaged files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error_seconds: Option<f64>,
    /// The first error in words (damaged), or why the file cannot be read (unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Every error counted, all streams together.
    pub error_count: u64,
    /// Errors per stream (only streams with errors).
    #[serde(default)]
    pub streams: Vec<StreamErrors>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_reads_as_the_api_writes_it() {
        let h = FileHealth {
            depth: Depth::Thorough,
            verdict: Verdict::Damaged,
            first_error_seconds: Some(3.2),
            message: Some("error while decoding MB 3 4".into()),
            error_count: 7,
            streams: vec![StreamErrors { index: 0, kind: "video".into(), errors: 7 }],
        };
        let json = serde_json::to_string(&h).unwrap();
        assert!(json.contains(r#""verdict":"damaged""#), "{json}");
        assert!(json.contains(r#""firstErrorSeconds":3.2"#), "{json}");
        assert_eq!(serde_json::from_str::<FileHealth>(&json).unwrap(), h);
        assert_eq!(Depth::Quick.as_str(), "quick");
        assert_eq!(Verdict::Unreadable.as_str(), "unreadable");
    }

    #[test]
    fn a_depth_reads_back_from_its_text_and_nothing_else_does() {
        for depth in [Depth::Quick, Depth::Thorough] {
            assert_eq!(Depth::parse(depth.as_str()), Some(depth));
        }
        for other in ["", "Quick", "THOROUGH", " quick", "quick ", "full"] {
            assert_eq!(Depth::parse(other), None, "{other:?}");
        }
    }
}
