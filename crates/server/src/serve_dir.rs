//! `tsserver --serve DIR`: the files a reverse stream may ask for by name.
//!
//! Containment as for `--save`: every file is opened relative to an open handle on DIR
//! (`openat`), never by a path built from the name; the name must be a plain basename (the
//! same rules as a saved file's name, [`tsperf_sys::save::refuse_name`]); `O_NOFOLLOW` refuses a
//! symlink, and only a regular file of at least one byte is served (a FIFO, a device, a
//! directory is refused before anything reads it: the open does not wait, `O_NONBLOCK`).

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The directory files are served from.
#[derive(Debug)]
pub struct ServeDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl ServeDir {
    /// Opens `path`, which must be an existing directory.
    pub fn open(path: &Path) -> Result<ServeDir> {
        let shown = path.display();
        if !std::fs::metadata(path)
            .with_context(|| format!("cannot use serve directory '{shown}'"))?
            .is_dir()
        {
            bail!("serve directory '{shown}' is not a directory");
        }
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .with_context(|| format!("bad serve directory '{shown}'"))?;
        // SAFETY: open(2) of a NUL-terminated path; the fd is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("cannot open serve directory '{shown}'"));
        }
        // SAFETY: fd was just returned by open(2) and is not owned elsewhere.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(ServeDir {
            path: path.to_owned(),
            fd,
        })
    }

    /// Opens the served file `name`: a plain basename, not a symlink, a regular file of at
    /// least one byte. Returns it and its path (for messages), or the reason to refuse.
    pub fn open_file(&self, name: &str) -> Result<(File, PathBuf), String> {
        if let Some(why) = tsperf_sys::save::refuse_name(name) {
            return Err(why.replacen("cannot save as", "cannot serve", 1));
        }
        let shown = tsperf_sys::text::Peer(name);
        let c = CString::new(name).map_err(|_| format!("cannot serve \"{shown}\": a NUL"))?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        // SAFETY: openat(2) relative to our directory fd; the returned fd is owned below.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => {
                    format!(
                        "cannot serve \"{shown}\": it is a symlink, and served files are never followed"
                    )
                }
                Some(libc::ENOENT) => format!("no file \"{shown}\" is served here (--serve)"),
                _ => format!("cannot serve \"{shown}\": {e}"),
            });
        }
        // SAFETY: fd was just returned by openat(2) and is not owned elsewhere.
        let file = unsafe { File::from_raw_fd(fd) };
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot serve \"{shown}\": {e}"))?;
        if !meta.is_file() {
            return Err(format!(
                "cannot serve \"{shown}\": it is not a regular file"
            ));
        }
        if meta.len() == 0 {
            return Err(format!("cannot serve \"{shown}\": it is empty"));
        }
        Ok((file, self.path.join(name)))
    }
}
