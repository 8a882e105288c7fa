//! The generated text's checksum runs ahead of the writes: wherever a stream stops, its digest
//! is that of exactly the bytes the socket took.

use super::*;

/// Takes what its pattern says of each write (none, part, all), keeping what it took.
struct Taker {
    took: Vec<u8>,
    seed: u64,
    /// A descriptor for the writes' bound (the generated text never uses it).
    null: std::fs::File,
}

impl std::os::fd::AsFd for Taker {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.null.as_fd()
    }
}

impl Taker {
    fn next(&mut self, n: u64) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed % n
    }

    fn take(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let n = match self.next(4) {
            0 => return Err(io::ErrorKind::WouldBlock.into()),
            1 => 1 + self.next(want as u64) as usize,
            _ => want,
        };
        let mut left = n;
        for b in bufs {
            let k = left.min(b.len());
            self.took.extend_from_slice(&b[..k]);
            left -= k;
        }
        Ok(n)
    }
}

impl Write for Taker {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.take(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.take(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Short writes, refused writes, passes of a timed stream, a pass across the text's end, one
/// buffer: after every write the digest is of the bytes taken, and what a stop hashes again
/// stays within two steps.
#[test]
fn the_texts_digest_is_of_what_was_sent_wherever_it_stopped() {
    let bytes: Vec<u8> = (0..300_007u32).map(|i| (i * 7 % 251) as u8).collect();
    let text = tsperf_sys::source::Held::of(&bytes);
    let mut scratch = vec![0u8; 1000];
    for (length, chunk, one_buffer) in [
        (700_001u64, 1024u32, false),
        (100_000, 10_240, false),
        (50_000, 131_072, false),
        (400_000, 1024, true),
        (3, 1, false),
    ] {
        let hello = Hello {
            one_buffer,
            ..Hello::stream(length, chunk, "")
        };
        let mut s = Sender::new(&hello);
        s.give_text(text.clone());
        let mut w = Taker {
            took: vec![],
            seed: 0x9e37_79b9_7f4a_7c15 ^ length,
            null: std::fs::File::open("/dev/null").unwrap(),
        };
        let mut sum = XxHash3_64::new();
        for _ in 0..3000 {
            let before = w.took.len();
            if s.at == s.length {
                s.next_pass();
            }
            match s.write_once(&mut w, &mut scratch) {
                Ok(()) => {}
                Err(Failure::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
                Err(Failure::Source(why)) => panic!("{why}"),
            }
            assert_eq!(s.sent, w.took.len() as u64);
            sum.write(&w.took[before..]);
            assert_eq!(
                s.digest(&mut scratch).unwrap(),
                sum.finish(),
                "length {length}, chunk {chunk}, one buffer {one_buffer}: stopped at {}",
                s.sent
            );
            if let Data::Generated { sum, .. } = &s.data {
                assert!(s.at - sum.mark() <= 2 * ahead::TEXT_STEP + u64::from(chunk));
            }
        }
        assert!(s.sent > 3 * length.min(100_000), "{} sent", s.sent);
        // What went out is the text, cycled, each pass from its start.
        let period = pattern::period(&text, one_buffer, u64::from(chunk));
        let want: Vec<u8> = (0..w.took.len() as u64)
            .map(|i| period[((i % length) % period.len() as u64) as usize])
            .collect();
        assert!(w.took == want, "length {length}, chunk {chunk}");
    }
}
