//! Schemas of request fields whose rules a derive cannot state with literals: names the
//! server trims before it counts them, names of closed sets it reads in any case, lists of
//! them in one query parameter. Each builds the regular expression from the same facts the
//! handler checks (the limit, the names), so the document states exactly what is accepted.
//! Patterns spell their classes out (no `\s`, no `\p{…}`): the dialects that read them
//! (the server's tests, JavaScript, Python) disagree on what those mean.
//!
//! And the one reading rule the derive gets wrong: an `integer` of JSON Schema is any
//! number without a fraction, `8.0` as well as `8`, where serde's integers refuse `8.0`
//! (`whole_number`).

use serde::Deserialize;
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};

/// Whitespace as `str::trim` sees it (Unicode `White_Space`).
const SPACE: &str = r"\t\n\x0B\x0C\r \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";
/// Control characters, as `char::is_control` sees them (Unicode `Cc`).
const CONTROL: &str = r"\x00-\x1F\x7F-\x9F";

/// Reads a JSON number without a fraction (`8` or `8.0`) as an `i64`, as JSON Schema's
/// `integer` describes it; `8.5`, or a number past `i64`, is refused as a wrong type.
pub fn whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    // Bounds as floats: i64::MAX is not one, 2^63 is the first float past it.
    const PAST_MAX: f64 = 9_223_372_036_854_775_808.0;
    let number = serde_json::Number::deserialize(deserializer)?;
    if let Some(whole) = number.as_i64() {
        return Ok(whole);
    }
    match number.as_f64() {
        // A whole float within i64: the cast is exact.
        Some(float) if float.fract() == 0.0 && (-PAST_MAX..PAST_MAX).contains(&float) => Ok(float as i64),
        _ => Err(serde::de::Error::invalid_type(serde::de::Unexpected::Other(&number.to_string()), &"a whole number")),
    }
}

/// `whole_number` for an optional field (absent or null: `None`); with `#[serde(default)]`.
pub fn optional_whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    #[derive(serde::Deserialize)]
    struct Whole(#[serde(deserialize_with = "whole_number")] i64);
    Ok(Option::<Whole>::deserialize(deserializer)?.map(|Whole(n)| n))
}

/// A body read as a JSON object first, then as `T`. serde reads a struct from an array of
/// its fields in order too (`[null, null]` for a body whose fields are all optional), which
/// no schema of an object allows; read so, an array is refused like any other wrong type.
pub fn from_object<T: serde::de::DeserializeOwned>(
    fields: serde_json::Map<String, serde_json::Value>,
) -> Result<T, crate::error::AppError> {
    serde_json::from_value(serde_json::Value::Object(fields))
        .map_err(|e| crate::error::AppError::Unprocessable { code: "invalid_body", message: e.to_string() })
}

/// A whole number from `min` up to what the server reads (`u64`): a query parameter whose
/// larger values are served as the largest the server gives (a page size).
pub fn unsigned_from(min: u64) -> Object {
    ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(min)).maximum(Some(u64::MAX)).build()
}

/// A listing's `pageSize`: from 1 up to what the server reads, larger values served as
/// `domain::paging::MAX_PAGE_SIZE` (a schema-valid size is never refused); `default` when
/// none is given.
pub fn page_size(default: u64) -> Object {
    let max = crate::domain::paging::MAX_PAGE_SIZE;
    described(unsigned_from(1), &format!("Default {default}; values above {max} are served as {max}."))
}

fn text(pattern: String) -> Object {
    ObjectBuilder::new().schema_type(Type::String).pattern(Some(pattern)).build()
}

/// `object` with `text` as its description: a field whose schema is built here loses the
/// one its doc comment would give.
pub fn described(mut object: Object, text: &str) -> Object {
    object.description = Some(text.to_string());
    object
}

/// `object`, or null: an optional field of a body, which serde takes as null too.
pub fn or_null(mut object: Object) -> Object {
    object.schema_type = SchemaType::from_iter([Type::String, Type::Null]);
    object
}

