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
    fn durations_print_compactly() {
        assert_eq!(format_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    }
}
