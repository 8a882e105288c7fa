//! How the client sends: its I/O model ([`ClientIo`]) and how it hands chunks to the kernel
//! ([`Strategy`]), as the results name them.

/// The client's I/O model: blocking sockets, or mio non-blocking ones (`--nonblocking`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientIo {
    /// Blocking sockets.
    #[default]
    Blocking,
    /// mio non-blocking sockets, waiting in poll.
    Nonblocking,
}

impl ClientIo {
    /// The JSON's `io` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientIo::Blocking => "blocking",
            ClientIo::Nonblocking => "nonblocking",
        }
    }
}

impl std::fmt::Display for ClientIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the client hands chunks to the kernel (`--io`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// One write() per chunk, as the seed did.
    #[default]
    Write,
    /// --batch chunks per writev(), each chunk its own buffer of --chunk bytes.
    Writev,
    /// sendfile() of --chunk bytes per call, from the page cache to the socket (zero-copy);
    /// the checksum is computed on a thread of its own.
    Sendfile,
}

impl Strategy {
    /// Every strategy, in the order `--io` lists them.
    pub const ALL: [Strategy; 3] = [Strategy::Write, Strategy::Writev, Strategy::Sendfile];

    /// The JSON's `strategy` value, and `--io`'s.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Write => "write",
            Strategy::Writev => "writev",
            Strategy::Sendfile => "sendfile",
        }
    }

    /// What it does, for `--io`'s help.
    pub fn help(self) -> &'static str {
        match self {
            Strategy::Write => "One write() per chunk, as the field report's client did",
            Strategy::Writev => {
                "--batch chunks per writev(), each chunk its own buffer of --chunk bytes"
            }
            Strategy::Sendfile => {
                "sendfile() of --chunk bytes per call, from the page cache to the socket \
                 (zero-copy); the checksum is computed on a thread of its own"
            }
        }
    }

    /// The strategy named `name` (`--io`'s value), if any.
    pub fn named(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The system call a sender makes for it, `batch` chunks a `writev`: what a hello asks of a
    /// sending server, and what the engine's sender is given.
    pub fn call(self, batch: u32) -> tsperf_proto::Call {
        match self {
            Strategy::Write => tsperf_proto::Call::Write,
            Strategy::Writev => tsperf_proto::Call::Writev(batch),
            Strategy::Sendfile => tsperf_proto::Call::Sendfile,
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Strategy;

    /// `--io` takes each strategy by the name the JSON gives it, and a sender is given its own
    /// system call.
    #[test]
    fn every_strategy_is_taken_by_its_json_name() {
        for s in Strategy::ALL {
            assert_eq!(Strategy::named(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert!(!s.help().is_empty());
        }
        assert_eq!(Strategy::named("Write"), None);
        assert_eq!(Strategy::Writev.call(8), tsperf_proto::Call::Writev(8));
    }
}
