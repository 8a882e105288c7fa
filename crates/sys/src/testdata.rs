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
