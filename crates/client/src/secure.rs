//! A stream over TLS (`--tls SUITE`): a transport whose bytes, once [`Transport::start_tls`]
//! has begun its TLS after the clear-text hello, its answer and the clock queries, go through
//! the engine's [`Wire`] over the transport's own blocking-meaning reads and writes (its
//! deadlines and waits in poll kept). A run in the clear never goes through it.

use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use anyhow::Result;
use tsperf_stream::tls::{Records, Tls, Wire};

use super::Transport;

/// A transport `T` whose bytes go through TLS once it has begun.
pub(crate) struct Secure<T> {
    inner: T,
    tls: Option<Box<Tls>>,
}

impl<T: Transport> Secure<T> {
    fn wire(&mut self) -> Wire<'_, T> {
        Wire::new(&mut self.inner, self.tls.as_deref_mut())
    }
}

impl<T: Transport> Read for Secure<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.wire().read(buf)
    }
}

impl<T: Transport> Write for Secure<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.wire().write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.wire().write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.wire().flush()
    }
}

impl<T: Transport> AsFd for Secure<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl<T: Transport> tsperf_stream::send::Sink for Secure<T> {
    fn sendfile(&mut self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<usize> {
        if self.tls.is_some() {
            // The handshake first, and with --ktls the keys handed to the kernel.
            self.wire().flush()?;
        }
        match self.tls.as_deref().map(Tls::records) {
            None | Some(Records::Kernel) => self.inner.sendfile(file, offset, len),
            Some(Records::Process) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "sendfile cannot send through TLS sealed in this process (only through kernel \
                 TLS: --ktls)",
            )),
        }
    }
}

impl<T: Transport> Transport for Secure<T> {
    const IO: super::ClientIo = T::IO;

    fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self> {
        Ok(Secure {
            inner: T::connect(host, port, timeout)?,
            tls: None,
        })
    }

    fn peer(&self) -> io::Result<SocketAddr> {
        self.inner.peer()
    }

    fn socket(&self) -> socket2::SockRef<'_> {
        self.inner.socket()
    }

    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        self.inner.set_timeout(timeout)
    }

    fn read_by(&mut self, deadline: Option<Instant>) {
        self.inner.read_by(deadline);
    }

    fn waits(&self) -> (u64, u64) {
        self.inner.waits()
    }

    fn start_tls(&mut self, tls: Tls) -> Result<()> {
        self.tls = Some(Box::new(tls));
        Ok(())
    }

    fn close_write(&mut self) -> io::Result<()> {
        self.wire().close()?;
        self.inner.close_write()
    }

    fn tls(&self) -> Option<&Tls> {
        self.tls.as_deref()
    }
}
