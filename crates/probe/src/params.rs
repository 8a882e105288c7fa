//! A `/probe` scrape's parameters, checked, and the tsclient command line they make.
//!
//! `target=HOST[:PORT]` (required), and optionally `bytes=SIZE` (default 64MiB), `time=SECONDS`
//! (a timed run instead), `chunk=BYTES`, `reverse=1`, `streams=N` (`-P`), `io=STRATEGY`,
//! `bitrate=RATE` (`-b`: the sender paced, so a probe need not fill a busy link), or
//! `latency=COUNT` (a latency run of COUNT requests instead of a stream). Each is checked
//! here with the range it must be in, so a bad one is a `400` that names it; tsclient checks
//! the rest (an `io` it does not know) and its usage error is answered the same way.

use std::time::Duration;

/// The bytes a probe sends when the scrape does not say.
pub const DEFAULT_BYTES: &str = "64MiB";

/// One probe, as asked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Spec {
    /// The tsserver: `HOST` or `HOST:PORT` (`[V6]:PORT`).
    pub target: String,
    /// tsclient's flags for everything else.
    pub flags: Vec<String>,
    /// A timed run's time.
    pub time: Option<Duration>,
}

/// Every parameter a probe takes.
pub const PARAMS: [&str; 9] = [
    "target", "bytes", "time", "chunk", "reverse", "streams", "io", "bitrate", "latency",
];

impl Spec {
    /// The probe a scrape's query asks for, or what is wrong with it, naming the parameter.
    pub fn parse(query: &[(String, String)]) -> Result<Spec, String> {
        for (k, _) in query {
            if !PARAMS.contains(&k.as_str()) {
                return Err(format!(
                    "unknown parameter '{k}': expected one of {}",
                    PARAMS.join(", ")
                ));
            }
        }
        let get = |name: &str| one(query, name);
        let target = target(get("target")?)?;
        let mut flags = Vec::new();
        if let Some(count) = get("latency")? {
            for other in [
                "bytes", "time", "chunk", "reverse", "streams", "io", "bitrate",
            ] {
                if get(other)?.is_some() {
                    return Err(format!(
                        "'{other}' is a stream's, and 'latency' asks for a latency run: \
                         give one or the other"
                    ));
                }
            }
            let n = number(count, "latency", 1, 1_000_000)?;
            flags.extend(["--latency".into(), "--count".into(), n.to_string()]);
            return Ok(Spec {
                target,
                flags,
                time: None,
            });
        }
        let time = stream_flags(query, &mut flags)?;
        Ok(Spec {
            target,
            flags,
            time,
        })
    }

    /// tsclient's arguments for this probe: its JSON, to the target, and the flags.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--json".to_owned(),
            "--host".to_owned(),
            self.target.clone(),
        ];
        a.extend(self.flags.iter().cloned());
        a
    }
}

/// The one value of parameter `name`, if given; given twice is an error.
fn one<'q>(query: &'q [(String, String)], name: &str) -> Result<Option<&'q str>, String> {
    let mut values = query.iter().filter(|(k, _)| k == name);
    match (values.next(), values.next()) {
        (Some(_), Some(_)) => Err(format!("'{name}' is given twice: give it once")),
        (v, _) => Ok(v.map(|(_, v)| v.as_str())),
    }
}

/// A stream probe's flags, and its time if it is timed.
fn stream_flags(
    query: &[(String, String)],
    flags: &mut Vec<String>,
) -> Result<Option<Duration>, String> {
    let get = |name: &str| one(query, name);
    let mut time = None;
    match (get("bytes")?, get("time")?) {
        (Some(_), Some(_)) => {
            return Err("'bytes' and 'time' both size the run: give one or the other".into());
        }
        (_, Some(t)) => {
            let secs: f64 = t
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && (0.1..=3600.0).contains(s))
                .ok_or_else(|| {
                    format!("time '{t}': expected seconds from 0.1 to 3600, such as 5 or 2.5")
                })?;
            time = Some(Duration::from_secs_f64(secs));
            flags.extend(["--time".into(), t.to_owned()]);
        }
        (b, None) => {
            let b = b.unwrap_or(DEFAULT_BYTES);
            size(b, "bytes", 1, 64 << 30)?;
            flags.extend(["--bytes".into(), b.to_owned()]);
        }
    }
    if let Some(c) = get("chunk")? {
        size(c, "chunk", 1, 16 << 20)?;
        flags.extend(["--chunk".into(), c.to_owned()]);
    }
    if get("reverse")?.map(|r| flag(r, "reverse")).transpose()? == Some(true) {
        flags.push("--reverse".into());
    }
    if let Some(s) = get("streams")? {
        let n = number(s, "streams", 1, 128)?;
        flags.extend(["--parallel".into(), n.to_string()]);
    }
    if let Some(io) = get("io")? {
        if io.is_empty() || !io.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!(
                "io '{io}': expected a strategy's name, such as write"
            ));
        }
        flags.extend(["--io".into(), io.to_owned()]);
    }
    if let Some(b) = get("bitrate")? {
        // tsclient checks its range; this keeps anything but a rate off its command line.
        let digits = b
            .strip_suffix(|c: char| "KMGTkmgt".contains(c))
            .unwrap_or(b);
        let number = digits.chars().all(|c| c.is_ascii_digit() || c == '.');
        if !number || digits.parse::<f64>().is_err() {
            return Err(format!(
                "bitrate '{b}': expected bits a second such as 100M or 2.5G"
            ));
        }
        flags.extend(["-b".into(), b.to_owned()]);
    }
    Ok(time)
}

