//! The kernel memory reverse streams may pin in their send buffers, all together (issue 32).
//!
//! A client that asks for a reverse stream and never reads leaves the stream's send buffer full
//! until the idle timeout cuts it off: with the kernel's autotuning each grows to `tcp_wmem`'s
//! maximum (4 MiB by default), and 600 of them pinned 1.96 GiB, past the kernel's TCP memory
//! pressure, until the kernel reset a legitimate client ("TCP: out of memory"). So every
//! reverse stream reserves its send buffer from one budget (`tsserver --send-buffers`) before
//! its first byte, and gives it back when it ends:
//!
//! - while the reservations stay within half the budget, a stream keeps the kernel's
//!   autotuning and reserves what that may grow to ([`SendBudget::auto`]);
//! - past that, a stream gets a fixed buffer of [`SMALL`] (enough for a LAN's bandwidth × delay:
//!   1 Gbit/s × 2 ms), so many more fit in the other half;
//! - when not even that fits, the stream is refused (`limit`), with the reason.
//!
//! The budget defaults to a quarter of the kernel's pressure threshold (`tcp_mem`'s middle
//! value), at most 256 MiB.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The fixed send buffer of a stream past the autotuned half of the budget, as the kernel
/// reports it (it doubles what is asked: 128 KiB asked).
pub const SMALL: u64 = 256 << 10;

/// The most the budget may be set below: one small buffer.
pub const MIN_BUDGET: u64 = SMALL;

/// The default budget's ceiling.
pub const DEFAULT_CEILING: u64 = 256 << 20;

/// The server's send buffer budget, shared by its event loops and threads.
#[derive(Debug)]
pub struct SendBudget {
    limit: u64,
    reserved: AtomicU64,
    auto: u64,
}

/// What one stream reserved; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<SendBudget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.reserved.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

impl SendBudget {
    /// A budget of `limit` bytes; an autotuned buffer counts as `tcp_wmem`'s maximum.
    pub fn new(limit: u64) -> Arc<SendBudget> {
        Arc::new(SendBudget {
            limit,
            reserved: AtomicU64::new(0),
            auto: wmem_max().unwrap_or(4 << 20),
        })
    }

    /// The default budget: a quarter of the kernel's TCP memory pressure threshold, at most
    /// [`DEFAULT_CEILING`] (and that where the kernel does not say).
    pub fn default_limit() -> u64 {
        tcp_mem_pressure().map_or(DEFAULT_CEILING, |p| {
            (p / 4).clamp(MIN_BUDGET, DEFAULT_CEILING)
        })
    }

    /// The budget in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// What an autotuned buffer is counted as.
    pub fn auto(&self) -> u64 {
        self.auto
    }

    /// Bytes reserved now.
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    /// Reserves the send buffer of a reverse stream on `sock`, fixing it at [`SMALL`] when the
    /// autotuned half is taken; `Err` (the reason for the client) when nothing fits.
    pub fn reserve<S: AsFd>(self: &Arc<SendBudget>, sock: &S) -> Result<Reservation, String> {
        let (bytes, fixed) = self.take()?;
        let taken = Reservation {
            budget: self.clone(),
            bytes,
        };
        if fixed {
            let sock = socket2::SockRef::from(sock);
            // The kernel doubles what it is asked for: half of SMALL gives SMALL.
            sock.set_send_buffer_size((SMALL / 2) as usize)
                .map_err(|e| format!("cannot bound the send buffer: {e}"))?;
        }
        Ok(taken)
    }

    /// Takes a reservation: its bytes, and whether the buffer must be fixed at [`SMALL`].
    fn take(&self) -> Result<(u64, bool), String> {
        let mut now = self.reserved.load(Ordering::Acquire);
        loop {
            let (bytes, fixed) = if now + self.auto <= self.limit / 2 {
                (self.auto, false)
            } else if now + SMALL <= self.limit {
                (SMALL, true)
            } else {
                return Err(format!(
                    "the server's send buffers are all taken by reverse streams ({} of {} \
                     bytes, --send-buffers): try again later",
                    now, self.limit
                ));
            };
            match self.reserved.compare_exchange_weak(
                now,
                now + bytes,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok((bytes, fixed)),
                Err(seen) => now = seen,
            }
        }
    }
}

/// `tcp_wmem`'s maximum: what autotuning may grow a send buffer to.
fn wmem_max() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").ok()?;
    text.split_whitespace().nth(2)?.parse().ok()
}

/// `tcp_mem`'s pressure threshold, in bytes (the file counts pages).
fn tcp_mem_pressure() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf(3) with a valid name.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: u64, auto: u64) -> Arc<SendBudget> {
        Arc::new(SendBudget {
            limit,
            reserved: AtomicU64::new(0),
            auto,
        })
    }

    /// Autotuned buffers fill half the budget, fixed small ones the rest, then streams are
    /// refused; what a stream gave back is taken again.
    #[test]
    fn the_budget_is_never_passed() {
        let b = budget(8 << 20, 2 << 20);
        assert_eq!(b.take(), Ok((2 << 20, false)));
        assert_eq!(b.take(), Ok((2 << 20, false)));
        let mut small = 0;
        while let Ok((bytes, fixed)) = b.take() {
            assert!(fixed);
            assert_eq!(bytes, SMALL);
            small += 1;
        }
        assert_eq!(small, 16);
        assert_eq!(b.reserved(), 8 << 20);
        let why = b.take().unwrap_err();
        assert!(why.contains("--send-buffers"), "{why}");
        b.reserved.fetch_sub(SMALL, Ordering::AcqRel);
        assert_eq!(b.take(), Ok((SMALL, true)));
    }

    /// A reservation is given back when its stream ends (dropped), and a fixed one bounds the
    /// socket's buffer.
    #[test]
    fn a_reservation_is_given_back_and_bounds_the_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let b = budget(SMALL * 4, SMALL * 2);
        let first = b.reserve(&c).unwrap();
        assert_eq!(b.reserved(), SMALL * 2);
        let second = b.reserve(&c).unwrap();
        let got = socket2::SockRef::from(&c).send_buffer_size().unwrap() as u64;
        assert!(got <= SMALL, "{got}");
        let third = b.reserve(&c).unwrap();
        assert_eq!(b.reserved(), SMALL * 4);
        assert!(b.reserve(&c).is_err());
        drop((first, second, third));
        assert_eq!(b.reserved(), 0);
    }
}
