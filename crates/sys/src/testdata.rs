//! The deterministic test file: the seed's `tsl.txt`, 36 MiB of text.
//!
//! The same size always gives the same bytes (a fixed-seed xorshift over a fixed word list), so
//! a digest in a committed result can be checked by anyone who generates the file again. The
//! file is written to a temporary name and renamed into place, so it is never half-written.

use std::io::Write;
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

/// The generator's starting state (xorshift64).
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// The first `len` bytes of the test text, in memory: what `generate` writes to a file of that
/// length (a reverse stream's generated data).
pub fn text(len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    text_into(&mut out);
    out
}

/// Fills `out` with the first `out.len()` bytes of the test text.
pub fn text_into(out: &mut [u8]) {
    let len = out.len();
    let mut words = Words::new();
    // Whole words while a padded one fits, then the last few exactly.
    let mut at = words.run(out, 0, len.saturating_sub(1 + PADDED));
    while at < len {
        let (sep, i) = words.next();
        let word = WORDS[i].as_bytes();
        out[at] = sep;
        let n = word.len().min(len - at - 1);
        out[at + 1..at + 1 + n].copy_from_slice(&word[..n]);
        at += 1 + word.len();
    }
}

/// Hands the first `len` bytes of the test text to `sink` in pieces of `piece` bytes (the last
/// one shorter), each made in the same small buffer, so the text is written to a file or an
/// in-memory file from the CPU's cache, with no copy of the whole text in memory.
pub fn text_pieces(
    len: u64,
    piece: usize,
    mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let piece = piece.max(1);
    let mut buf = vec![0u8; piece + 1 + PADDED];
    let (mut words, mut carried, mut left) = (Words::new(), 0usize, len);
    while left > 0 {
        // Words run past the piece's end by at most one padded word: that part starts the next.
        let end = words.run(&mut buf, carried, piece);
        let n = (piece as u64).min(left) as usize;
        sink(&buf[..n])?;
        left -= n as u64;
        buf.copy_within(piece..end, 0);
        carried = end - piece;
    }
    Ok(())
}

/// The text's words as the generator picks them, written a whole word at a time: a separator,
/// then the word as one 16-byte store (words are padded; the next word overwrites the padding).
/// 36 MiB in a fraction of the time a byte at a time takes (issue 33: the text was 6-10% of a
/// 1 GiB generated run's client CPU).
#[derive(Clone, Copy)]
struct Words {
    rng: u64,
    column: usize,
}

impl Words {
    fn new() -> Words {
        Words {
            rng: SEED,
            column: 0,
        }
    }

    /// The next separator (a newline past column 72, else a space) and word (its index in
    /// [`WORDS`]).
    #[inline]
    fn next(&mut self) -> (u8, usize) {
        let wrap = self.column >= 72;
        let sep = if wrap { b'\n' } else { b' ' };
        self.column = if wrap { 0 } else { self.column + 1 };
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let i = (self.rng % WORDS.len() as u64) as usize;
        self.column += usize::from(LENS[i]);
        (sep, i)
    }

    /// Writes whole words into `buf` from `at` while `at < stop` (`buf` holds `stop + 1 +
    /// PADDED` bytes, so a padded word always fits) and returns where the text now ends.
    #[inline]
    fn run(&mut self, buf: &mut [u8], mut at: usize, stop: usize) -> usize {
        // The state in locals, written back once: a bounds check that may panic would otherwise
        // keep it in memory at every word (~12% of the time).
        let mut w = *self;
        while at < stop {
            let (sep, i) = w.next();
            let out = &mut buf[at..at + 1 + PADDED];
            out[0] = sep;
            out[1..].copy_from_slice(&PADDED_WORDS[i]);
            at += 1 + usize::from(LENS[i]);
        }
        *self = w;
        at
    }
}

/// The longest word, and the size every word is padded to in [`PADDED_WORDS`].
const PADDED: usize = 16;

