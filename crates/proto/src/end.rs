//! The end of a closed stream ([`crate::Hello::closed_end`]): its data, then the
//! [`END_TRAILER`], then the sender's half-close. The receiver cannot tell the trailer from the
//! data until the stream ends, so it holds the last bytes back ([`Tail`]) and checksums only what
//! lies before them: when the stream ends, what it holds is the trailer.

use crate::END_TRAILER;

/// A closed stream's end trailer: what the sender says it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    /// Data bytes sent, the trailer not counted.
    pub length: u64,
    /// The xxh3-64 of them.
    pub digest: u64,
}

impl End {
    /// The trailer's bytes.
    pub fn encode(&self) -> [u8; END_TRAILER] {
        let mut out = [0; END_TRAILER];
        out[..8].copy_from_slice(&self.length.to_be_bytes());
        out[8..].copy_from_slice(&self.digest.to_be_bytes());
        out
    }

    /// The trailer in `bytes`.
    pub fn decode(bytes: &[u8; END_TRAILER]) -> End {
        End {
            length: crate::frame::be64(&bytes[..8]),
            digest: crate::frame::be64(&bytes[8..]),
        }
    }
}

/// The last `N` bytes of a stream ([`END_TRAILER`] unless a reverse stream's Sent frame comes
/// before it: [`crate::sent::REVERSE_TAIL`]), held back from the data until the stream ends:
/// [`Tail::feed`] hands on everything that is known to come before them.
#[derive(Debug, Clone)]
pub struct Tail<const N: usize = END_TRAILER> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Default for Tail<N> {
    fn default() -> Tail<N> {
        Tail {
            buf: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> Tail<N> {
    /// Takes `data`, the stream's next bytes, and hands `emit` the bytes that are now known
    /// not to be among the last `N`: first any it held, then the front of `data`. Copies at
    /// most `N` bytes, so a large read costs nothing more.
    #[inline]
    pub fn feed(&mut self, data: &[u8], mut emit: impl FnMut(&[u8])) {
        let total = self.len + data.len();
        if total <= N {
            self.buf[self.len..total].copy_from_slice(data);
            self.len = total;
            return;
        }
        let out = total - N;
        let from_held = out.min(self.len);
        if from_held > 0 {
            emit(&self.buf[..from_held]);
        }
        let from_data = out - from_held;
        if from_data > 0 {
            emit(&data[..from_data]);
        }
        self.buf.copy_within(from_held..self.len, 0);
        let kept = self.len - from_held;
        self.buf[kept..].copy_from_slice(&data[from_data..]);
        self.len = N;
    }

    /// Bytes held back.
    pub fn held(&self) -> usize {
        self.len
    }

    /// The bytes held back.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The end trailer, once the stream ended: its last [`END_TRAILER`] bytes; `None` if fewer
    /// than `N` came.
    pub fn end(&self) -> Option<End> {
        let last = self.buf.get(N.checked_sub(END_TRAILER)?..)?;
        (self.len == N).then(|| End::decode(last.try_into().expect("16 bytes")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Fed in any pieces, the tail hands on exactly all but the last 16 bytes, in order, and
    /// holds those.
    #[test]
    fn holds_back_the_last_bytes_however_the_stream_is_cut() {
        proptest!(|(data in proptest::collection::vec(any::<u8>(), 0..200),
                    cuts in proptest::collection::vec(0usize..40, 0..20))| {
            let mut tail = Tail::<16>::default();
            let mut out = Vec::new();
            let mut rest = &data[..];
            for c in cuts {
                let (piece, after) = rest.split_at(c.min(rest.len()));
                tail.feed(piece, |b| out.extend_from_slice(b));
                rest = after;
            }
            tail.feed(rest, |b| out.extend_from_slice(b));
            let keep = data.len().min(END_TRAILER);
            prop_assert_eq!(&out[..], &data[..data.len() - keep]);
            prop_assert_eq!(tail.held(), keep);
            if data.len() >= END_TRAILER {
                let end = tail.end().expect("a whole trailer");
                let last: [u8; 16] = data[data.len() - 16..].try_into().unwrap();
                prop_assert_eq!(end, End::decode(&last));
            } else {
                prop_assert!(tail.end().is_none());
            }
        });
    }

    #[test]
    fn the_trailer_round_trips() {
        let end = End {
            length: 36 << 20,
            digest: 0xdead_beef_0123_4567,
        };
        assert_eq!(End::decode(&end.encode()), end);
        assert_eq!(&end.encode()[..8], &(36u64 << 20).to_be_bytes());
    }
}
