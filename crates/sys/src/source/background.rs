//! The checksum of a source on a thread of its own, for `sendfile` (which never copies the
//! data into the process).

use std::hash::Hasher as _;
use std::io;

use anyhow::{Context, Result, bail};
use twox_hash::XxHash3_64;

use super::{BLOCK_TARGET, Source};

impl Source {
    /// Checksums the announced length of the file on a thread of its own, reading it in
    /// [`BLOCK_TARGET`] pieces at explicit offsets (the file's position is left alone). The
    /// thread's answer is the xxh3-64, or the reason it could not read the whole length.
    pub fn digest_in_background(&self) -> Result<std::thread::JoinHandle<Result<u64>>> {
        use std::os::unix::fs::FileExt;
        let file = self.file.clone();
        let (path, len) = (self.path.clone(), self.len);
        // Where each byte is in the file, computed here from a copy of what it needs.
        let span = {
            let (cycle, file_len, offset) = (self.cycle, self.file_len, self.offset);
            move |at: u64| super::file_span(cycle, file_len, offset, at, len - at)
        };
        let work = move || -> Result<u64> {
            let mut buf = vec![0u8; BLOCK_TARGET];
            let mut hasher = XxHash3_64::new();
            let mut at = 0u64;
            while at < len {
                let (pos, run) = span(at);
                let want = run.min(buf.len() as u64) as usize;
                match file.read_at(&mut buf[..want], pos) {
                    Ok(0) => bail!(
                        "file '{}' shrank while it was read: {at} of {len} bytes",
                        path.display()
                    ),
                    Ok(n) => {
                        hasher.write(&buf[..n]);
                        at += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("cannot read file '{}'", path.display()));
                    }
                }
            }
            Ok(hasher.finish())
        };
        std::thread::Builder::new()
            .name("checksum".into())
            .spawn(work)
            .context("cannot start the checksum thread")
    }
}
