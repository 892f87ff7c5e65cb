//! Every name condense gives a file or folder on disk, in one place. Next to a source
//! `<dir>/NAME` it writes only hidden names that contain `.condense-`, which scanners and
//! the watcher ignore:
//!
//! - `<dir>/.NAME.condense-partial/`: the job's partial output, one writer at a time (the
//!   OFD lock on its `.lock` file, see `media::partial`), holding `manifest.json` (the
//!   segments finished so far), the segments `seg-00000.seg`, …, the converted audio
//!   encoded beside the video `audio.packets` (`condense-media`'s `audio_ahead`), the muxed
//!   `output.<ext>`, and during a replace its intent `replace.json`;
//! - `<dir>/.NAME.condense-original`, `.NAME.condense-original.2`, …: hard links that keep
//!   the original reachable while it is replaced, and afterwards when originals are kept.
//!
//! A source name too long for these (a name may have 255 bytes, and the marker and a leading
//! dot take up to 30 more) is written shortened with a hash of the whole name (`service_stem`).
//!
//! docs/ARCHITECTURE.md describes how the replace protocol uses them.

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// What every name condense writes next to a source contains.
pub const SERVICE_MARKER: &str = ".condense-";
/// Suffix of the hidden folder, next to the source, that holds a job's partial output.
pub const PARTIAL_SUFFIX: &str = ".condense-partial";
/// Suffix of the hidden hard link that keeps the original reachable while it is replaced.
pub const BACKUP_SUFFIX: &str = ".condense-original";

/// The lock file inside a partial folder.
pub const LOCK_FILE: &str = ".lock";
/// The list of finished segments inside a partial folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// A replace's intent inside a partial folder: what recovery after a crash must finish or undo.
pub const INTENT_FILE: &str = "replace.json";

/// The most bytes a file name may have (NAME_MAX of every filesystem libraries live on).
pub const MAX_NAME_BYTES: usize = 255;
/// Source names of at most this many bytes appear whole in the names condense writes. The
/// longest of those is `.` + name + `.condense-original` + `.4294967295` (30 bytes more);
/// a longer name is replaced by a shortened stem of 222 to 225 bytes, always longer than
/// this, so no source name can equal another source's shortened stem.
pub const KEPT_NAME_BYTES: usize = 208;
/// Hex digits of the SHA-256 of the whole name that end a shortened stem (64 bits: two
/// names of one folder sharing their first 208 bytes still get two names).
const STEM_HASH_HEX: usize = 16;

/// True for names condense itself writes (partial folders, backups), which scanners ignore.
pub fn is_service_file(path: &Path) -> bool {
    path.file_name().is_some_and(|n| contains(n.as_bytes(), SERVICE_MARKER.as_bytes()))
}

/// True for a hidden name: a leading dot, whatever bytes follow.
pub fn is_hidden(name: &OsStr) -> bool {
    name.as_bytes().first() == Some(&b'.')
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What stands for a source's name in the names written next to it: the name itself up to
/// `KEPT_NAME_BYTES`, else its first 208 bytes (fewer where that would split a UTF-8
/// character) then `~` and 16 hex digits of the SHA-256 of the whole name. Derived from the
/// name alone, so every part of condense finds the same folder without recording it.
pub fn service_stem(name: &OsStr) -> Cow<'_, OsStr> {
    let bytes = name.as_bytes();
    if bytes.len() <= KEPT_NAME_BYTES {
        return Cow::Borrowed(name);
    }
    let prefix = bytes.get(..char_boundary_at_most(bytes, KEPT_NAME_BYTES)).unwrap_or(bytes);
    let digest = Sha256::digest(bytes);
    let hash: String = digest.iter().take(STEM_HASH_HEX / 2).map(|b| format!("{b:02x}")).collect();
    let mut stem = prefix.to_vec();
    stem.push(b'~');
    stem.extend_from_slice(hash.as_bytes());
    Cow::Owned(<OsString as std::os::unix::ffi::OsStringExt>::from_vec(stem))
}

/// The longest cut of `bytes` at most `max` long that does not split a UTF-8 character
/// (bytes that are not UTF-8 are cut anywhere: there is no character to split).
fn char_boundary_at_most(bytes: &[u8], max: usize) -> usize {
    let max = max.min(bytes.len());
    // A character that would straddle the cut starts at most 3 bytes before it.
    for start in (max.saturating_sub(3)..max).rev() {
        let width = match bytes.get(start) {
            Some(0xC2..=0xDF) => 2,
            Some(0xE0..=0xEF) => 3,
            Some(0xF0..=0xF4) => 4,
            _ => continue,
        };
        let whole = bytes.get(start..start + width).is_some_and(|c| std::str::from_utf8(c).is_ok());
        if start + width > max && whole {
            return start;
        }
    }
    max
}

