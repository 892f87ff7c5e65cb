//! Encoding windows: when a node may encode. A schedule is a time zone, windows (days of
//! the week and a time range on each) and what happens to running encodes when the window
//! closes. No windows: always open. A node without a schedule of its own follows the default
//! one. Pure: `actors::scheduler` asks `is_open` with the injected clock's time.
//!
//! A window whose end is not after its start runs overnight: `{"days":["fri"],"start":"22:00",
//! "end":"07:00"}` is open from Friday 22:00 to Saturday 07:00 (its day is the day it starts);
//! an end equal to the start is a whole day. Times are local to the schedule's time zone (an
//! IANA name, `Europe/Berlin`; `UTC`), daylight saving included.

use chrono::{DateTime, Datelike, NaiveTime, Timelike, Utc};
use serde::{Deserialize, Serialize};

use super::named_enum;

named_enum! {
    /// A day of the week.
    Day, "day" {
        Mon => "mon",
        Tue => "tue",
        Wed => "wed",
        Thu => "thu",
        Fri => "fri",
        Sat => "sat",
        Sun => "sun",
    }
}

impl Day {
    fn of(day: chrono::Weekday) -> Day {
        match day {
            chrono::Weekday::Mon => Day::Mon,
            chrono::Weekday::Tue => Day::Tue,
            chrono::Weekday::Wed => Day::Wed,
            chrono::Weekday::Thu => Day::Thu,
            chrono::Weekday::Fri => Day::Fri,
            chrono::Weekday::Sat => Day::Sat,
            chrono::Weekday::Sun => Day::Sun,
        }
    }

    fn before(self) -> Day {
        match self {
            Day::Mon => Day::Sun,
            Day::Tue => Day::Mon,
            Day::Wed => Day::Tue,
            Day::Thu => Day::Wed,
            Day::Fri => Day::Thu,
            Day::Sat => Day::Fri,
            Day::Sun => Day::Sat,
        }
    }
}

named_enum! {
    /// What a closing window does to running encodes: `pause` stops them at a segment
    /// boundary (they go back to the queue and continue from there when a window opens);
    /// `finish` lets them end. Either way nothing new starts.
    OnClose, "on close" {
        Pause => "pause",
        Finish => "finish",
    }
}

/// One window: these days, from `start` to `end` (`HH:MM`, local time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Window {
    #[schema(min_items = 1)]
    pub days: Vec<Day>,
    /// `HH:MM`, 00:00 to 23:59.
    #[schema(pattern = "^(?:[01][0-9]|2[0-3]):[0-5][0-9]$")]
    pub start: String,
    /// `HH:MM`, 00:00 to 24:00; not after `start`: the window runs overnight.
    #[schema(pattern = "^(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]|24:00)$")]
    pub end: String,
}

fn pause() -> OnClose {
    OnClose::Pause
}

/// When a node may encode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Schedule {
    /// An IANA time zone name: `Europe/Berlin`, `America/New_York`, `UTC`.
    #[schema(schema_with = time_zone_names)]
    pub time_zone: String,
    /// No windows: always open. At most `MAX_WINDOWS`.
    #[schema(max_items = 50)]
    pub windows: Vec<Window>,
    #[serde(default = "pause")]
    pub on_close: OnClose,
}

/// The time zones `validate` takes: every name of the IANA database built in.
fn time_zone_names() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name())))
        .description(Some("An IANA time zone name: `Europe/Berlin`, `America/New_York`, `UTC`."))
        .build()
}

impl Default for Schedule {
    /// Always open.
    fn default() -> Self {
        Schedule { time_zone: "UTC".into(), windows: Vec::new(), on_close: OnClose::Pause }
    }
}

/// The most windows one schedule may have.
pub const MAX_WINDOWS: usize = 50;

