//! Units at the edges: parsing byte sizes typed by a person, and formatting sizes, durations and
//! rates for one. Inside the library sizes stay `u64` bytes and times stay [`Duration`].

use std::time::Duration;

use humansize::{BINARY, format_size};

use tsperf_proto::MAX_CHUNK;

/// Parses a chunk size: a plain number of bytes, or one with a binary suffix (`k`, `KiB`, `m`,
/// `MiB`; k = 1024, as iperf3's `-l` reads it). Accepts 1 to 16 MiB.
pub fn parse_chunk(text: &str) -> Result<u32, String> {
    parse_bounded(text, "chunk size", MAX_CHUNK, "16 MiB")
}

/// Parses a socket buffer size for `--sndbuf`/`--rcvbuf`: 1 byte to 1 GiB, with suffixes.
pub fn parse_buffer(text: &str) -> Result<u32, String> {
    parse_bounded(text, "buffer size", 1 << 30, "1 GiB")
}

/// Parses a server read size for `--read-size`: 1 byte to 16 MiB, with suffixes.
pub fn parse_read_size(text: &str) -> Result<u32, String> {
    parse_bounded(text, "read size", MAX_CHUNK, "16 MiB")
}

fn parse_bounded(text: &str, what: &str, max: u32, shown: &str) -> Result<u32, String> {
    let bytes = parse_size(text).ok_or_else(|| {
        format!("invalid {what} '{text}': expected a number of bytes such as 10240 or 10k")
    })?;
    match u32::try_from(bytes) {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "invalid {what} '{text}': expected 1 to {max} bytes ({shown})"
        )),
    }
}

/// Parses a byte count with an optional binary suffix. `None` if it is not one.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// A count with its noun, singular for one: `1 read`, `2 reads`, `3 clock queries`.
pub fn count(n: impl Into<u64>, one: &str) -> String {
    let n = n.into();
    if n == 1 {
        return format!("1 {one}");
    }
    match one.strip_suffix('y') {
        Some(stem) if !stem.ends_with(['a', 'e', 'o', 'u']) => format!("{n} {stem}ies"),
        _ => format!("{n} {one}s"),
    }
}

/// A size for a person: `36 MiB`, `102 B`.
pub fn size(bytes: u64) -> String {
    format_size(bytes, BINARY)
}

/// A byte count for people with the exact count beside: `6.78 MiB (7106671 bytes)`; under
/// 1 KiB, `512 bytes`.
pub fn bytes(n: u64) -> String {
    match n {
        0..1024 => count(n, "byte"),
        _ => format!("{} ({n} bytes)", size(n)),
    }
}

/// How far a transfer got: `6.78 MiB of 256 MiB (7106671 of 268435456 bytes)`.
pub fn bytes_of(n: u64, whole: u64) -> String {
    format!("{} of {} ({n} of {whole} bytes)", size(n), size(whole))
}

/// A duration in a unit that reads well: `850 µs`, `52.3 ms`, `1.234 s`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.3} s")
    }
}

/// Seconds read from a results file, as [`duration`] prints them; a figure no duration can be
/// (negative, not finite, past `Duration`'s range) is printed as the number it is and marked,
/// never converted (a results folder is anyone's input: issue 51).
pub fn seconds(s: f64) -> String {
    match Duration::try_from_secs_f64(s) {
        Ok(d) => duration(d),
        Err(_) => format!("{s:.3e} s (impossible)"),
    }
}

/// Microseconds read from a results file, as [`seconds`].
pub fn micros(us: f64) -> String {
    seconds(us / 1e6)
}

/// Throughput in MiB/s; 0 when no time passed.
pub fn mib_per_s(bytes: u64, elapsed: Duration) -> f64 {
    per_second(bytes as f64 / (1024.0 * 1024.0), elapsed)
}

