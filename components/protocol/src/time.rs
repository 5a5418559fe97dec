//! RFC 3339 timestamps (UTC, milliseconds) and HTTP dates, on the `time` and `httpdate` crates.

use std::time::{Duration, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Formats milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_ms(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    let t = OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let (date, clock) = (t.date(), t.time());
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        date.year(),
        u8::from(date.month()),
        date.day(),
        clock.hour(),
        clock.minute(),
        clock.second(),
        clock.millisecond()
    )
}

/// Formats milliseconds since the Unix epoch as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn http_date(ms: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(ms))
}

/// Parses an RFC 3339 timestamp (any offset, any number of fractional digits) into milliseconds since the
/// Unix epoch; `None` when malformed, not a calendar date, or before 1970.
pub fn parse_rfc3339_ms(s: &str) -> Option<u64> {
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_epoch_and_known_dates() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_790_000_000_123), "2026-09-21T14:13:20.123Z");
        assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn http_dates() {
        assert_eq!(http_date(784_111_777_000), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn parses_what_it_formats() {
        for ms in [
            0,
            1,
            999,
            951_782_400_000,
            1_790_000_000_123,
            4_102_444_800_000,
        ] {
            assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Some(ms));
        }
    }

    #[test]
    fn parses_fraction_lengths_and_offsets() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(
            parse_rfc3339_ms("1970-01-01T00:00:01.123456789Z"),
            Some(1123)
        );
        assert_eq!(
            parse_rfc3339_ms("1970-01-01T00:00:01.1239999999999Z"),
            Some(1123),
            "RFC 3339 bounds no fraction length"
        );
        assert_eq!(parse_rfc3339_ms("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(
            parse_rfc3339_ms("1970-01-01T00:00:00-00:30"),
            Some(1_800_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2026-03-01T00:30:00+01:00"),
            Some(1_772_321_400_000),
            "the offset moves the date back"
        );
    }

    #[test]
    fn leap_years() {
        assert!(
            parse_rfc3339_ms("2024-02-29T00:00:00Z").is_some(),
            "divisible by 4"
        );
        assert!(
            parse_rfc3339_ms("2000-02-29T00:00:00Z").is_some(),
            "divisible by 400"
        );
        assert_eq!(
            parse_rfc3339_ms("1900-02-29T00:00:00Z"),
            None,
            "divisible by 100, not by 400"
        );
        assert_eq!(parse_rfc3339_ms("2026-02-29T00:00:00Z"), None);
        assert_eq!(
            parse_rfc3339_ms("2024-02-29T00:00:00Z"),
            Some(1_709_164_800_000)
        );
    }

    #[test]
    fn days_past_the_end_of_their_month_are_refused() {
        for s in [
            "2026-02-30T00:00:00Z",
            "2026-02-31T00:00:00Z",
            "2024-02-30T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-06-31T00:00:00Z",
            "2026-01-32T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339_ms(s), None, "{s}");
        }
        assert!(parse_rfc3339_ms("2026-01-31T00:00:00Z").is_some());
    }

    #[test]
    fn second_60_only_as_a_leap_second() {
        // RFC 3339 allows 60 only for a leap second, which ends a UTC day; millisecond time has
        // no place for it, so it reads as the last millisecond of its minute.
        assert_eq!(
            parse_rfc3339_ms("2016-12-31T23:59:60Z"),
            parse_rfc3339_ms("2016-12-31T23:59:59.999Z")
        );
        assert_eq!(
            parse_rfc3339_ms("2026-01-01T12:00:60Z"),
            None,
            "not at the end of a UTC day"
        );
        assert_eq!(parse_rfc3339_ms("2026-01-01T00:00:61Z"), None);
    }

    #[test]
    fn rejects_malformed() {
        for s in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00.Z",
            "1969-12-31T23:59:59Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T23:60:00Z",
            "+026-01-01T00:00:00Z",
            "26-01-01T00:00:00Z",
            "2026-01-01T00:00:00+24:00",
            "2026-01-01T00:00:00+01:60",
            "2026-01-01T00:00:00+-1:00",
            "2026-01-01T00:00:00+0100",
        ] {
            assert_eq!(parse_rfc3339_ms(s), None, "{s}");
        }
    }
}
