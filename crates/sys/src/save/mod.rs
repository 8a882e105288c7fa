//! A save directory (`tsserver --save DIR`, a reverse `tsclient --save DIR`): received files
//! land whole or not at all, written the way the run asks ([`SaveMode`]).
//!
//! - Names: a received name must be a plain basename. Empty, `.`, `..`, a path separator, NUL,
//!   control or invisible formatting characters (bidi overrides), slash look-alikes, and our own
//!   temporary prefix are refused with the reason.
//! - Containment: every operation is relative to an open descriptor of `DIR` (`openat`,
//!   `renameat2`, `unlinkat`), and the temporary is created with `O_EXCL | O_NOFOLLOW`. A rename
//!   replaces a symlink already in `DIR` itself, never its target, so no name escapes `DIR`.
//! - Atomicity: data goes to a hidden temporary in `DIR`. Only when every byte has arrived and
//!   the client's digest matches the server's is it synced and renamed into place (without
//!   replacing an existing file unless `--overwrite`). Anything else removes the temporary.
//! - Modes: buffered (into the page cache; renamed, never synced), durable (synced before the
//!   rename, and the directory after it), direct (`O_DIRECT` writes of whole aligned blocks
//!   staged in one buffer, the last partial block written buffered, then synced as durable).

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};
pub use tsperf_proto::SaveMode;

/// The prefix of temporaries; names starting with it are refused.
const TMP_PREFIX: &str = ".tsperf-";

/// The directory received files are saved in.
#[derive(Debug)]
pub struct SaveDir {
    path: PathBuf,
    fd: OwnedFd,
    overwrite: bool,
    /// The number the next temporary's name takes.
    next: AtomicU64,
}

/// A file being received: a temporary in the save directory, removed unless committed.
pub struct Partial {
    dir: Arc<SaveDir>,
    tmp: CString,
    name: CString,
    file: File,
    mode: SaveMode,
    /// Direct mode: the bytes of the block being filled, written when whole.
    staged: Option<Staged>,
    committed: bool,
}

/// The alignment `O_DIRECT` asks of a buffer, its length and the file offset (the logical block
/// of the disks it is used on; 4096 covers 512-byte ones too).
pub const DIRECT_ALIGN: usize = 4096;
/// The bytes a direct save stages before each write: one `O_DIRECT` write per MiB.
pub const DIRECT_BLOCK: usize = 1 << 20;

/// A block-aligned staging buffer for `O_DIRECT` writes.
struct Staged {
    buf: Vec<u8>,
    /// Where the aligned block starts in `buf`.
    at: usize,
    /// Bytes staged.
    len: usize,
}

impl Staged {
    fn new() -> Staged {
        let buf = vec![0; DIRECT_BLOCK + DIRECT_ALIGN];
        let at = buf.as_ptr().align_offset(DIRECT_ALIGN);
        Staged { buf, at, len: 0 }
    }

    fn block(&mut self) -> &mut [u8] {
        &mut self.buf[self.at..self.at + DIRECT_BLOCK]
    }
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains NUL"))
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Why `name` cannot be saved, if it cannot.
pub fn refuse_name(name: &str) -> Option<String> {
    let why = if name.is_empty() {
        "an empty name"
    } else if name == "." || name == ".." {
        "a directory name, not a file name"
    } else if name.contains('/') || name.contains(crate::text::is_slash_lookalike) {
        "a path separator or a look-alike of one"
    } else if name.contains('\0') || name.chars().any(char::is_control) {
        "a NUL or control character"
    } else if name.contains(crate::text::is_active) || name.contains(crate::text::is_invisible) {
        "an invisible formatting character (zero-width, bidirectional override, soft hyphen, filler)"
    } else if name.starts_with(TMP_PREFIX) {
        "the prefix tsperf uses for its temporary files"
    } else {
        return None;
    };
    Some(format!(
        "cannot save as \"{}\": it is {why}",
        crate::text::Peer(name)
    ))
}

impl SaveDir {
    /// Opens `path`, which must be an existing directory.
    pub fn open(path: &Path, overwrite: bool) -> Result<SaveDir> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .with_context(|| format!("cannot use save directory '{shown}'"))?;
        if !meta.is_dir() {
            bail!("save directory '{shown}' is not a directory");
        }
        let c = cstr(&path.to_string_lossy())
            .with_context(|| format!("bad save directory '{shown}'"))?;
        // SAFETY: a plain open(2) of a NUL-terminated path; the fd is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        check(fd).with_context(|| format!("cannot open save directory '{shown}'"))?;
        // SAFETY: fd was just returned by open(2) and is not owned elsewhere.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(SaveDir {
            path: path.to_owned(),
            fd,
            overwrite,
            next: AtomicU64::new(0),
        })
    }

    /// Decides, before any data flows, whether `name` may be saved.
    pub fn admit(&self, name: &str) -> Result<(), String> {
        if let Some(why) = refuse_name(name) {
            return Err(why);
        }
        if !self.overwrite && self.exists(name) {
            return Err(format!(
                "'{name}' already exists in the save directory '{}': a saved file replaces none \
                 (but with tsserver --overwrite)",
                self.path.display()
            ));
        }
        Ok(())
    }

    fn exists(&self, name: &str) -> bool {
        let Ok(c) = cstr(name) else { return false };
        // SAFETY: an all-zero stat is a valid value for fstatat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstatat into the struct we own, `c` a NUL-terminated name that outlives the
        // call, the directory descriptor ours; AT_SYMLINK_NOFOLLOW so a dangling symlink counts.
        unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
        }
    }

    /// Creates the hidden temporary for `name` (already admitted), to be written as `mode`
    /// says. A direct save where the filesystem takes no `O_DIRECT` writes fails with
    /// `InvalidInput`, saying so (ramfs), and leaves nothing behind.
    pub fn create(self: &Arc<Self>, name: &str, mode: SaveMode) -> io::Result<Partial> {
        if !mode.writes() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a stream that is not written has no file",
            ));
        }
        let direct = if mode == SaveMode::Direct {
            libc::O_DIRECT
        } else {
            0
        };
        let flags = libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_EXCL
            | libc::O_NOFOLLOW
            | libc::O_CLOEXEC
            | direct;
        // Numbered per directory: another server of this process saving into the same
        // directory may hold a number, so a name taken is passed over (a bounded number of
        // times: a directory full of our temporaries is an error, not a loop).
        let (fd, tmp_c) = loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let tmp = format!("{TMP_PREFIX}{}-{n}.part", std::process::id());
            let tmp_c = cstr(&tmp)?;
            // SAFETY: openat(2) relative to our directory fd, with a NUL-terminated name that
            // outlives the call; the returned fd is owned by the File below.
            let fd = unsafe { libc::openat(self.fd.as_raw_fd(), tmp_c.as_ptr(), flags, 0o644) };
            if fd < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::AlreadyExists
                && n % 1024 != 1023
            {
                continue;
            }
            if fd < 0
                && direct != 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                // The open made the file before the filesystem refused the flag.
                // SAFETY: unlinkat(2) of our own temporary's name, relative to our directory fd.
                unsafe { libc::unlinkat(self.fd.as_raw_fd(), tmp_c.as_ptr(), 0) };
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the filesystem of '{}' takes no O_DIRECT writes (ramfs, say)",
                        self.path.display()
                    ),
                ));
            }
            check(fd)?;
            break (fd, tmp_c);
        };
        // SAFETY: fd was just returned by openat(2) and is not owned elsewhere.
        let file = unsafe { File::from_raw_fd(fd) };
        Ok(Partial {
            dir: self.clone(),
            tmp: tmp_c,
            name: cstr(name)?,
            file,
            mode,
            staged: (mode == SaveMode::Direct).then(Staged::new),
            committed: false,
        })
    }
}

