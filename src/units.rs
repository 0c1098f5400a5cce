//! Parsing and printing of the sizes and durations that limit flags take
//! (`-max-package-size=512MiB`, `-download-stall-timeout=45s`), so users
//! need not count bytes or guess the unit.

use std::time::Duration;

/// A byte count: a plain number, or one with a unit. `KiB`/`MiB`/`GiB` (and
/// the short `K`/`M`/`G`) are powers of 1024, `KB`/`MB`/`GB` powers of 1000.
/// Zero is refused: a limit of nothing is never what someone meant.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => {
            return Err(format!(
                "{text:?} is not a size; write a number of bytes, optionally with a unit such as KiB, MiB or GiB"
            ));
        }
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size; write a number of bytes such as 2GiB"))?;
    let bytes = number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if bytes == 0 {
        return Err("the limit must be greater than zero".to_string());
    }
    Ok(bytes)
}

/// A count that must be at least one.
pub fn parse_positive(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("the limit must be greater than zero".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number")),
    }
}

/// A count that may be zero (e.g. no retries).
pub fn parse_count(text: &str) -> Result<u32, String> {
    text.trim()
        .parse::<u32>()
        .map_err(|_| format!("{text:?} is not a whole number"))
}

/// A duration: seconds as a plain number, or a number with `ms`, `s`, `m`.
/// Zero is refused (it would time out every download at once).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits.parse().map_err(|_| {
        format!("{text:?} is not a duration; write seconds, or a number with ms, s or m")
    })?;
    let duration = match unit.trim() {
        "" | "s" => Duration::from_secs(number),
        "ms" => Duration::from_millis(number),
        "m" => Duration::from_secs(number.saturating_mul(60)),
        _ => {
            return Err(format!(
                "{text:?} is not a duration; write seconds, or a number with ms, s or m"
            ));
        }
    };
    if duration.is_zero() {
        return Err("the duration must be greater than zero".to_string());
    }
    Ok(duration)
}

/// An age, as `cache prune -unused-for` takes it: numbers each with a unit
/// of `s`, `m`, `h`, `d` (24 h) or `w` (7 d), one after another (`30d`,
/// `1d12h`). Days and weeks are what cache ages are thought in, and Go's
/// duration syntax (Terraform's) has neither. Zero is allowed: an entry
/// unused for no time at all is any entry no run holds.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration; write a number with a unit of s, m, h, d or w, such as 30d, 2w or 36h"
        )
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let split = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let number: u64 = rest[..split].parse().map_err(|_| bad())?;
        let unit = rest[split..].chars().next().ok_or_else(bad)?;
        let seconds: u64 = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        total = number
            .checked_mul(seconds)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(|| format!("{text:?} is too long a time"))?;
        rest = &rest[split + unit.len_utf8()..];
    }
    Ok(Duration::from_secs(total))
}

/// An age in its largest whole unit (`3d`, `5h`, `40s`), for reports.
pub fn format_age(age: Duration) -> String {
    let secs = age.as_secs();
    match secs {
        s if s >= 86_400 => format!("{}d", s / 86_400),
        s if s >= 3600 => format!("{}h", s / 3600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A byte count for people: `1.5 GiB`, `312.0 KiB`, `17 B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A time as RFC 3339 in UTC, to the second (`2024-05-01T09:30:00Z`), as
/// Terraform's JSON output writes its timestamps.
pub fn format_utc(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// `30s`, `1.5s` or `500ms`: short and exact enough for messages.
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        format!("{millis}ms")
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_and_decimal_units() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("3g"), Ok(3 << 30));
        assert_eq!(parse_size("100 MB"), Ok(100_000_000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("5TiB").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("18446744073709551615GiB").is_err());
    }

    #[test]
    fn durations_default_to_seconds() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("1h").is_err());
    }

    #[test]
    fn counts_and_positives() {
        assert_eq!(parse_count("0"), Ok(0));
        assert!(parse_count("-1").is_err());
        assert_eq!(parse_positive("7"), Ok(7));
        assert!(parse_positive("0").is_err());
    }

    #[test]
    fn ages_take_days_and_weeks_and_combine() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_age("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_age("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_age("0s"), Ok(Duration::ZERO));
        for bad in [
            "",
            "30",
            "d",
            "30x",
            "-1d",
            "1.5d",
            "30 days",
            "99999999999999999999w",
        ] {
            assert!(parse_age(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sizes_ages_and_times_print_for_people() {
        assert_eq!(format_size(17), "17 B");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(3 << 30), "3.0 GiB");
        assert_eq!(format_age(Duration::from_secs(3 * 86_400 + 5)), "3d");
        assert_eq!(format_age(Duration::from_secs(59)), "59s");
        let at = |secs| std::time::UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(format_utc(at(0)), "1970-01-01T00:00:00Z");
        // `date -u -d @1709210096 +%FT%TZ`: a leap day.
        assert_eq!(format_utc(at(1_709_210_096)), "2024-02-29T12:34:56Z");
        assert_eq!(format_utc(at(951_868_799)), "2000-02-29T23:59:59Z");
    }

    #[test]
    fn durations_print_compactly() {
        assert_eq!(format_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }
}