/// `<dir>/.<file name>.condense-partial` (the name's `service_stem`).
pub fn partial_dir_for(source: &Path) -> PathBuf {
    sibling(source, PARTIAL_SUFFIX)
}

/// Whether `dir`'s name is one `partial_dir_for` gives.
pub fn is_partial_dir(dir: &Path) -> bool {
    dir.file_name().is_some_and(|n| is_hidden(n) && n.as_bytes().ends_with(PARTIAL_SUFFIX.as_bytes()))
}

/// The source a partial output folder (`.NAME.condense-partial`) belongs to, where its
/// name says: a shortened stem cannot be turned back into its name (None); the folder's
/// source is then the job whose `partial_dir_for` it is.
pub fn source_of_partial(dir: &Path) -> Option<PathBuf> {
    let name = dir.file_name()?.as_bytes();
    let source = name.strip_prefix(b".")?.strip_suffix(PARTIAL_SUFFIX.as_bytes())?;
    (!source.is_empty() && source.len() <= KEPT_NAME_BYTES).then(|| dir.with_file_name(OsStr::from_bytes(source)))
}

/// `<dir>/.<file name>.condense-original` (the name's `service_stem`).
pub fn backup_path_for(source: &Path) -> PathBuf {
    sibling(source, BACKUP_SUFFIX)
}

/// The name of a source's `n`-th kept original: `.NAME.condense-original` for the first,
/// `.NAME.condense-original.N` after it.
pub fn numbered_backup_path(source: &Path, n: u32) -> PathBuf {
    let first = backup_path_for(source);
    if n <= 1 {
        return first;
    }
    let mut name = first.into_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// The `index`-th segment's file name inside a partial folder.
pub fn segment_file(index: u32) -> String {
    format!("seg-{index:05}.seg")
}

/// The index of a segment file, for exactly the names `segment_file` gives (a name from a
/// node is checked by this before it is used).
pub fn segment_index_of(name: &str) -> Option<u32> {
    let index = name.strip_prefix("seg-")?.strip_suffix(".seg")?.parse().ok()?;
    (segment_file(index) == name).then_some(index)
}

/// The statistics a two-pass encode's first pass writes for planned span `span`, which its
/// second pass reads (x265 adds `.cutree`, and `.temp` while writing).
pub fn pass_stats_file(span: u32) -> String {
    format!("{PASS_STATS_PREFIX}{span:05}.log")
}

const PASS_STATS_PREFIX: &str = "pass-";

/// A file of a two-pass encode's statistics (or x265's files beside them).
pub fn is_pass_stats(name: &str) -> bool {
    name.starts_with(PASS_STATS_PREFIX)
}

/// The throwaway output of a two-pass encode's first pass (only its statistics count).
pub fn first_pass_file(index: u32) -> String {
    format!("first-pass-{index:05}.seg")
}

/// The `n`-th segment file a helper writes for planned span `span` (see `media::helper`):
/// named by the span, so helpers never need a number from the run that owns the manifest.
pub fn helper_segment_file(span: u32, n: u32) -> String {
    format!("span-{span:05}-{n:03}.seg")
}

/// The planned span and number of a helper's segment file, for exactly the names
/// `helper_segment_file` gives (a name from a node is checked by this before it is used).
pub fn helper_segment_of(name: &str) -> Option<(u32, u32)> {
    let (span, n) = name.strip_prefix("span-")?.strip_suffix(".seg")?.split_once('-')?;
    let (span, n) = (span.parse().ok()?, n.parse().ok()?);
    (helper_segment_file(span, n) == name).then_some((span, n))
}

/// The first number of a helper's segment file of planned span `span` free in `dir`: a
/// helper's files are numbered after every one there, never over one.
pub fn first_free_helper_file(dir: &Path, span: u32) -> u32 {
    (0u32..).find(|n| !dir.join(helper_segment_file(span, *n)).exists()).unwrap_or(0)
}

/// The planned span a helper's file (a segment, its record, a record being written)
/// belongs to.
pub fn helper_span_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("span-")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest.get(..digits).filter(|d| !d.is_empty())?.parse().ok()
}

/// A helper's record of the segments it finished for planned span `span`, for the run that
/// owns the manifest to take in.
pub fn span_record_file(span: u32) -> String {
    format!("span-{span:05}.json")
}