/// `HH:MM` as a time of day; `24:00` (an end) reads as midnight.
fn time_of(text: &str, may_be_24: bool) -> Option<NaiveTime> {
    let (h, m) = text.split_once(':')?;
    // Digits only: `u32`'s parser would take a sign ("+1:00").
    if h.len() != 2 || m.len() != 2 || !h.bytes().chain(m.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    if may_be_24 && h == 24 && m == 0 {
        return NaiveTime::from_hms_opt(0, 0, 0);
    }
    NaiveTime::from_hms_opt(h, m, 0)
}

impl Window {
    fn covers(&self, day: Day, t: NaiveTime) -> bool {
        let (Some(start), Some(end)) = (time_of(&self.start, false), time_of(&self.end, true)) else { return false };
        if start < end {
            self.days.contains(&day) && start <= t && t < end
        } else {
            (self.days.contains(&day) && t >= start) || (self.days.contains(&day.before()) && t < end)
        }
    }
}

impl Schedule {
    /// Whether a node following this schedule may encode at `at`.
    pub fn is_open(&self, at: DateTime<Utc>) -> bool {
        if self.windows.is_empty() {
            return true;
        }
        // Checked when set; a zone this build does not know reads as UTC.
        let local = match self.time_zone.parse::<chrono_tz::Tz>() {
            Ok(tz) => at.with_timezone(&tz).naive_local(),
            Err(_) => at.naive_utc(),
        };
        let t = NaiveTime::from_hms_opt(local.hour(), local.minute(), local.second()).unwrap_or_default();
        self.windows.iter().any(|w| w.covers(Day::of(local.weekday()), t))
    }

    /// Checks a schedule as a user sets it.
    pub fn validate(&self) -> Result<(), String> {
        if self.time_zone.parse::<chrono_tz::Tz>().is_err() {
            return Err(format!(
                "timeZone {:?} is not an IANA time zone name (such as Europe/Berlin or UTC)",
                self.time_zone
            ));
        }
        if self.windows.len() > MAX_WINDOWS {
            return Err(format!("at most {MAX_WINDOWS} windows"));
        }
        for (i, w) in self.windows.iter().enumerate() {
            if w.days.is_empty() {
                return Err(format!("windows[{i}]: name at least one day"));
            }
            if time_of(&w.start, false).is_none() {
                return Err(format!("windows[{i}].start {:?} is not a time HH:MM (00:00 to 23:59)", w.start));
            }
            if time_of(&w.end, true).is_none() {
                return Err(format!("windows[{i}].end {:?} is not a time HH:MM (00:00 to 24:00)", w.end));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().into()
    }

    fn window(days: &[Day], start: &str, end: &str) -> Window {
        Window { days: days.to_vec(), start: start.into(), end: end.into() }
    }

    fn schedule(zone: &str, windows: Vec<Window>) -> Schedule {
        Schedule { time_zone: zone.into(), windows, on_close: OnClose::Pause }
    }

    #[test]
    fn no_windows_is_always_open() {
        assert!(Schedule::default().is_open(at("2026-11-26T03:00:00Z")));
    }

    #[test]
    fn a_day_window_is_open_from_its_start_to_before_its_end() {
        // 2026-11-25 is a Wednesday.
        let s = schedule("UTC", vec![window(&[Day::Wed], "09:00", "17:00")]);
        assert!(!s.is_open(at("2026-11-25T08:59:59Z")));
        assert!(s.is_open(at("2026-11-25T09:00:00Z")));
        assert!(s.is_open(at("2026-11-25T16:59:59Z")));
        assert!(!s.is_open(at("2026-11-25T17:00:00Z")));
        assert!(!s.is_open(at("2026-11-26T10:00:00Z")), "Thursday is not in it");
    }

    #[test]
    fn an_overnight_window_belongs_to_the_day_it_starts() {
        let s = schedule("UTC", vec![window(&[Day::Fri], "22:00", "07:00")]);
        assert!(s.is_open(at("2026-11-27T22:00:00Z")), "Friday night");
        assert!(s.is_open(at("2026-11-28T06:59:00Z")), "Saturday morning");
        assert!(!s.is_open(at("2026-11-28T07:00:00Z")));
        assert!(!s.is_open(at("2026-11-27T06:00:00Z")), "Friday morning belongs to Thursday's night");
        // Sunday night runs into Monday: the week wraps.
        let s = schedule("UTC", vec![window(&[Day::Sun], "23:00", "01:00")]);
        assert!(s.is_open(at("2026-11-30T00:30:00Z")));
        let whole = schedule("UTC", vec![window(&[Day::Sat], "00:00", "00:00")]);
        assert!(whole.is_open(at("2026-11-28T23:59:00Z")) && !whole.is_open(at("2026-11-29T00:00:00Z")));
        let until_midnight = schedule("UTC", vec![window(&[Day::Sat], "20:00", "24:00")]);
        assert!(
            until_midnight.is_open(at("2026-11-28T23:59:00Z")) && !until_midnight.is_open(at("2026-11-29T00:00:00Z"))
        );
    }

    #[test]
    fn times_are_the_zones_own_with_daylight_saving() {
        let s = schedule("Europe/Berlin", vec![window(Day::ALL, "22:00", "07:00")]);
        // Winter: UTC+1. 21:30 UTC is 22:30 in Berlin.
        assert!(s.is_open(at("2026-11-25T21:30:00Z")));
        assert!(!s.is_open(at("2026-11-25T20:30:00Z")));
        // Summer: UTC+2. 20:30 UTC is 22:30 in Berlin; 05:30 UTC is 07:30.
        assert!(s.is_open(at("2026-07-01T20:30:00Z")));
        assert!(!s.is_open(at("2026-07-01T05:30:00Z")));
    }

    #[test]
    fn schedules_are_checked_as_set() {
        assert!(schedule("Europe/Berlin", vec![window(&[Day::Mon], "22:00", "07:00")]).validate().is_ok());
        assert!(schedule("Mars/Olympus", vec![]).validate().is_err());
        assert!(schedule("UTC", vec![window(&[], "22:00", "07:00")]).validate().is_err());
        assert!(schedule("UTC", vec![window(&[Day::Mon], "25:00", "07:00")]).validate().is_err());
        assert!(schedule("UTC", vec![window(&[Day::Mon], "22:00", "7:00")]).validate().is_err());
        assert!(schedule("UTC", vec![window(&[Day::Mon], "24:00", "07:00")]).validate().is_err());
        assert!(schedule("UTC", vec![window(&[Day::Mon], "20:00", "24:00")]).validate().is_ok());
        let json = serde_json::json!({"timeZone": "UTC", "windows": [{"days": ["mon", "sun"], "start": "22:00", "end": "07:00"}]});
        let parsed: Schedule = serde_json::from_value(json).unwrap();
        assert_eq!(parsed.on_close, OnClose::Pause);
        assert_eq!(parsed.windows[0].days, [Day::Mon, Day::Sun]);
    }
}