/// The lengths of [`WORDS`].
const LENS: [u8; WORDS.len()] = {
    let mut lens = [0u8; WORDS.len()];
    let mut w = 0;
    while w < WORDS.len() {
        lens[w] = WORDS[w].len() as u8;
        w += 1;
    }
    lens
};

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
/// ([`crate::source::Source::cycled`]). What `sendfile` sends from: the ways of sending that
/// copy from memory hold the period in the process's own memory instead
/// ([`crate::source::Held`]).
pub fn stream_file(len: u64) -> Result<std::fs::File> {
    stream_file_of(len, SEED_FILE_LEN)
}

/// An empty in-memory file (`memfd_create`), closed on exec.
fn memfd() -> Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create(2) with a NUL-terminated name; the descriptor it returns is ours.
    let fd = unsafe { libc::memfd_create(c"tsperf-generated".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot create an in-memory file for the generated stream");
    }
    // SAFETY: `fd` was just returned by memfd_create and nothing else owns it.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// An in-memory file holding `bytes` (a server's generated text, for sendfile).
pub fn file_of(bytes: &[u8]) -> Result<std::fs::File> {
    use std::os::unix::fs::FileExt;
    let file = memfd()?;
    file.write_all_at(bytes, 0)
        .context("cannot write the generated text into its in-memory file")?;
    Ok(file)
}

/// The generated stream of `len` bytes whose period is `period` bytes of the seed's text (at
/// most [`SEED_FILE_LEN`]): the same text's first `period` bytes again and again. With a
/// period of one write (`tsclient --one-buffer`) the client sends one buffer that stays in the
/// CPU's cache, as iperf3's memory mode does.
pub fn stream_file_of(len: u64, period: u64) -> Result<std::fs::File> {
    anyhow::ensure!(
        len > 0,
        "a generated stream of 0 bytes: expected at least 1 (there is nothing to measure)"
    );
    let file = memfd()?;
    let period = len.min(period.clamp(1, SEED_FILE_LEN));
    // The text is written a piece at a time from one buffer the CPU's cache holds: the kernel
    // fills fresh pages of the file from it without clearing them first (perf of making it:
    // clear_page 2% of the samples beside the copy's 7%; it was 9% of a whole 36 MiB run's),
    // and no mapping of the whole file is faulted in and torn down (issue 33: mapping and writing in place took 45 ms per
    // 36 MiB here, 2.4x the text itself).
    let mut at = 0u64;
    text_pieces(period, TEXT_PIECE, |piece| {
        use std::os::unix::fs::FileExt;
        file.write_all_at(piece, at)?;
        at += piece.len() as u64;
        Ok(())
    })
    .context("cannot write the generated stream into its in-memory file")?;
    Ok(file)
}

/// The pieces the text is made in: well inside a core's L2 cache.
const TEXT_PIECE: usize = 256 << 10;

/// Writes `len` bytes of test text to `path`, atomically.
pub fn generate(path: &Path, len: u64) -> Result<()> {
    let shown = path.display();
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    anyhow::ensure!(
        dir.is_dir(),
        "cannot write '{shown}': its folder '{}' does not exist (make it first)",
        dir.display()
    );
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a temporary file next to '{shown}'"))?;
    text_pieces(len, TEXT_PIECE, |piece| tmp.as_file_mut().write_all(piece))
        .with_context(|| format!("cannot write '{shown}'"))?;
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

    /// The text's definition, a byte at a time (what `text_into` and `text_pieces` must give):
    /// fills `out` with the next `out.len()` bytes, continuing `state`.
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
                rng: SEED,
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

    /// The text in pieces of any size is the text, to the byte, whatever its length.
    #[test]
    fn text_in_pieces_is_the_text() {
        let whole = text(100_003);
        for piece in [1, 2, 5, 16, 17, 18, 100, 4096, 1 << 20] {
            for len in [0, 1, 16, 17, 18, 99, 100, 101, 5000, 100_003] {
                let mut got = Vec::new();
                text_pieces(len as u64, piece, |p| {
                    assert!(
                        p.len() == piece || got.len() + p.len() == len,
                        "{piece} {len}"
                    );
                    got.extend_from_slice(p);
                    Ok(())
                })
                .unwrap();
                assert!(got[..] == whole[..len], "pieces of {piece}, {len} bytes");
            }
        }
        let e = text_pieces(10, 4, |_| Err(std::io::Error::other("full"))).unwrap_err();
        assert_eq!(e.to_string(), "full");
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
