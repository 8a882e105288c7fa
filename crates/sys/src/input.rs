//! Reading a file a user names, when it may be anything: a regular file of a bounded size, or
//! a clear refusal. The open does not wait (a FIFO with no writer is refused, not waited on),
//! and what was opened is what is checked, so a name swapped meanwhile cannot slip a device
//! or a FIFO in (issue 51: a key file that was a FIFO blocked both binaries; a results file
//! that was a symlink to `/dev/zero` grew tsreport's memory without bound).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// It could not be opened or read.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// It is a FIFO, a device, a directory, a socket.
    #[error("it is not a regular file")]
    NotRegular,
    /// It is larger than the bound.
    #[error("it has {len} bytes, more than the {most} expected at most")]
    TooLarge {
        /// Its size.
        len: u64,
        /// The bound.
        most: u64,
    },
}

/// The bytes of the regular file at `path`, at most `most` of them (a file that grows while it
/// is read is read no further than the bound, and refused).
pub fn read_regular(path: &Path, most: u64) -> Result<Vec<u8>, InputError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(InputError::NotRegular);
    }
    if meta.len() > most {
        return Err(InputError::TooLarge {
            len: meta.len(),
            most,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    File::take(file, most.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > most {
        return Err(InputError::TooLarge {
            len: bytes.len() as u64,
            most,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a regular file within the bound is read; a FIFO with no writer, a device and a
    /// directory are refused at once, and a file past the bound says its size.
    #[test]
    fn only_regular_files_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        for p in [fifo.as_path(), zero.as_path(), dir.path()] {
            assert!(
                matches!(read_regular(p, 100), Err(InputError::NotRegular)),
                "{p:?}"
            );
        }
        let ok = dir.path().join("ok");
        std::fs::write(&ok, "12345").unwrap();
        assert_eq!(read_regular(&ok, 5).unwrap(), b"12345");
        assert!(matches!(
            read_regular(&ok, 4),
            Err(InputError::TooLarge { len: 5, most: 4 })
        ));
        assert!(matches!(
            read_regular(&dir.path().join("nope"), 4),
            Err(InputError::Io(_))
        ));
    }
}