impl Partial {
    /// Appends received bytes (a direct save: into its block, written when whole).
    pub fn write(&mut self, mut data: &[u8]) -> io::Result<()> {
        let Some(staged) = &mut self.staged else {
            return self.file.write_all(data);
        };
        while !data.is_empty() {
            let len = staged.len;
            let take = data.len().min(DIRECT_BLOCK - len);
            staged.block()[len..len + take].copy_from_slice(&data[..take]);
            staged.len += take;
            data = &data[take..];
            if staged.len == DIRECT_BLOCK {
                self.file.write_all(staged.block())?;
                staged.len = 0;
            }
        }
        Ok(())
    }

    /// Writes out what a direct save has staged: its whole aligned blocks directly, the last
    /// partial one through the page cache (`O_DIRECT` takes whole blocks only). Every byte
    /// written is then in the file, not yet synced; [`Partial::commit`] does this too.
    pub fn flush(&mut self) -> io::Result<()> {
        let Some(mut staged) = self.staged.take() else {
            return Ok(());
        };
        let whole = staged.len / DIRECT_ALIGN * DIRECT_ALIGN;
        let len = staged.len;
        let block = staged.block();
        self.file.write_all(&block[..whole])?;
        if whole < len {
            let fd = self.file.as_raw_fd();
            // SAFETY: fcntl(2) on our own descriptor, reading then setting its status flags.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
            check(flags)?;
            // SAFETY: as above.
            check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_DIRECT) })?;
            self.file.write_all(&block[whole..len])?;
        }
        Ok(())
    }

    /// Ends a save that is measured and not kept: what is staged written out, synced as its mode
    /// says, then the temporary removed (it never takes its name).
    pub fn measured(mut self) -> io::Result<()> {
        self.flush()?;
        if self.mode != SaveMode::Buffered {
            self.file.sync_all()?;
        }
        Ok(())
    }

    /// The way this file is written.
    pub fn mode(&self) -> SaveMode {
        self.mode
    }

    /// Writes out what is staged, syncs the data (unless buffered) and renames it into place;
    /// returns the saved path.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        self.flush()?;
        let durable = self.mode != SaveMode::Buffered;
        if durable {
            self.file.sync_all()?;
        }
        let dir = self.dir.fd.as_raw_fd();
        let flags = if self.dir.overwrite {
            0
        } else {
            libc::RENAME_NOREPLACE
        };
        // SAFETY: renameat2(2) with NUL-terminated names relative to our directory fd.
        check(unsafe { libc::renameat2(dir, self.tmp.as_ptr(), dir, self.name.as_ptr(), flags) })?;
        self.committed = true;
        if durable {
            // Make the rename itself durable.
            // SAFETY: fsync(2) on our directory fd.
            let _ = unsafe { libc::fsync(dir) };
        }
        Ok(self.dir.path.join(self.name.to_string_lossy().as_ref()))
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if !self.committed {
            // SAFETY: unlinkat(2) of our own temporary, relative to our directory fd.
            unsafe { libc::unlinkat(self.dir.fd.as_raw_fd(), self.tmp.as_ptr(), 0) };
        }
    }
}

#[cfg(test)]
mod tests;
