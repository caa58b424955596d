//! Parsing `snowflake_id.epoch`.
//!
//! The epoch is read in the postmaster while shared libraries are preloaded,
//! before any database is open, so it is parsed here rather than with
//! PostgreSQL's `timestamptz_in`. That also keeps it independent of the
//! `TimeZone` setting: a literal without a zone means UTC, because the epoch is
//! a constant of the ID format and must not move with a session's time zone.
//!
//! Accepted: `YYYY-MM-DD`, optionally followed by ` ` or `T` and
//! `HH:MM[:SS[.fraction]]`, optionally followed by a zone: `Z`, `UTC`,
//! `+HH`, `+HHMM` or `+HH:MM` (or `-`). Fractions below a millisecond must be
//! zero: an epoch is a whole millisecond.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("snowflake_id.epoch = '{text}' is not a valid timestamp: {reason}; write it like '2025-01-01 00:00:00+00'")]
pub struct EpochError {
    pub text: String,
    pub reason: &'static str,
}

/// Milliseconds from 1970-01-01 UTC to 2000-01-01 UTC, PostgreSQL's own epoch.
pub const UNIX_TO_POSTGRES_MS: i64 = 946_684_800_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`): the inverse of [`days_from_civil`].
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A time in milliseconds since 1970 as UTC text,
/// `2026-11-23 14:05:09.123 UTC`, for messages written where PostgreSQL's
/// own timestamp output cannot be called.
pub fn utc_text(unix_ms: i64) -> String {
    let days = unix_ms.div_euclid(86_400_000);
    let ms = unix_ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}.{:03} UTC",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

struct Cursor<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, min: usize, max: usize) -> Option<(i64, usize)> {
        let start = self.pos;
        let mut value: i64 = 0;
        while self.pos < self.text.len()
            && self.pos - start < max
            && self.text[self.pos].is_ascii_digit()
        {
            value = value * 10 + i64::from(self.text[self.pos] - b'0');
            self.pos += 1;
        }
        let n = self.pos - start;
        (n >= min).then_some((value, n))
    }
    fn eat(&mut self, c: u8) -> bool {
        if self.text.get(self.pos) == Some(&c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn rest(&self) -> &[u8] {
        &self.text[self.pos..]
    }
}

/// Parses an epoch literal into milliseconds since 1970-01-01 UTC.
pub fn parse_epoch(text: &str) -> Result<i64, EpochError> {
    let err = |reason| EpochError {
        text: crate::core::text_forms::excerpt(text),
        reason,
    };
    let trimmed = text.trim();
    let mut c = Cursor {
        text: trimmed.as_bytes(),
        pos: 0,
    };

    let (year, _) = c
        .digits(4, 4)
        .ok_or_else(|| err("expected a four-digit year"))?;
    if !c.eat(b'-') {
        return Err(err("expected '-' after the year"));
    }
    let (month, _) = c
        .digits(2, 2)
        .ok_or_else(|| err("expected a two-digit month"))?;
    if !c.eat(b'-') {
        return Err(err("expected '-' after the month"));
    }
    let (day, _) = c
        .digits(2, 2)
        .ok_or_else(|| err("expected a two-digit day"))?;
    if !(1..=12).contains(&month) {
        return Err(err("the month is out of range"));
    }
    let (month, day) = (month as u32, day as u32);
    if day == 0 || day > days_in_month(year, month) {
        return Err(err("the day is out of range"));
    }

    let mut ms_of_day: i64 = 0;
    if c.eat(b' ') || c.eat(b'T') {
        let (h, _) = c
            .digits(2, 2)
            .ok_or_else(|| err("expected a two-digit hour"))?;
        if !c.eat(b':') {
            return Err(err("expected ':' after the hour"));
        }
        let (mi, _) = c
            .digits(2, 2)
            .ok_or_else(|| err("expected two-digit minutes"))?;
        let mut s = 0;
        let mut frac_ms = 0;
        if c.eat(b':') {
            s = c
                .digits(2, 2)
                .ok_or_else(|| err("expected two-digit seconds"))?
                .0;
            if c.eat(b'.') {
                let (f, n) = c
                    .digits(1, 9)
                    .ok_or_else(|| err("expected digits after '.'"))?;
                // Scale to nanoseconds, then insist on a whole millisecond.
                let nanos = f * 10i64.pow(9 - n as u32);
                if nanos % 1_000_000 != 0 {
                    return Err(err("the epoch must be a whole millisecond"));
                }
                frac_ms = nanos / 1_000_000;
            }
        }
        if h > 23 || mi > 59 || s > 59 {
            return Err(err("the time of day is out of range"));
        }
        ms_of_day = ((h * 60 + mi) * 60 + s) * 1000 + frac_ms;
    }

    let mut offset_ms: i64 = 0;
    let rest = c.rest();
    let rest_str = std::str::from_utf8(rest).unwrap_or("");
    let zone = rest_str.trim_start();
    if zone.eq_ignore_ascii_case("z") || zone.eq_ignore_ascii_case("utc") || zone.is_empty() {
        // UTC
    } else {
        let mut z = Cursor {
            text: zone.as_bytes(),
            pos: 0,
        };
        let sign = if z.eat(b'+') {
            1
        } else if z.eat(b'-') {
            -1
        } else {
            return Err(err("expected a zone such as +00, +02:00, Z or UTC"));
        };
        let (oh, _) = z
            .digits(2, 2)
            .ok_or_else(|| err("expected a two-digit zone hour"))?;
        z.eat(b':');
        let om = if z.rest().is_empty() {
            0
        } else {
            z.digits(2, 2)
                .ok_or_else(|| err("expected two-digit zone minutes"))?
                .0
        };
        if !z.rest().is_empty() {
            return Err(err("unexpected text after the zone"));
        }
        if oh > 15 || om > 59 {
            return Err(err("the zone offset is out of range"));
        }
        offset_ms = sign * (oh * 60 + om) * 60_000;
    }

    Ok(days_from_civil(year, month, day) * 86_400_000 + ms_of_day - offset_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_epoch() {
        assert_eq!(parse_epoch("2025-01-01 00:00:00+00"), Ok(1_735_689_600_000));
    }

    #[test]
    fn forms_and_zones() {
        let base = 1_735_689_600_000;
        for text in [
            "2025-01-01",
            "2025-01-01 00:00",
            "2025-01-01T00:00:00Z",
            "2025-01-01 00:00:00 UTC",
            "2025-01-01 00:00:00.000",
            " 2025-01-01 00:00:00+00:00 ",
            "2025-01-01 01:00:00+01",
            "2024-12-31 19:30:00-0430",
        ] {
            assert_eq!(parse_epoch(text), Ok(base), "{text}");
        }
        assert_eq!(parse_epoch("2025-01-01 00:00:00.25"), Ok(base + 250));
        assert_eq!(parse_epoch("1970-01-01"), Ok(0));
        assert_eq!(parse_epoch("2000-01-01"), Ok(UNIX_TO_POSTGRES_MS));
        assert_eq!(
            parse_epoch("2010-11-04 01:42:54.657+00"),
            Ok(1_288_834_974_657)
        );
        assert_eq!(parse_epoch("2024-02-29"), Ok(1_709_164_800_000));
    }

    #[test]
    fn rejects_garbage() {
        for text in [
            "",
            "yesterday",
            "2025-13-01",
            "2025-02-29",
            "2025-01-01 24:00:00",
            "2025-01-01 00:00:00.0001",
            "2025-01-01 00:00:00 CET",
            "2025-01-01 00:00:00+00 junk",
            "25-01-01",
        ] {
            let e = parse_epoch(text).unwrap_err();
            assert!(e.to_string().contains("snowflake_id.epoch"), "{e}");
        }
    }

    #[test]
    fn days_from_civil_matches_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
    }

    #[test]
    fn utc_text_inverts_days_from_civil() {
        assert_eq!(utc_text(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(utc_text(1_735_689_600_000), "2025-01-01 00:00:00.000 UTC");
        assert_eq!(utc_text(1_795_442_709_123), "2026-11-23 14:05:09.123 UTC");
        assert_eq!(utc_text(951_782_400_000), "2000-02-29 00:00:00.000 UTC");
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
