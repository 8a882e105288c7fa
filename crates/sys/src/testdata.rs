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

/// Fills `out` with the first `out.len()` bytes of the test text, continuing `state`: the rest
/// of the current word copied at once, then a separator and the next word (byte by byte, the
/// text took a client 0.06 s per 36 MiB, a tenth of its CPU in a 1 GiB run).
fn fill(state: &mut Generator, mut out: &mut [u8]) {
    while !out.is_empty() {
        let rest = &state.word[state.at..];
        if rest.is_empty() {
            out[0] = state.next_byte();
            out = &mut out[1..];
            continue;
        }
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        state.at += n;
        state.column += n;
        out = &mut out[n..];
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
    text_into(&mut out);
    out
}

/// Fills `out` with the first `out.len()` bytes of the test text.
pub fn text_into(out: &mut [u8]) {
    // The generator's steps from its start, each a separator and a whole word copied as one
    // 16-byte store (words are padded; the next step overwrites the padding) while there is
    // room, the last few exactly: 36 MiB in a fraction of the time of `fill`, which must stop
    // anywhere in a word (issue 33: the text was 6-10% of a 1 GiB generated run's client CPU).
    let len = out.len();
    let (mut rng, mut column, mut at) = (Generator::new().rng, 0usize, 0usize);
    while at < len {
        let sep = if column >= 72 {
            column = 0;
            b'\n'
        } else {
            column += 1;
            b' '
        };
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = (rng % WORDS.len() as u64) as usize;
        let word = WORDS[i].as_bytes();
        out[at] = sep;
        if at + 1 + PADDED <= len {
            out[at + 1..at + 1 + PADDED].copy_from_slice(&PADDED_WORDS[i]);
        } else {
            let n = word.len().min(len - at - 1);
            out[at + 1..at + 1 + n].copy_from_slice(&word[..n]);
        }
        at += 1 + word.len();
        column += word.len();
    }
}

/// The longest word, and the size every word is padded to in [`PADDED_WORDS`].
const PADDED: usize = 16;

/// [`WORDS`], each zero-padded to [`PADDED`] bytes.
const PADDED_WORDS: [[u8; PADDED]; WORDS.len()] = {
    let mut table = [[0u8; PADDED]; WORDS.len()];
    let mut w = 0;
    while w < WORDS.len() {
        let word = WORDS[w].as_bytes();
        assert!(word.len() <= PADDED);
        let mut b = 0;
        while b < word.len() {
            table[w][b] = word[b];
            b += 1;
        }
        w += 1;
    }
    table
};

/// The generated stream of `len` bytes, in memory: the seed's text ([`SEED_FILE_LEN`] bytes)
/// again and again, the bytes a server's generated reverse stream of that size carries. What is
/// held is one period: the first `min(len, SEED_FILE_LEN)` bytes, in an anonymous in-memory
/// file (`memfd_create`), so it can be mapped and sent like a file on disk and is gone with the
/// process; a source sends it again and again to `len`
/// ([`crate::source::Source::cycled`]).
pub fn stream_file(len: u64) -> Result<std::fs::File> {
    stream_file_of(len, SEED_FILE_LEN)
}

/// The generated stream of `len` bytes whose period is `period` bytes of the seed's text (at
/// most [`SEED_FILE_LEN`]): the same text's first `period` bytes again and again. With a
/// period of one write (`tsclient --one-buffer`) the client sends one buffer that stays in the
/// CPU's cache, as iperf3's memory mode does.
pub fn stream_file_of(len: u64, period: u64) -> Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    anyhow::ensure!(
        len > 0,
        "a generated stream of 0 bytes: expected at least 1 (there is nothing to measure)"
    );
    // SAFETY: memfd_create(2) with a NUL-terminated name; the descriptor it returns is ours.
    let fd = unsafe { libc::memfd_create(c"tsperf-generated".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot create an in-memory file for the generated stream");
    }
    // SAFETY: `fd` was just returned by memfd_create and nothing else owns it.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    let period = len.min(period.clamp(1, SEED_FILE_LEN));
    file.set_len(period)
        .context("cannot size the in-memory file for the generated stream")?;
    // The text is made in place, in the file's own pages: no second copy in the heap to fault
    // in, copy from and free (issue 33: the period's start-up was 0.07 s of a 1 GiB run's
    // client CPU).
    // SAFETY: the memfd was created above and no one else holds it: nothing can change its
    // length or contents while the map is alive.
    let mut map = unsafe { memmap2::MmapOptions::new().populate().map_mut(&file) }
        .context("cannot map the in-memory file for the generated stream")?;
    text_into(&mut map);
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

    /// Filling by words gives the bytes one at a time would, in pieces of any size.
    #[test]
    fn fill_by_words_is_byte_by_byte() {
        let mut slow = Generator::new();
        let want: Vec<u8> = (0..100_003).map(|_| slow.next_byte()).collect();
        let mut g = Generator::new();
        let mut got = vec![0u8; want.len()];
        let mut at = 0;
        for piece in [1, 2, 3, 7, 1000, 5, 99_000].iter().cycle() {
            let end = (at + piece).min(got.len());
            fill(&mut g, &mut got[at..end]);
            at = end;
            if at == got.len() {
                break;
            }
        }
        assert!(got == want);
        for len in (0..40).chain([73, 1000, 4097, want.len()]) {
            assert_eq!(&text(len)[..], &want[..len], "{len}");
        }
        // The seed's file, byte for byte (its xxh3 is in results and docs).
        let seed = text(SEED_FILE_LEN as usize);
        assert_eq!(xxhash_rust::xxh3::xxh3_64(&seed), 0xec40_a45b_cc9c_239d);
    }

    /// The text in memory is the file's.
    #[test]
    fn text_is_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        generate(&path, 100_000).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), text(100_000));
    }

    /// The generated stream holds one period of the seed's text, however long the stream:
    /// a source cycles it ([`crate::source::Source::cycled`]).
    #[test]
    fn the_stream_file_holds_one_period() {
        use std::io::{Read, Seek};
        for (len, held) in [
            (1000, 1000),
            (SEED_FILE_LEN + 1000, SEED_FILE_LEN),
            (1 << 40, SEED_FILE_LEN),
        ] {
            let mut f = stream_file(len).unwrap();
            f.rewind().unwrap();
            let mut all = Vec::new();
            f.read_to_end(&mut all).unwrap();
            assert_eq!(all.len() as u64, held);
            assert_eq!(all, text(held as usize));
        }
        let e = stream_file(0).unwrap_err().to_string();
        assert!(e.contains("expected at least 1"), "{e}");
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