/// A process's CPU time as one figure, user plus system: the kernel measures the sum, but
/// splits it between the two by sampling at its tick, so a short run's split can read `0 µs
/// user` (with `split`, the split follows, saying so).
pub fn cpu(user_us: u64, sys_us: u64, split: bool) -> String {
    let total = duration(Duration::from_micros(user_us + sys_us));
    match split {
        false => total,
        true => format!(
            "{total} ({} user + {} sys, as the kernel's tick samples them)",
            duration(Duration::from_micros(user_us)),
            duration(Duration::from_micros(sys_us))
        ),
    }
}

/// Throughput in Gbit/s (10^9 bits), the unit a link is sold in; 0 when no time passed.
pub fn gbit_per_s(bytes: u64, elapsed: Duration) -> f64 {
    per_second(bytes as f64 * 8.0 / 1e9, elapsed)
}

fn per_second(amount: f64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 { amount / s } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 15: one of a thing is singular; queries and days are spelt right.
    #[test]
    fn counts() {
        assert_eq!(count(1u64, "write call"), "1 write call");
        assert_eq!(count(0u64, "read"), "0 reads");
        assert_eq!(count(2u32, "clock query"), "2 clock queries");
        assert_eq!(count(2u32, "day"), "2 days");
    }

    /// Plain numbers and binary suffixes parse; k is 1024.
    #[test]
    fn chunk_sizes_parse() {
        assert_eq!(parse_chunk("102"), Ok(102));
        assert_eq!(parse_chunk("10k"), Ok(10240));
        assert_eq!(parse_chunk("1KiB"), Ok(1024));
        assert_eq!(parse_chunk("16MiB"), Ok(MAX_CHUNK));
        assert_eq!(parse_chunk(" 1 m "), Ok(1 << 20));
    }

    /// Zero, oversized, negative and garbage chunk sizes are refused with the input quoted.
    #[test]
    fn chunk_sizes_refused() {
        for bad in [
            "0",
            "16777217",
            "17m",
            "-1",
            "abc",
            "",
            "10q",
            "99999999999999999999",
        ] {
            let e = parse_chunk(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
        assert_eq!(
            parse_chunk("0").unwrap_err(),
            "invalid chunk size '0': expected 1 to 16777216 bytes (16 MiB)"
        );
    }

    /// Buffer and read sizes name themselves in errors and have their own limits.
    #[test]
    fn buffer_and_read_sizes() {
        assert_eq!(parse_buffer("64k"), Ok(65536));
        assert_eq!(parse_buffer("1GiB"), Ok(1 << 30));
        assert!(
            parse_buffer("0")
                .unwrap_err()
                .starts_with("invalid buffer size '0'")
        );
        assert!(parse_buffer("2g").unwrap_err().contains("(1 GiB)"));
        assert_eq!(parse_read_size("16m"), Ok(MAX_CHUNK));
        assert!(
            parse_read_size("x")
                .unwrap_err()
                .starts_with("invalid read size 'x'")
        );
    }

    /// Durations pick a readable unit.
    #[test]
    fn durations_read_well() {
        assert_eq!(duration(Duration::from_micros(850)), "850.0 µs");
        assert_eq!(duration(Duration::from_micros(52_300)), "52.30 ms");
        // Issue 51 (4): a figure from a results file that no duration can be is printed as
        // what it is, never converted (a negative one panicked).
        assert_eq!(micros(52_300.0), "52.30 ms");
        assert_eq!(seconds(-1.5), "-1.500e0 s (impossible)");
        assert_eq!(seconds(1.7e308), "1.700e308 s (impossible)");
        assert_eq!(seconds(f64::NAN), "NaN s (impossible)");
        assert_eq!(seconds(5e-324), "0.0 µs");
        assert_eq!(duration(Duration::from_millis(1234)), "1.234 s");
    }

    /// Rates: 1 MiB in 1 s is 1 MiB/s and 0.008388608 Gbit/s; zero time gives 0, not infinity.
    #[test]
    fn rates() {
        let s = Duration::from_secs(1);
        assert_eq!(mib_per_s(1 << 20, s), 1.0);
        assert!((gbit_per_s(1 << 20, s) - 0.008_388_608).abs() < 1e-12);
        assert_eq!(mib_per_s(5, Duration::ZERO), 0.0);
    }
}