/// A name the server trims, then takes when it is 1 to `max_chars` characters (and, unless
/// `controls`, holds no control character). The bound is in the pattern, not `maxLength`:
/// spaces around a name do not count.
pub fn trimmed_name(max_chars: usize, controls: bool) -> Object {
    let (edge, inner) = if controls {
        (format!("[^{SPACE}]"), r"[\s\S]".to_string())
    } else {
        (format!("[^{SPACE}{CONTROL}]"), format!("[^{CONTROL}]"))
    };
    let middle = max_chars.saturating_sub(2);
    text(format!("^[{SPACE}]*{edge}(?:{inner}{{0,{middle}}}{edge})?[{SPACE}]*$"))
}

/// A name the server takes as it is: 1 to `max_chars` characters, none of them `/` or a
/// control character, and no space at either end.
pub fn untrimmed_name(max_chars: usize) -> Object {
    let edge = format!("[^{SPACE}{CONTROL}/]");
    let inner = format!("[^{CONTROL}/]");
    let middle = max_chars.saturating_sub(2);
    text(format!("^{edge}(?:{inner}{{0,{middle}}}{edge})?$"))
}

/// A URL the server trims, then takes when it starts with one of `schemes` (`http`,
/// `https`, …) and `://`, and is at least 10 characters long (`domain::notify::validate`,
/// `domain::connect::validate`); what else it must be depends on its kind.
pub fn url_of(schemes: &[&str]) -> Object {
    text(format!("^[{SPACE}]*(?:{})://[\\s\\S]{{3,}}$", schemes.join("|")))
}

/// Text with a character besides whitespace in it: what the server takes of a key it trims.
pub fn not_blank() -> Object {
    text(format!("[^{SPACE}]"))
}

/// A non-empty list of `names` (repeats allowed: the server drops them): the events a
/// notification target may subscribe to.
pub fn non_empty_list_of(names: &[&str]) -> utoipa::openapi::schema::Array {
    let item = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(names.iter().copied())).build();
    utoipa::openapi::schema::ArrayBuilder::new().items(item).min_items(Some(1)).build()
}

/// A library's folders: 1 to `max` absolute paths (each must also name an existing
/// directory, none inside another, which no schema can say); null too where `nullable`.
pub fn absolute_paths(max: usize, nullable: bool) -> utoipa::openapi::schema::Array {
    let mut array = utoipa::openapi::schema::ArrayBuilder::new()
        .items(text("^/".to_string()))
        .min_items(Some(1))
        .max_items(Some(max))
        .description(Some("Absolute paths of existing directories, none inside another."))
        .build();
    if nullable {
        array.schema_type = SchemaType::from_iter([Type::Array, Type::Null]);
    }
    array
}

