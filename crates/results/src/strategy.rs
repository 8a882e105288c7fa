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
    /// The JSON's `strategy` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Write => "write",
            Strategy::Writev => "writev",
            Strategy::Sendfile => "sendfile",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