fn target(t: Option<&str>) -> Result<String, String> {
    let t = t.ok_or("no 'target': expected target=HOST or target=HOST:PORT")?;
    let ok = !t.is_empty()
        && t.len() <= 255
        && !t.starts_with('-')
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:[]_%".contains(c));
    if ok {
        Ok(t.to_owned())
    } else {
        Err(format!(
            "target '{}': expected HOST or HOST:PORT (a name or an address)",
            t.escape_debug()
        ))
    }
}

fn number(v: &str, name: &str, low: u64, high: u64) -> Result<u64, String> {
    v.parse::<u64>()
        .ok()
        .filter(|n| (low..=high).contains(n))
        .ok_or_else(|| format!("{name} '{v}': expected a whole number from {low} to {high}"))
}

fn size(v: &str, name: &str, low: u64, high: u64) -> Result<u64, String> {
    tsperf_results::units::parse_size(v)
        .filter(|n| (low..=high).contains(n))
        .ok_or_else(|| {
            format!(
                "{name} '{v}': expected a size from {low} B to {}, such as 64MiB or 1048576",
                tsperf_results::units::size(high)
            )
        })
}

fn flag(v: &str, name: &str) -> Result<bool, String> {
    match v {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(format!("{name} '{v}': expected 1 or 0 (true or false)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Vec<(String, String)> {
        s.split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }

    fn args(s: &str) -> String {
        Spec::parse(&q(s)).unwrap().args().join(" ")
    }

    fn refused(s: &str, says: &str) {
        let e = Spec::parse(&q(s)).unwrap_err();
        assert!(e.contains(says), "{s}: {e}");
    }

    /// Each parameter becomes its tsclient flag; a stream of 64 MiB by default.
    #[test]
    fn parameters_become_flags() {
        assert_eq!(args("target=h"), "--json --host h --bytes 64MiB");
        assert_eq!(
            args("target=h:7433&time=2.5&chunk=128K&reverse=1&streams=4&io=writev"),
            "--json --host h:7433 --time 2.5 --chunk 128K --reverse --parallel 4 --io writev"
        );
        assert_eq!(
            args("target=[::1]:1&reverse=0"),
            "--json --host [::1]:1 --bytes 64MiB"
        );
        assert_eq!(
            args("target=h&bitrate=2.5G&reverse=1"),
            "--json --host h --bytes 64MiB --reverse -b 2.5G"
        );
        assert_eq!(
            args("target=h&latency=100"),
            "--json --host h --latency --count 100"
        );
        assert_eq!(
            Spec::parse(&q("target=h&time=3")).unwrap().time,
            Some(Duration::from_secs(3))
        );
    }

    /// One refusal per way a parameter can be wrong, each naming it and what was expected.
    #[test]
    fn bad_parameters_are_named() {
        refused("", "no 'target'");
        refused("target=", "target '': expected HOST");
        refused("target=-h", "target '-h'");
        refused("target=a b", "target 'a b'");
        refused("target=h&bytes=0", "bytes '0': expected a size from 1 B");
        refused("target=h&bytes=65GiB", "bytes '65GiB'");
        refused("target=h&bytes=lots", "bytes 'lots'");
        refused("target=h&time=0", "time '0': expected seconds");
        refused("target=h&time=NaN", "time 'NaN'");
        refused("target=h&time=1&bytes=1M", "'bytes' and 'time'");
        refused("target=h&chunk=32MiB", "chunk '32MiB'");
        refused("target=h&reverse=maybe", "reverse 'maybe': expected 1 or 0");
        refused(
            "target=h&streams=0",
            "streams '0': expected a whole number from 1 to 128",
        );
        refused("target=h&streams=129", "streams '129'");
        refused("target=h&io=;rm", "io ';rm'");
        refused("target=h&latency=0", "latency '0'");
        refused(
            "target=h&bitrate=fast",
            "bitrate 'fast': expected bits a second",
        );
        refused("target=h&bitrate=-1M", "bitrate '-1M'");
        refused("target=h&latency=10&bitrate=1M", "'bitrate' is a stream's");
        refused("target=h&latency=10&streams=2", "'streams' is a stream's");
        refused("target=h&target=g", "'target' is given twice");
        refused("target=h&color=red", "unknown parameter 'color'");
    }
}
