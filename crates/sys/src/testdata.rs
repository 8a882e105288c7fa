//! The deterministic test file: the seed's `tsl.txt`, 36 MiB of text.
//!
//! The same size always gives the same bytes (a fixed-seed xorshift over a fixed word list), so
//! a digest in a committed result can be checked by anyone who generates the file again. The
//! file is written to a temporary name and renamed into place, so it is never half-written.

use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};

/// The seed's file size: 36 MiB.
pub const SEED_FILE_LEN: u64 = 36 * 1024 * 1024;

const WORDS: &[&str] = &[
    "socket", "server", "client", "begin", "end", "read", "write", "chunk", "buffer", "stream",
    "latency", "packet", "nagle", "delay", "ack", "blocking", "poll", "event", "log", "stdout",
    "file", "bytes", "sec", "microsec", "tsl", "over", "lan", "gigabit", "kernel", "queue",
];

/// Fills `out` with the first `out.len()` bytes of the test text, continuing `state`.
fn fill(state: &mut Generator, out: &mut [u8]) {
    for b in out {
        *b = state.next_byte();
    }
}

/// Produces the text one byte at a time: words separated by spaces, lines of about 72 columns.
struct Generator {
    rng: u64,
    word: &'static [u8],
    at: usize,
    column: usize,
}

impl Generator {
    fn new() -> Generator {
        Generator {
            rng: 0x9E37_79B9_7F4A_7C15,
            word: b"",
            at: 0,
            column: 0,
        }
    }

    fn next_byte(&mut self) -> u8 {
        if self.at < self.word.len() {
            self.at += 1;
            self.column += 1;
            return self.word[self.at - 1];
        }
        // Between words: a newline past column 72, else a space, then pick the next word.
        let sep = if self.column >= 72 {
            self.column = 0;
            b'\n'
        } else {
            self.column += 1;
            b' '
        };
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.word = WORDS[(self.rng % WORDS.len() as u64) as usize].as_bytes();
        self.at = 0;
        sep
    }
}

/// The first `len` bytes of the test text, in memory: what `generate` writes to a file of that
/// length (a reverse stream's generated data).
pub fn text(len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    fill(&mut Generator::new(), &mut out);
    out
}

/// The most bytes [`stream_file`] holds: the generated stream lives in memory.
pub const MAX_STREAM_FILE: u64 = 4 << 30;

/// The generated stream of `len` bytes, in memory: the seed's text ([`SEED_FILE_LEN`] bytes)
/// again and again, the bytes a server's generated reverse stream of that size carries. An
/// anonymous in-memory file (`memfd_create`), so it can be mapped and sent like a file on disk
/// and is gone with the process; at most [`MAX_STREAM_FILE`] bytes.
pub fn stream_file(len: u64) -> Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    anyhow::ensure!(
        (1..=MAX_STREAM_FILE).contains(&len),
        "a generated stream of {len} bytes: expected 1 to {MAX_STREAM_FILE} (it is held in \
         memory; for more, send a FILE or use --time)"
    );
    // SAFETY: memfd_create(2) with a NUL-terminated name; the descriptor it returns is ours.
    let fd = unsafe { libc::memfd_create(c"tsperf-generated".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot create an in-memory file for the generated stream");
    }
    // SAFETY: `fd` was just returned by memfd_create and nothing else owns it.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let pattern = text(len.min(SEED_FILE_LEN) as usize);
    let mut left = len;
    while left > 0 {
        let n = left.min(pattern.len() as u64) as usize;
        file.write_all(&pattern[..n])
            .context("cannot write the generated stream to memory")?;
        left -= n as u64;
    }
    Ok(file)
}

/// Writes `len` bytes of test text to `path`, atomically.
pub fn generate(path: &Path, len: u64) -> Result<()> {
    let shown = path.display();
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a temporary file next to '{shown}'"))?;
    let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
    let mut g = Generator::new();
    let mut block = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        fill(&mut g, &mut block[..n]);
        w.write_all(&block[..n])
            .with_context(|| format!("cannot write '{shown}'"))?;
        left -= n as u64;
    }
    w.flush()
        .with_context(|| format!("cannot write '{shown}'"))?;
    drop(w);
    // A test file is for anyone to read, not the private mode a temporary file gets.
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .with_context(|| format!("cannot set the mode of '{shown}'"))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot sync '{shown}'"))?;
    tmp.persist(path)
        .with_context(|| format!("cannot rename the temporary file to '{shown}'"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text in memory is the file's.
    #[test]
    fn text_is_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        generate(&path, 100_000).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), text(100_000));
    }

    /// The generated stream is the seed's text again and again, and refuses what it cannot hold.
    #[test]
    fn the_stream_file_repeats_the_seeds_text() {
        use std::io::{Read, Seek};
        let mut f = stream_file(SEED_FILE_LEN + 1000).unwrap();
        f.rewind().unwrap();
        let mut all = Vec::new();
        f.read_to_end(&mut all).unwrap();
        let seed = text(SEED_FILE_LEN as usize);
        assert_eq!(all.len() as u64, SEED_FILE_LEN + 1000);
        assert_eq!(all[..seed.len()], seed[..]);
        assert_eq!(all[seed.len()..], seed[..1000]);
        assert!(stream_file(0).is_err());
        let e = stream_file(MAX_STREAM_FILE + 1).unwrap_err().to_string();
        assert!(e.contains("--time"), "{e}");
    }

    /// The same length gives the same bytes, a prefix of a longer file; the text is ASCII lines.
    #[test]
    fn deterministic_text() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        generate(&a, 10_000).unwrap();
        generate(&b, 20_000).unwrap();
        let (a, b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
        assert_eq!(a.len(), 10_000);
        assert_eq!(a[..], b[..10_000]);
        assert!(
            a.iter()
                .all(|c| c.is_ascii_lowercase() || *c == b' ' || *c == b'\n')
        );
        assert!(a.split(|c| *c == b'\n').all(|line| line.len() < 90));
    }
}
