//! A file read cold (`tsclient --cold`): its pages put out of the page cache before it is
//! sent, so the reads come from the disk, and a check that they really went.
//!
//! The way: dirty pages written back (`fdatasync`), then `posix_fadvise(POSIX_FADV_DONTNEED)`
//! over the range, then `mincore` over a mapping of it that is never touched, counting the
//! pages still cached. The kernel keeps pages another process maps or locks: then the read
//! would not be cold, and it is refused, with the count. A file in memory (tmpfs, ramfs) has no
//! disk to read from and is refused by its filesystem. (`O_DIRECT` reads, the other way, are
//! not used: they would change how the sender reads, and so what is measured.)

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{Context, Result};

/// The way the pages were put out of the cache, as the report names it.
pub const METHOD: &str = "posix_fadvise(DONTNEED)";

/// What putting a file's range out of the page cache did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Evicted {
    /// Pages of the range.
    pub pages: u64,
    /// Of them, cached before.
    pub cached_before: u64,
    /// Of them, cached after: 0, or the eviction is refused.
    pub cached_after: u64,
}

/// A file that cannot be read cold here (in memory, or its pages held by another process): the
/// reason, naming it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotCold(pub String);

/// Filesystems whose files live in memory.
const IN_MEMORY: [(i64, &str); 2] = [(0x0102_1994, "tmpfs"), (0x8584_58f6, "ramfs")];

/// Puts `len` bytes of `path` from `offset` out of the page cache and checks that none of its
/// pages is left. Refuses a file in memory (tmpfs, ramfs) and one whose pages stay.
pub fn evict(path: &Path, offset: u64, len: u64) -> Result<Evicted> {
    let shown = path.display();
    let file = File::open(path).with_context(|| format!("cannot open file '{shown}'"))?;
    if let Some(fs) = in_memory(&file) {
        return Err(NotCold(format!(
            "cannot read '{shown}' cold: it is on {fs}, in memory, so there is no disk to read \
             it from (put it on a disk's filesystem)"
        ))
        .into());
    }
    let before = cached(&file, offset, len).with_context(|| format!("cannot map '{shown}'"))?;
    // Dirty pages are not dropped: written back first. (EINVAL: a file that cannot be synced,
    // which then has no dirty pages either.)
    // SAFETY: fdatasync(2) on our own open descriptor.
    let _ = unsafe { libc::fdatasync(file.as_raw_fd()) };
    // SAFETY: posix_fadvise(2) on our own descriptor; offset and length are plain numbers.
    let rc = unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc))
            .with_context(|| format!("cannot put '{shown}' out of the page cache"));
    }
    let after = cached(&file, offset, len).with_context(|| format!("cannot map '{shown}'"))?;
    let evicted = Evicted {
        pages: after.1,
        cached_before: before.0,
        cached_after: after.0,
    };
    if evicted.cached_after > 0 {
        return Err(NotCold(format!(
            "cannot read '{shown}' cold: {} of its {} pages stayed in the page cache after \
             {METHOD} (another process maps or locks them)",
            evicted.cached_after, evicted.pages
        ))
        .into());
    }
    Ok(evicted)
}

/// The filesystem `file` is on, if it keeps its files in memory.
fn in_memory(file: &File) -> Option<&'static str> {
    // SAFETY: an all-zero statfs is a valid value for fstatfs to fill.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs(2) on our own descriptor into the struct we own.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    let kind = st.f_type as i64;
    IN_MEMORY
        .iter()
        .find(|(magic, _)| *magic == kind)
        .map(|(_, name)| *name)
}

/// Of the pages of `len` bytes of `file` from `offset`: how many are in the page cache, and how
/// many there are. The mapping is never touched, so looking loads nothing.
fn cached(file: &File, offset: u64, len: u64) -> std::io::Result<(u64, u64)> {
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = offset / page * page;
    let span = usize::try_from(offset + len - start).map_err(std::io::Error::other)?;
    if span == 0 {
        return Ok((0, 0));
    }
    // SAFETY: a read-only mapping of our own file that is only passed to mincore(2), never
    // read, so a file that shrinks under it cannot fault here.
    let map = unsafe {
        memmap2::MmapOptions::new()
            .offset(start)
            .len(span)
            .map(file)
    }?;
    let mut vec = vec![0u8; span.div_ceil(page as usize)];
    // SAFETY: the mapping starts at a page boundary and spans `span` bytes; `vec` has one byte
    // per page of it, as mincore(2) writes.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut libc::c_void, span, vec.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let resident = vec.iter().filter(|b| **b & 1 != 0).count() as u64;
    Ok((resident, vec.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A file read into the page cache is put out of it whole, and the count says so; a range
    /// (a stripe) leaves the rest cached.
    #[test]
    fn a_cached_file_is_put_out_of_the_cache() {
        let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let path = d.path().join("f.bin");
        std::fs::write(&path, vec![7u8; 4 << 20]).unwrap();
        let warm = || {
            let mut v = Vec::new();
            File::open(&path).unwrap().read_to_end(&mut v).unwrap();
        };
        warm();
        let e = match evict(&path, 0, 4 << 20) {
            Err(e) if e.is::<NotCold>() && format!("{e:#}").contains("in memory") => {
                eprintln!("skipped: {e:#}");
                return;
            }
            other => other.unwrap(),
        };
        assert_eq!(e.pages, 1024, "{e:?}");
        assert!(e.cached_before > 0, "{e:?}");
        assert_eq!(e.cached_after, 0);
        warm();
        let stripe = evict(&path, 1 << 20, 1 << 20).unwrap();
        assert_eq!((stripe.pages, stripe.cached_after), (256, 0));
        let f = File::open(&path).unwrap();
        assert!(
            cached(&f, 0, 1 << 20).unwrap().0 > 0,
            "the rest stays cached"
        );
        assert_eq!(cached(&f, 1 << 20, 1 << 20).unwrap().0, 0);
    }

    /// A file in memory (tmpfs) has no disk to read cold: refused, naming the filesystem.
    #[test]
    fn a_file_in_memory_is_refused() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            eprintln!("skipped: no /dev/shm");
            return;
        }
        let d = tempfile::tempdir_in(shm).unwrap();
        let path = d.path().join("f.bin");
        std::fs::write(&path, b"some bytes").unwrap();
        let e = format!("{:#}", evict(&path, 0, 10).unwrap_err());
        assert!(e.contains("tmpfs") && e.contains("f.bin"), "{e}");
    }

    /// Pages another process keeps mapped and touched stay cached: refused, with the count.
    #[test]
    fn pages_held_by_a_mapping_are_refused() {
        let d = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
        let path = d.path().join("f.bin");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let f = File::open(&path).unwrap();
        // SAFETY: a read-only mapping of a file this test owns and does not change.
        let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        let sum: u64 = map.iter().step_by(4096).map(|b| u64::from(*b)).sum();
        assert_eq!(sum, 256);
        match evict(&path, 0, 1 << 20) {
            Err(e) if e.is::<NotCold>() && format!("{e:#}").contains("in memory") => {
                eprintln!("skipped: {e:#}")
            }
            Err(e) => {
                let e = format!("{e:#}");
                assert!(
                    e.contains("stayed in the page cache") && e.contains("256"),
                    "{e}"
                );
            }
            Ok(e) => panic!("mapped pages were evicted: {e:?}"),
        }
        drop(map);
    }
}