/// The plan of the run that owns the partial folder, which helpers encode spans by.
pub const PLAN_FILE: &str = "plan.json";
/// A VMAF-mode run's quality search result (`media::search`).
pub const SEARCH_FILE: &str = "search.json";
/// The plan's converted and added audio tracks, encoded beside the video and copied by the
/// mux (`condense-media`'s `audio_ahead`). Written whole under `AUDIO_TEMP_FILE` first, so
/// this name holds a finished file or nothing; a resumed run keeps it.
pub const AUDIO_FILE: &str = "audio.packets";
/// `AUDIO_FILE` while it is written: a stray a resumed run removes.
pub const AUDIO_TEMP_FILE: &str = "audio.packets.tmp";

/// An output a node that does not see the library uploads into the partial folder, renamed
/// `output.<ext>` once its checksum matched (see `media::transfer`).
pub const UPLOAD_FILE: &str = "upload.part";

/// The muxed output inside a partial folder.
pub fn output_path(partial_dir: &Path, extension: &str) -> PathBuf {
    partial_dir.join(output_file_name(extension))
}

/// The muxed output's name inside a partial folder.
pub fn output_file_name(extension: &str) -> String {
    format!("output.{extension}")
}

/// Whether `name` is an output's name inside a partial folder (`output_file_name`).
pub fn is_output_file_name(name: &str) -> bool {
    name.strip_prefix("output.").is_some_and(|ext| !ext.is_empty())
}

/// Files of a partial folder that are not segments or outputs: what a transcoder's clean-up
/// of strays must leave alone.
pub fn is_bookkeeping(name: &str) -> bool {
    name == MANIFEST_FILE
        || name == LOCK_FILE
        || name == INTENT_FILE
        || name == PLAN_FILE
        || name == SEARCH_FILE
        || name == AUDIO_FILE
        || is_pass_stats(name)
}

