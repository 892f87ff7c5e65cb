//! Paths are bytes. A Unix file name is any bytes but `/` and NUL, and libraries hold names
//! that are not UTF-8 (Latin-1 names from old NAS shares: `caf\xE9 cr\xE8me.mkv`). These are
//! the rules that carry such a path through the database and JSON without losing a byte:
//!
//! - **Stored**: `readable` (the path as text: valid UTF-8 unchanged, each byte of an
//!   invalid sequence written `\xE9`) plus `raw_if_not_utf8` (the exact bytes, only where
//!   the text is not the path). `from_stored` puts the path back together.
//! - **Sent** (the plan to a child, requests, the intent file, the cluster link): a string
//!   when the path is UTF-8, as serde always sent paths, else `{"bytes": "<hex>"}`
//!   (`lossless`, `lossless_opt`, `lossless_vec` for `#[serde(with = …)]`).

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The path as text for people: valid UTF-8 as it is; otherwise every byte of an invalid
/// sequence written `\xHH` (upper-case hex), the valid runs between them kept.
pub fn readable(path: &OsStr) -> Cow<'_, str> {
    let bytes = path.as_bytes();
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02X}"));
        }
    }
    Cow::Owned(out)
}

/// The exact bytes of a path whose `readable` form is not the path itself (not UTF-8);
/// None for a UTF-8 path, whose text says it all.
pub fn raw_if_not_utf8(path: &OsStr) -> Option<Vec<u8>> {
    std::str::from_utf8(path.as_bytes()).is_err().then(|| path.as_bytes().to_vec())
}

/// The path a stored pair (`readable`, `raw_if_not_utf8`) names: the bytes when there are
/// any, else the text.
pub fn from_stored(readable: &str, raw: Option<&[u8]>) -> PathBuf {
    match raw {
        Some(bytes) => PathBuf::from(OsString::from_vec(bytes.to_vec())),
        None => PathBuf::from(readable),
    }
}

/// A path's wire form: what serde has always sent for a UTF-8 path (a string), or the
/// bytes in hex for any other.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum Wire<'a> {
    Text(Cow<'a, str>),
    Bytes { bytes: Cow<'a, str> },
}

impl<'a> Wire<'a> {
    fn of(path: &'a Path) -> Wire<'a> {
        match path.to_str() {
            Some(text) => Wire::Text(Cow::Borrowed(text)),
            None => Wire::Bytes { bytes: Cow::Owned(hex(path.as_os_str().as_bytes())) },
        }
    }

    fn into_path(self) -> Result<PathBuf, String> {
        match self {
            Wire::Text(text) => Ok(PathBuf::from(text.into_owned())),
            Wire::Bytes { bytes } => Ok(PathBuf::from(OsString::from_vec(unhex(&bytes)?))),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("a path's bytes in hex have an odd length ({})", digits.len()));
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("not hex: {:?}", String::from_utf8_lossy(pair)))
        })
        .collect()
}

/// `#[serde(with = "lossless")]` for a `PathBuf`.
pub mod lossless {
    use super::*;

    pub fn serialize<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&Wire::of(path), s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        let wire: Wire<'static> = serde::Deserialize::deserialize(d)?;
        wire.into_path().map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "lossless_opt")]` for an `Option<PathBuf>`.
pub mod lossless_opt {
    use super::*;

    pub fn serialize<S: serde::Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&path.as_deref().map(Wire::of), s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        let wire: Option<Wire<'static>> = serde::Deserialize::deserialize(d)?;
        wire.map(Wire::into_path).transpose().map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "lossless_vec")]` for a `Vec<PathBuf>`.
pub mod lossless_vec {
    use super::*;

