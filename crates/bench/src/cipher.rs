//! What a stream over TLS should cost, and what it costs tsperf: the cipher's own cost per GiB
//! measured without sockets (rustls client and server in one thread, records handed over in
//! memory, [`in_memory`]), beside tsperf's clear and encrypted runs against a tsserver
//! ([`run`]). tsperf's encrypted run should cost each end no more than its clear run plus the
//! cipher's own cost, within [`TOLERANCE`].

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use tsperf_proto::tls::Cipher;
use tsperf_stream::tls::{Records, ServerTls, Wire, client};

/// How far above the clear run plus the cipher's own cost an encrypted run may cost an end.
pub const TOLERANCE: f64 = 0.15;

/// One direction of an in-memory connection: bytes written by one end, read by the other.
#[derive(Clone, Default)]
struct Pipe(Rc<RefCell<Vec<u8>>>);

/// An end's socket in memory: it writes into one pipe and reads from the other; a read of an
/// empty pipe says `WouldBlock`, as a non-blocking socket does.
struct End {
    out: Pipe,
    inp: Pipe,
    at: usize,
    /// What [`Wire`] asks of a socket for kernel TLS; never used, as records here are sealed
    /// in the process (`/dev/null`).
    fd: std::fs::File,
}

impl std::os::fd::AsFd for End {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Read for End {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut inp = self.inp.0.borrow_mut();
        if self.at == inp.len() {
            inp.clear();
            self.at = 0;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(inp.len() - self.at);
        buf[..n].copy_from_slice(&inp[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Write for End {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The cipher's own cost: seconds per GiB to encrypt (the sender's side: taking plain bytes,
/// sealing records, handing them on) and to decrypt (the receiver's: taking records, opening
/// them, reading plain bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OwnCost {
    /// Sealing, s/GiB.
    pub encrypt: f64,
    /// Opening, s/GiB.
    pub decrypt: f64,
}

/// Moves `bytes` from a rustls client to a rustls server in memory, in writes of `chunk`, and
/// times each end's part; the bytes arrive whole or it is an error.
pub fn in_memory(cipher: Cipher, bytes: u64, chunk: usize) -> Result<OwnCost> {
    let server = ServerTls::ephemeral()?;
    let (mut stls, mut ctls) = (
        server.connection()?,
        client(cipher, server.cert_sha256(), Records::Process)?,
    );
    let (c2s, s2c) = (Pipe::default(), Pipe::default());
    let mut cend = End {
        out: c2s.clone(),
        inp: s2c.clone(),
        at: 0,
        fd: std::fs::File::open("/dev/null")?,
    };
    let mut send = End {
        out: s2c,
        inp: c2s,
        at: 0,
        fd: std::fs::File::open("/dev/null")?,
    };
    let data = tsperf_sys::testdata::text(chunk);
    let mut buf = vec![0u8; 256 << 10];
    let (mut sent, mut got) = (0u64, 0u64);
    let (mut enc, mut dec) = (Duration::ZERO, Duration::ZERO);
    let mut turns = 0u64;
    while got < bytes {
        turns += 1;
        if turns > bytes / 16 + 1_000_000 {
            bail!("no progress in memory after {got} of {bytes} bytes");
        }
        let t = Instant::now();
        let mut cw = Wire::new(&mut cend, Some(&mut ctls));
        // A turn's worth of writes, as tsperf's sender takes turns.
        for _ in 0..64 {
            if sent >= bytes {
                break;
            }
            let n = (bytes - sent).min(chunk as u64) as usize;
            match cw.write(&data[..n]) {
                Ok(k) => sent += k as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        match cw.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        let t2 = Instant::now();
        enc += t2 - t;
        let mut sw = Wire::new(&mut send, Some(&mut stls));
        loop {
            match sw.read(&mut buf) {
                Ok(0) => bail!("the server's end closed after {got} bytes"),
                Ok(n) => got += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        dec += t2.elapsed();
    }
    let per_gib = |d: Duration| d.as_secs_f64() / (bytes as f64 / (1u64 << 30) as f64);
    Ok(OwnCost {
        encrypt: per_gib(enc),
        decrypt: per_gib(dec),
    })
}

/// One suite: its own cost in memory, and tsperf's CPU per GiB at each end, clear and over
/// TLS (medians of alternating runs).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CipherRow {
    /// The suite's short name.
    pub cipher: String,
    /// Sealing in memory, s/GiB.
    pub encrypt_s_per_gib: f64,
    /// Opening in memory, s/GiB.
    pub decrypt_s_per_gib: f64,
    /// tsperf's client, clear, s/GiB.
    pub clear_client_s_per_gib: f64,
    /// tsperf's server, clear, s/GiB.
    pub clear_server_s_per_gib: f64,
    /// tsperf's client over TLS, s/GiB.
    pub tls_client_s_per_gib: f64,
    /// tsperf's server over TLS, s/GiB.
    pub tls_server_s_per_gib: f64,
    /// Rates, MiB/s: clear and over TLS.
    pub clear_mib_per_s: f64,
    /// Over TLS.
    pub tls_mib_per_s: f64,
}

impl CipherRow {
    /// The client's cost over TLS against its clear cost plus sealing.
    pub fn client_ratio(&self) -> f64 {
        self.tls_client_s_per_gib / (self.clear_client_s_per_gib + self.encrypt_s_per_gib)
    }

    /// The server's cost over TLS against its clear cost plus opening.
    pub fn server_ratio(&self) -> f64 {
        self.tls_server_s_per_gib / (self.clear_server_s_per_gib + self.decrypt_s_per_gib)
    }

    /// Both ends within [`TOLERANCE`] of what the cipher should cost them.
    pub fn within(&self) -> bool {
        self.client_ratio() <= 1.0 + TOLERANCE && self.server_ratio() <= 1.0 + TOLERANCE
    }
}

/// What [`run`] needs: the binaries, the stream's size and chunk, the repetitions.
#[derive(Debug, Clone)]
pub struct CipherConfig {
    /// Where tsserver and tsclient are.
    pub bin_dir: PathBuf,
    /// Bytes per run.
    pub bytes: u64,
    /// Bytes per write.
    pub chunk: u32,
    /// Alternating pairs per suite (medians are reported).
    pub reps: u32,
}

/// A run's CPU per GiB at each end and its rate.
fn tsclient(cfg: &CipherConfig, port: u16, tls: Option<Cipher>) -> Result<(f64, f64, f64)> {
    let client = tsperf_lab::harness::Client {
        bin_dir: &cfg.bin_dir,
        wrap: &[],
        host: "127.0.0.1",
        port,
    };
    let mut args = vec![
        "--bytes".to_owned(),
        cfg.bytes.to_string(),
        "--chunk".to_owned(),
        cfg.chunk.to_string(),
    ];
    if let Some(c) = tls {
        args.extend(["--tls".to_owned(), c.name().to_owned()]);
    }
    let s = client.run(&args)?.stream()?;
    if !s.verified {
        bail!("a run was not verified: {args:?}");
    }
    let gib = s.bytes as f64 / (1u64 << 30) as f64;
    Ok((
        s.cpu.total_s() / gib,
        s.server.cpu.total_s() / gib,
        s.mib_per_s,
    ))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Measures every suite: in memory, then clear and encrypted runs alternating against one
/// tsserver (each pair in turned order every other repetition).
pub fn run(cfg: &CipherConfig, mut progress: impl FnMut(&CipherRow)) -> Result<Vec<CipherRow>> {
    let server = crate::peers::start_tsserver(&cfg.bin_dir, "127.0.0.1", &[])?;
    let mut rows = Vec::new();
    for cipher in Cipher::ALL {
        let own = in_memory(cipher, cfg.bytes, cfg.chunk as usize)?;
        let (mut clear, mut tls) = (Vec::new(), Vec::new());
        for rep in 0..cfg.reps {
            if rep % 2 == 0 {
                clear.push(tsclient(cfg, server.port, None)?);
                tls.push(tsclient(cfg, server.port, Some(cipher))?);
            } else {
                tls.push(tsclient(cfg, server.port, Some(cipher))?);
                clear.push(tsclient(cfg, server.port, None)?);
            }
        }
        let col = |v: &[(f64, f64, f64)], i: usize| {
            median(v.iter().map(|r| [r.0, r.1, r.2][i]).collect())
        };
        let row = CipherRow {
            cipher: cipher.name().to_owned(),
            encrypt_s_per_gib: own.encrypt,
            decrypt_s_per_gib: own.decrypt,
            clear_client_s_per_gib: col(&clear, 0),
            clear_server_s_per_gib: col(&clear, 1),
            tls_client_s_per_gib: col(&tls, 0),
            tls_server_s_per_gib: col(&tls, 1),
            clear_mib_per_s: col(&clear, 2),
            tls_mib_per_s: col(&tls, 2),
        };
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

/// The table for results/cipher.md.
pub fn markdown(
    rows: &[CipherRow],
    cfg: &CipherConfig,
    machine: &impl std::fmt::Display,
) -> String {
    let mut out = format!(
        "# The cipher's cost: rustls in memory beside tsperf over TLS\n\n\
         Made by `scripts/cipher.sh` (tscipher) on {machine}.\n\n\
         Each suite: sealing and opening {} in writes of {} B in one thread with no socket \
         (rustls client and server, records handed over in memory): the cipher's own cost. \
         Then tsperf against one tsserver on loopback, the clear run and the encrypted one \
         alternating, {} pairs, medians: each end's CPU per GiB. An end over TLS should cost \
         no more than its clear run plus the cipher's own cost, within {:.0}%.\n\n\
         | suite | seal s/GiB | open s/GiB | client clear / TLS s/GiB | vs clear + seal | server clear / TLS s/GiB | vs clear + open | MiB/s clear / TLS | within |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
        tsperf_results::units::size(cfg.bytes),
        cfg.chunk,
        cfg.reps,
        100.0 * TOLERANCE
    );
    for r in rows {
        out += &format!(
            "| {} | {:.3} | {:.3} | {:.3} / {:.3} | {:.2}× | {:.3} / {:.3} | {:.2}× | {:.0} / {:.0} | {} |\n",
            r.cipher,
            r.encrypt_s_per_gib,
            r.decrypt_s_per_gib,
            r.clear_client_s_per_gib,
            r.tls_client_s_per_gib,
            r.client_ratio(),
            r.clear_server_s_per_gib,
            r.tls_server_s_per_gib,
            r.server_ratio(),
            r.clear_mib_per_s,
            r.tls_mib_per_s,
            if r.within() { "yes" } else { "NO" }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every suite carries its bytes whole in memory and costs something to seal and open.
    #[test]
    fn every_suite_costs_something_in_memory() {
        for cipher in Cipher::ALL {
            let own = in_memory(cipher, 4 << 20, 10240).unwrap();
            assert!(
                own.encrypt > 0.0 && own.decrypt > 0.0,
                "{cipher:?}: {own:?}"
            );
        }
    }

    /// The check: within the tolerance, and not beyond it.
    #[test]
    fn the_check_holds_an_end_to_its_clear_cost_plus_the_cipher() {
        let row = |tls_client: f64| CipherRow {
            cipher: "x".into(),
            encrypt_s_per_gib: 0.2,
            decrypt_s_per_gib: 0.3,
            clear_client_s_per_gib: 0.4,
            clear_server_s_per_gib: 0.2,
            tls_client_s_per_gib: tls_client,
            tls_server_s_per_gib: 0.5,
            clear_mib_per_s: 1.0,
            tls_mib_per_s: 1.0,
        };
        assert!(row(0.6).within());
        assert!(row(0.69).within());
        assert!(!row(0.7).within());
    }
}