fn sibling(source: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(service_stem(source.file_name().unwrap_or_default()));
    name.push(suffix);
    source.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_next_to_a_source() {
        let src = Path::new("/m/Movie (2020).mkv");
        let partial = partial_dir_for(src);
        assert_eq!(partial, Path::new("/m/.Movie (2020).mkv.condense-partial"));
        assert_eq!(source_of_partial(&partial).as_deref(), Some(src));
        assert_eq!(source_of_partial(Path::new("/m/.x.mkv.condense-original")), None);
        assert_eq!(backup_path_for(src), Path::new("/m/.Movie (2020).mkv.condense-original"));
        assert_eq!(numbered_backup_path(src, 1), backup_path_for(src));
        assert_eq!(numbered_backup_path(src, 2), Path::new("/m/.Movie (2020).mkv.condense-original.2"));
        assert_eq!(segment_file(7), "seg-00007.seg");
        assert_eq!(pass_stats_file(3), "pass-00003.log");
        for kept in ["pass-00003.log", "pass-00003.log.cutree", "pass-00003.log.temp", "manifest.json", AUDIO_FILE] {
            assert!(is_bookkeeping(kept), "{kept}");
        }
        assert!(!is_bookkeeping(&first_pass_file(2)) && !is_bookkeeping(&segment_file(2)));
        // Audio cut short by a kill is a stray: a resumed run removes it.
        assert!(!is_bookkeeping(AUDIO_TEMP_FILE));
        assert_eq!(output_path(&partial, "mp4"), partial.join("output.mp4"));
    }

    #[test]
    fn every_name_written_next_to_a_source_is_a_service_file() {
        let src = Path::new("/m/a.mkv");
        for path in [partial_dir_for(src), backup_path_for(src), numbered_backup_path(src, 3)] {
            assert!(is_service_file(&path), "{}", path.display());
        }
        assert!(!is_service_file(src));
        assert!(!is_service_file(Path::new("/m/condense.mkv")));
        let latin1 = Path::new(OsStr::from_bytes(b"/m/caf\xe9 cr\xe8me.mkv"));
        for path in [partial_dir_for(latin1), backup_path_for(latin1), numbered_backup_path(latin1, 3)] {
            assert!(is_service_file(&path) && is_hidden(path.file_name().unwrap()), "{}", path.display());
        }
        assert!(is_partial_dir(&partial_dir_for(latin1)));
        assert!(!is_partial_dir(&backup_path_for(latin1)));
    }

    fn named(name: &[u8]) -> PathBuf {
        Path::new("/m").join(OsStr::from_bytes(name))
    }

    fn service_names(source: &Path) -> Vec<PathBuf> {
        vec![partial_dir_for(source), backup_path_for(source), numbered_backup_path(source, u32::MAX)]
    }

    #[test]
    fn names_up_to_208_bytes_are_kept_whole_and_map_back() {
        for len in [1, 100, KEPT_NAME_BYTES] {
            let name = vec![b'a'; len];
            let source = named(&name);
            assert_eq!(service_stem(OsStr::from_bytes(&name)), OsStr::from_bytes(&name));
            assert_eq!(source_of_partial(&partial_dir_for(&source)), Some(source.clone()));
        }
        let latin1 = named(b"caf\xe9 cr\xe8me.mkv");
        assert_eq!(partial_dir_for(&latin1), named(b".caf\xe9 cr\xe8me.mkv.condense-partial"));
        assert_eq!(source_of_partial(&partial_dir_for(&latin1)), Some(latin1));
    }

    #[test]
    fn every_name_written_fits_in_255_bytes_whatever_the_source_name() {
        let mut names: Vec<Vec<u8>> = (KEPT_NAME_BYTES - 2..=MAX_NAME_BYTES).map(|n| vec![b'x'; n]).collect();
        // Multibyte characters across the cut, and bytes that are not UTF-8 there.
        for pad in 0..4 {
            let mut cjk = vec![b'y'; pad];
            while cjk.len() < MAX_NAME_BYTES - 2 {
                cjk.extend_from_slice("\u{6f22}".as_bytes());
            }
            names.push(cjk);
            let mut emoji = vec![b'z'; pad];
            while emoji.len() < MAX_NAME_BYTES - 3 {
                emoji.extend_from_slice("\u{1f3ac}".as_bytes());
            }
            names.push(emoji);
        }
        names.push([vec![0xe9; 250], b".mkv".to_vec()].concat());
        names.push([vec![b'a'; 207], vec![0xe6, 0xbc], vec![b'b'; 30]].concat());
        for name in names {
            let source = named(&name);
            for path in service_names(&source) {
                let written = path.file_name().unwrap().as_bytes();
                assert!(written.len() <= MAX_NAME_BYTES, "{} bytes for a {}-byte name", written.len(), name.len());
                assert!(is_service_file(&path) && is_hidden(path.file_name().unwrap()));
            }
            let stem = service_stem(OsStr::from_bytes(&name));
            if name.len() > KEPT_NAME_BYTES {
                // Never a name a source of its own could have kept whole.
                assert!(stem.len() > KEPT_NAME_BYTES && stem.len() <= KEPT_NAME_BYTES + 17, "{}", stem.len());
                let prefix = &stem.as_bytes()[..stem.len() - 17];
                assert!(name.starts_with(prefix));
                if std::str::from_utf8(&name).is_ok() {
                    assert!(std::str::from_utf8(stem.as_bytes()).is_ok(), "a character was split");
                }
                assert_eq!(source_of_partial(&partial_dir_for(&source)), None);
                assert!(is_partial_dir(&partial_dir_for(&source)));
            }
        }
    }

    #[test]
    fn long_names_sharing_a_prefix_get_names_of_their_own() {
        let base = vec![b'S'; 240];
        let a = named(&[base.as_slice(), b"E01.mkv"].concat());
        let b = named(&[base.as_slice(), b"E02.mkv"].concat());
        for (x, y) in service_names(&a).into_iter().zip(service_names(&b)) {
            assert_ne!(x, y);
        }
        // The same name always gives the same names: nothing needs recording.
        assert_eq!(partial_dir_for(&a), partial_dir_for(&a.clone()));
        let long = partial_dir_for(&a);
        let name = long.file_name().unwrap().as_bytes();
        assert!(name.starts_with(b".SSSS") && name.ends_with(b".condense-partial"));
        assert_eq!(name[1 + KEPT_NAME_BYTES], b'~');
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let e = "\u{e9}".as_bytes(); // 2 bytes
        let han = "\u{6f22}".as_bytes(); // 3 bytes
        let film = "\u{1f3ac}".as_bytes(); // 4 bytes
        for (bytes, max, cut) in [
            ([b"ab".as_slice(), e].concat(), 3, 2),
            ([b"ab".as_slice(), e].concat(), 4, 4),
            ([b"a".as_slice(), han].concat(), 2, 1),
            ([b"a".as_slice(), han].concat(), 3, 1),
            ([b"a".as_slice(), film].concat(), 4, 1),
            ([b"a".as_slice(), film].concat(), 5, 5),
            // Not UTF-8: a stray continuation byte or a lead byte without its tail.
            (b"a\x80\x80\x80\x80b".to_vec(), 3, 3),
            (b"a\xe6\xbcb".to_vec(), 2, 2),
            (b"abc".to_vec(), 10, 3),
        ] {
            assert_eq!(char_boundary_at_most(&bytes, max), cut, "{bytes:?} at {max}");
        }
    }
}
