//! Time as rwfs writes and reads it: one stamp for the journal, one parser for every time a
//! person or an agent gives (`--to`, `--since`, `--at`, a `REV`, the page's and the MCP tools'
//! arguments) and for the times rwfs reads back (journal rows, checkpoint and handoff fields).
//!
//! - [`stamp`]: a journal row's `ts`, RFC 3339 in UTC with microseconds
//!   (`2026-11-24T10:02:11.123456Z`): an agent session fits in a second, so whole seconds could
//!   not tell its rows apart (`rwfs rewind --to` a time inside it).
//! - [`seconds`]: the reference's whole-second form (`2026-11-24T10:02:11Z`), for the fields the
//!   reference's tools return and for names made of a time.
//! - [`parse`]: RFC 3339 with `Z`, a numeric offset (`+02:00`, `+0200`, `+02`) or no zone (UTC),
//!   `T` or a space between date and time, any fraction of a second; or a bare date (midnight
//!   UTC). Rows written before sub-second stamps (`…:11Z`) read as they always did.
//! - [`parse_at`]: [`parse`], or a duration ago (`10m`, `2h 30m`, `90s ago`), for the CLI.
//!
//! It does no I/O and keeps no state; the clock is read only by [`now`] and [`parse_at`].

use std::time::{Duration, SystemTime};

use crate::error::{Reason, Result};

/// A journal row's time for now.
pub fn now() -> String {
    stamp(SystemTime::now())
}

/// `t` as a journal row's time: RFC 3339, UTC, microseconds.
pub fn stamp(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

/// `t` in the reference's whole-second form, `%Y-%m-%dT%H:%M:%SZ`.
pub fn seconds(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A time as RFC 3339 (see the module docs), or `None`.
pub fn parse(input: &str) -> Option<SystemTime> {
    let s = input.trim();
    if s.len() == 10 {
        return humantime::parse_rfc3339_weak(&format!("{s}T00:00:00Z")).ok();
    }
    let tail = s.get(19..)?;
    let (body, offset) = match s.strip_suffix(['Z', 'z']) {
        Some(body) => (body, 0i64),
        None => match tail.rfind(['+', '-']) {
            Some(i) => (&s[..19 + i], parse_offset(&tail[i..])?),
            None => (s, 0),
        },
    };
    let local = humantime::parse_rfc3339_weak(body).ok()?;
    let shift = Duration::from_secs(offset.unsigned_abs());
    if offset >= 0 { local.checked_sub(shift) } else { local.checked_add(shift) }
}

/// A time as [`parse`] reads it, or a duration before `now` (`10m`, `2h 30m`, `10m ago`).
pub fn parse_at(input: &str, now: SystemTime) -> Result<SystemTime> {
    if let Some(t) = parse(input) {
        return Ok(t);
    }
    let s = input.trim();
    let ago = s.strip_suffix(" ago").unwrap_or(s);
    humantime::parse_duration(ago).ok().and_then(|d| now.checked_sub(d)).ok_or_else(|| {
        Reason::InvalidArgument {
            what: "time (RFC 3339 such as 2026-11-24T10:02:11.5Z or +02:00, \"YYYY-MM-DD HH:MM:SS\" UTC, a date, or a duration such as 10m)",
        }
        .into()
    })
}

/// `+HH:MM`, `+HHMM` or `+HH` (or `-`): seconds east of UTC.
fn parse_offset(s: &str) -> Option<i64> {
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = s[1..].chars().filter(|c| *c != ':').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) || s[1..].len() > 5 {
        return None;
    }
    let hours: i64 = digits[..2].parse().ok()?;
    let minutes: i64 = if digits.len() == 4 { digits[2..].parse().ok()? } else { 0 };
    (hours <= 23 && minutes <= 59).then_some(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every form a person, an agent or an old journal gives, and what it must read as (a
    /// stamp, or `None` for "refused").
    #[test]
    fn every_form_reads_as_one_table_says() {
        let now = parse("2026-11-24T12:00:00Z").unwrap();
        let table: &[(&str, Option<&str>)] = &[
            // journal stamps, old and new
            ("2026-11-24T10:02:11Z", Some("2026-11-24T10:02:11.000000Z")),
            ("2026-11-24T10:02:11.123456Z", Some("2026-11-24T10:02:11.123456Z")),
            ("2026-11-24T10:02:11.5Z", Some("2026-11-24T10:02:11.500000Z")),
            ("2026-11-24T10:02:11.123456789Z", Some("2026-11-24T10:02:11.123456Z")),
            ("2026-11-24T10:02:11z", Some("2026-11-24T10:02:11.000000Z")),
            // zones and offsets
            ("2026-11-24T12:02:11+02:00", Some("2026-11-24T10:02:11.000000Z")),
            ("2026-11-24T12:02:11.25+02:00", Some("2026-11-24T10:02:11.250000Z")),
            ("2026-11-24T05:02:11-0500", Some("2026-11-24T10:02:11.000000Z")),
            ("2026-11-24T11:02:11+01", Some("2026-11-24T10:02:11.000000Z")),
            ("2026-11-24T10:02:11+00:00", Some("2026-11-24T10:02:11.000000Z")),
            ("2026-11-24T10:02:11", Some("2026-11-24T10:02:11.000000Z")),
            ("2026-11-24 10:02:11", Some("2026-11-24T10:02:11.000000Z")),
            ("2026-11-24 10:02:11.75", Some("2026-11-24T10:02:11.750000Z")),
            (" 2026-11-24T10:02:11.000Z ", Some("2026-11-24T10:02:11.000000Z")),
            ("2026-11-24", Some("2026-11-24T00:00:00.000000Z")),
            // durations ago (parse_at only)
            ("10m", Some("2026-11-24T11:50:00.000000Z")),
            ("2h 30m", Some("2026-11-24T09:30:00.000000Z")),
            ("90s ago", Some("2026-11-24T11:58:30.000000Z")),
            ("250ms", Some("2026-11-24T11:59:59.750000Z")),
            // refused
            ("", None),
            ("yesterday", None),
            ("2026-13-01", None),
            ("2026-11-24T10:02:11+25:00", None),
            ("2026-11-24T10:02:11+2", None),
            ("2026-11-24T10:02:11+2:00", None),
            ("2026-11-24T1€:02:11Z", None),
            ("2026-11-24T10:02:11€€", None),
        ];
        for (input, expect) in table {
            let got = parse_at(input, now).ok().map(stamp);
            assert_eq!(got.as_deref(), *expect, "parse_at({input:?})");
            let absolute = expect.filter(|_| input.trim().starts_with("20"));
            assert_eq!(parse(input).map(stamp).as_deref(), absolute, "parse({input:?})");
        }
    }

    #[test]
    fn a_stamp_reads_back_as_itself_and_orders_within_a_second() {
        let a = SystemTime::UNIX_EPOCH + Duration::from_micros(1_795_000_000_123_456);
        let b = a + Duration::from_micros(1);
        assert_eq!(parse(&stamp(a)), Some(a));
        assert!(parse(&stamp(a)) < parse(&stamp(b)));
        assert_eq!(seconds(a), "2026-11-18T11:06:40Z");
        assert_ne!(stamp(a), stamp(b));
    }
}
