//! The values of flags that name a choice, as clap parses them, and the library's types they
//! stand for. The library crates do not know clap: these are the front ends' own.

use clap::ValueEnum;
use tsperf_proto::clock::{Codec, Framing};
use tsperf_proto::tls::Cipher;
use tsperf_proto::{LogMode, SaveMode};
use tsperf_results::strategy::Strategy;

/// Declares a clap value enum mirroring a library enum, variant for variant, with its `From`.
macro_rules! mirror {
    ($(#[$doc:meta])* $arg:ident => $lib:ty { $($(#[$vdoc:meta])* $v:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
        pub(crate) enum $arg {
            $($(#[$vdoc])* $v),+
        }

        impl From<$arg> for $lib {
            fn from(a: $arg) -> $lib {
                match a {
                    $($arg::$v => <$lib>::$v),+
                }
            }
        }
    };
}

mirror! {
    /// `--codec`: how a latency message's body is encoded.
    CodecArg => Codec {
        /// Fixed-width big-endian fields, as Java's `DataOutputStream` writes them.
        Binary,
        /// A self-describing object naming its type and fields, as Java serialization does
        /// (JSON).
        Object,
    }
}

mirror! {
    /// `--framing`: how a latency message goes onto the socket.
    FramingArg => Framing {
        /// Length prefix and body in one write.
        Single,
        /// Length prefix in one write, body in another, on both ends: what a fresh
        /// `ObjectOutputStream` per message does; meets Nagle's algorithm both ways.
        Split,
        /// The request in two writes, the response in one: Nagle's algorithm meets one
        /// delayed ACK a round trip (about 40 ms).
        SplitRequest,
    }
}

/// `--io`: a [`Strategy`] by its name, each with its help, both the library's (a new strategy
/// needs nothing here).
pub(crate) fn strategy() -> impl clap::builder::TypedValueParser<Value = Strategy> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new(Strategy::ALL.map(|s| PossibleValue::new(s.as_str()).help(s.help())))
        .map(|name| Strategy::named(&name).unwrap_or_default())
}

/// `--far-disk`: a [`SaveMode`] by its name.
pub(crate) fn save_mode() -> impl clap::builder::TypedValueParser<Value = SaveMode> {
    use clap::builder::{PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new(SaveMode::ALL.map(SaveMode::name)).map(|name| {
        SaveMode::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .unwrap_or(SaveMode::Durable)
    })
}

/// `--tls`: a cipher suite by its short name.
pub(crate) fn cipher() -> impl clap::builder::TypedValueParser<Value = Cipher> {
    use clap::builder::{PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new(Cipher::ALL.map(Cipher::name))
        .map(|name| Cipher::named(&name).unwrap_or(Cipher::Aes128Gcm))
}

mirror! {
    /// A log sink: `--log` (tsserver), `--server-log` (tsclient).
    LogArg => LogMode {
        // No per-read lines. (Plain comments: the flags' own help describes the sinks, and
        // a description per value would turn the whole `--help` into its long layout.)
        None,
        // One write() per line to stdout, as printf to a screen does.
        Stdout,
        // The server's --log-file, buffered.
        File,
    }
}

mirror! {
    /// `tsmatrix --stdout-to`: where the --log stdout server's stdout goes.
    StdoutToArg => tsperf_lab::matrix::StdoutTo {
        /// A pseudo-terminal read by a terminal emulator (tmux) if installed, else by `script`.
        Pty,
        /// A file.
        File,
    }
}

/// A size in bytes (`36MiB`), at least 1.
pub(crate) fn size(s: &str) -> Result<u64, String> {
    match tsperf_results::units::parse_size(s) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "invalid size '{s}': expected bytes such as 36MiB, at least 1"
        )),
    }
}

/// iperf3's `-b`: bits a second with a decimal suffix (`100M` = 10^8 bit/s; K, M, G, T), as
/// bytes a second for `SO_MAX_PACING_RATE`; 0 is iperf3's "unlimited".
pub(crate) fn bitrate(s: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "invalid bitrate '{s}': expected bits a second such as 100M or 2.5G (K, M, G, T: powers of 1000)"
        )
    };
    let (digits, scale) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let scale = match c.to_ascii_uppercase() {
                'K' => 1e3,
                'M' => 1e6,
                'G' => 1e9,
                'T' => 1e12,
                _ => return Err(bad()),
            };
            (&s[..i], scale)
        }
        _ => (s, 1.0),
    };
    let bits = digits.parse::<f64>().map_err(|_| bad())? * scale;
    if !bits.is_finite() || bits < 0.0 || (bits > 0.0 && bits < 8.0) || bits > 8e15 {
        return Err(bad());
    }
    Ok((bits / 8.0) as u64)
}

/// iperf3's `-f`: the unit the rows' rates are printed in.
pub(crate) fn rate_unit(s: &str) -> Result<tsperf_results::intervals::RateUnit, String> {
    use tsperf_results::intervals::RateUnit;
    match s {
        "k" => Ok(RateUnit::Kbit),
        "m" => Ok(RateUnit::Mbit),
        "g" => Ok(RateUnit::Gbit),
        "t" => Ok(RateUnit::Tbit),
        "K" => Ok(RateUnit::KiB),
        "M" => Ok(RateUnit::MiB),
        "G" => Ok(RateUnit::GiB),
        "T" => Ok(RateUnit::TiB),
        _ => Err(format!(
            "invalid format '{s}': expected k, m, g or t (bits a second) or K, M, G or T (bytes)"
        )),
    }
}

/// A rate in bytes a second (`128KiB`), at least 1.
pub(crate) fn rate(s: &str) -> Result<u64, String> {
    match tsperf_results::units::parse_size(s) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "invalid rate '{s}': expected bytes a second such as 128KiB or 10MiB, at least 1"
        )),
    }
}