    pub fn serialize<S: serde::Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(paths.iter().map(|p| Wire::of(p)))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        let wires: Vec<Wire<'static>> = serde::Deserialize::deserialize(d)?;
        wires.into_iter().map(Wire::into_path).collect::<Result<_, _>>().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(bytes: &[u8]) -> &OsStr {
        OsStr::from_bytes(bytes)
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Carrier {
        #[serde(with = "lossless")]
        one: PathBuf,
        #[serde(with = "lossless_opt")]
        maybe: Option<PathBuf>,
        #[serde(with = "lossless_vec")]
        many: Vec<PathBuf>,
    }

    const LATIN1: &[u8] = b"/m/caf\xe9 cr\xe8me.mkv";

    #[test]
    fn utf8_is_shown_as_it_is_and_stored_without_bytes() {
        for text in ["/m/a.mkv", "/m/caf\u{e9} \u{6f22}\u{5b57}.mkv", "/m/a\\xE9.mkv", "", "/m/new\nline.mkv"] {
            assert_eq!(readable(OsStr::new(text)), text);
            assert_eq!(raw_if_not_utf8(OsStr::new(text)), None);
            assert_eq!(from_stored(text, None), Path::new(text));
        }
    }

    #[test]
    fn invalid_bytes_are_shown_escaped_and_kept_exactly() {
        assert_eq!(readable(os(LATIN1)), "/m/caf\\xE9 cr\\xE8me.mkv");
        // A truncated sequence, a lone continuation byte, an overlong form, and 0xFF.
        assert_eq!(readable(os(b"a\xe2\x82b\x80c\xc0\xafd\xff")), "a\\xE2\\x82b\\x80c\\xC0\\xAFd\\xFF");
        // Valid multibyte characters between invalid bytes stay characters.
        assert_eq!(readable(os("\u{e9}\u{6f22}".as_bytes())), "\u{e9}\u{6f22}");
        assert_eq!(readable(os(b"\xe9\xc3\xa9\xe9")), "\\xE9\u{e9}\\xE9");
        for bytes in [LATIN1, b"\xff", b"a\xe2\x82", b"\x80/\x80"] {
            let raw = raw_if_not_utf8(os(bytes));
            assert_eq!(raw.as_deref(), Some(bytes));
            assert_eq!(from_stored(&readable(os(bytes)), raw.as_deref()).as_os_str().as_bytes(), bytes);
        }
    }

    #[test]
    fn the_readable_form_of_a_path_is_made_of_its_parts_readable_forms() {
        // What lets a folder's readable form find the readable forms of the files in it.
        let (folder, name) = (os(b"/m/\xe9t\xe9"), os(b"caf\xe9.mkv"));
        let whole = Path::new(folder).join(name);
        assert_eq!(readable(whole.as_os_str()), format!("{}/{}", readable(folder), readable(name)));
    }

    #[test]
    fn every_path_goes_through_json_and_back_byte_for_byte() {
        let paths: Vec<PathBuf> = [LATIN1, b"/m/a.mkv", b"\xff\xfe", b"/m/\"q\"\\x.mkv", "/m/\u{6f22}".as_bytes()]
            .into_iter()
            .map(|b| PathBuf::from(os(b)))
            .collect();
        for path in &paths {
            let carrier = Carrier { one: path.clone(), maybe: Some(path.clone()), many: paths.clone() };
            let json = serde_json::to_string(&carrier).unwrap();
            assert_eq!(serde_json::from_str::<Carrier>(&json).unwrap(), carrier, "{json}");
        }
        let none = Carrier { one: PathBuf::from("/a"), maybe: None, many: Vec::new() };
        assert_eq!(serde_json::from_str::<Carrier>(&serde_json::to_string(&none).unwrap()).unwrap(), none);
    }

    #[test]
    fn utf8_paths_travel_as_the_strings_older_nodes_send_and_read() {
        let json = serde_json::json!({ "one": "/m/a.mkv", "maybe": "/m/b.mkv", "many": ["/m/c.mkv"] });
        let carrier: Carrier = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(carrier.one, Path::new("/m/a.mkv"));
        assert_eq!(serde_json::to_value(&carrier).unwrap(), json);
        let other = Carrier { one: PathBuf::from(os(LATIN1)), maybe: None, many: Vec::new() };
        assert_eq!(
            serde_json::to_value(&other).unwrap()["one"],
            serde_json::json!({ "bytes": "2f6d2f636166e9206372e86d652e6d6b76" })
        );
    }

    #[test]
    fn malformed_bytes_are_refused() {
        for bad in [r#"{"bytes":"abc"}"#, r#"{"bytes":"zz"}"#, r#"{"bytes":"é1"}"#, "42"] {
            let json = format!(r#"{{"one":{bad},"maybe":null,"many":[]}}"#);
            assert!(serde_json::from_str::<Carrier>(&json).is_err(), "{bad}");
        }
    }
}