/// Extra request headers: names of token characters (RFC 9110), values without a line
/// break (`domain::notify::valid_header`).
pub fn headers() -> Object {
    let value = text(r"^[^\r\n]*$".to_string());
    let mut object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::RefOr(value.into())))
        .property_names(Some(text(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$".to_string())))
        .build();
    object.description = Some("Extra request headers (webhook, ntfy, Gotify, Apprise).".to_string());
    object
}

/// One of `names`, in any case (the server compares them so).
pub fn any_case_one_of(names: &[&str]) -> Object {
    text(format!("^(?:{})$", alternatives(names)))
}

/// A comma-separated list of `names`, in any case, spaces around each and empty items
/// allowed (the server skips them).
pub fn any_case_list_of(names: &[&str]) -> Object {
    let item = format!("[{SPACE}]*(?:{})?[{SPACE}]*", alternatives(names));
    text(format!("^{item}(?:,{item})*$"))
}

fn alternatives(names: &[&str]) -> String {
    names.iter().map(|name| any_case(name)).collect::<Vec<_>>().join("|")
}

/// `name` as a pattern that matches it in any ASCII case.
fn any_case(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
            } else if c.is_ascii_alphanumeric() || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(object: Object) -> regex::Regex {
        regex::Regex::new(object.pattern.as_deref().unwrap()).unwrap()
    }

    #[test]
    fn header_names_and_values_are_documented_as_the_server_takes_them() {
        let headers = serde_json::to_value(headers()).unwrap();
        let regex = |at: &str| regex::Regex::new(headers[at]["pattern"].as_str().unwrap()).unwrap();
        let (name, value) = (regex("propertyNames"), regex("additionalProperties"));
        for c in (0u8..=255).map(char::from) {
            let text = format!("a{c}b");
            let server = crate::domain::notify::valid_header(&text, "v");
            assert_eq!(name.is_match(&text), server, "name {text:?}");
            let server = crate::domain::notify::valid_header("X-A", &text);
            assert_eq!(value.is_match(&text), server, "value {text:?}");
        }
        assert!(!name.is_match("") && !crate::domain::notify::valid_header("", "v"));
    }

    /// The server's rule for a trimmed name, as the handlers write it.
    fn takes(name: &str, max: usize, controls: bool) -> bool {
        let name = name.trim();
        let chars = name.chars().count();
        chars >= 1 && chars <= max && (controls || !name.chars().any(char::is_control))
    }

    #[test]
    fn a_trimmed_name_pattern_accepts_exactly_what_the_server_takes() {
        let long = "a".repeat(100);
        let too_long = "a".repeat(101);
        let cases = [
            "a",
            " a ",
            "\ta\n",
            "",
            " ",
            "\u{3000}",
            "a b",
            "a\u{7}b",
            "\u{85}a",
            "é",
            &long,
            &too_long,
            &format!("  {long}  "),
            &format!("a{}", " ".repeat(120)),
            "\u{feff}",
        ];
        for controls in [false, true] {
            let re = pattern(trimmed_name(100, controls));
            for name in cases {
                assert_eq!(re.is_match(name), takes(name, 100, controls), "{name:?} (controls {controls})");
            }
        }
    }

    #[test]
    fn an_untrimmed_name_pattern_refuses_spaces_at_the_ends_slashes_and_controls() {
        let re = pattern(untrimmed_name(4));
        for ok in ["a", "ab", "a b", "abcd", "é.x"] {
            assert!(re.is_match(ok), "{ok:?}");
        }
        for refused in ["", " a", "a ", "a/b", "a\u{1}", "abcde", "\u{a0}a"] {
            assert!(!re.is_match(refused), "{refused:?}");
        }
    }

    #[test]
    fn a_whole_number_may_be_written_with_a_zero_fraction() {
        #[derive(Debug, serde::Deserialize)]
        struct Body {
            #[serde(deserialize_with = "whole_number")]
            n: i64,
            #[serde(default, deserialize_with = "optional_whole_number")]
            m: Option<i64>,
        }
        let read = |json: &str| serde_json::from_str::<Body>(json).map(|b| (b.n, b.m));
        assert_eq!(read(r#"{"n": 8}"#).unwrap(), (8, None));
        assert_eq!(read(r#"{"n": -8.0, "m": 711.0}"#).unwrap(), (-8, Some(711)));
        assert_eq!(read(r#"{"n": 1e3, "m": null}"#).unwrap(), (1000, None));
        for refused in [r#"{"n": 8.5}"#, r#"{"n": 1e300}"#, r#"{"n": "8"}"#, r#"{"n": 1, "m": 0.5}"#] {
            let error = read(refused).unwrap_err();
            assert!(error.is_data(), "{refused}: {error}");
        }
    }

    #[test]
    fn closed_sets_match_in_any_case_and_lists_skip_empty_items() {
        let one = pattern(any_case_one_of(&["createdAt", "fileName"]));
        assert!(one.is_match("createdat") && one.is_match("FILENAME"));
        assert!(!one.is_match("created") && !one.is_match("createdAt,fileName"));
        let list = pattern(any_case_list_of(&["QUEUED", "FAILED"]));
        for ok in ["", "queued", "QUEUED,failed", " QUEUED , ,FAILED,", ","] {
            assert!(list.is_match(ok), "{ok:?}");
        }
        for refused in ["QUEUE", "QUEUED FAILED", "QUEUED;FAILED"] {
            assert!(!list.is_match(refused), "{refused:?}");
        }
    }
}
