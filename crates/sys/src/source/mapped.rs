//! The file mapped read-only and guarded, its page table filled ahead of the sender (the
//! module doc of [`super`] says why).

use std::fs::File;
use std::path::Path;

use super::{Blocks, POPULATE_FIRST, guard};

/// Maps the first `len` bytes of `file` and guards the mapping; None where either is not
/// possible, and the caller reads instead.
pub(super) fn map(
    file: &std::sync::Arc<File>,
    path: &Path,
    offset: u64,
    len: u64,
    block_len: usize,
) -> Option<Blocks> {
    let len = usize::try_from(len).ok().filter(|&n| n > 0)?;
    // SAFETY: the mapping is read-only and private to this Source. Another process may still
    // change the file under it: changed bytes are sent as they are when written (and the
    // checksum, taken just before, then disagrees with the server's); a file that shrinks
    // raises SIGBUS on the lost pages, which the guard turns into a clean exit, or EFAULT in
    // write(), which the client reports as the file having shrunk.
    let map = unsafe {
        memmap2::MmapOptions::new()
            .offset(offset)
            .len(len)
            .map(&**file)
    }
    .ok()?;
    let _ = map.advise(memmap2::Advice::Sequential);
    let first = len.min(POPULATE_FIRST);
    let populated = if resident(&map[..first]) {
        populate(&map, 0, first)
    } else {
        0
    };
    let prog = std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "tsperf".into());
    let head = format!(
        "{prog}: error: file '{}' shrank while it was read: ",
        path.display()
    );
    let guard = guard::register(map.as_ptr(), len, &head, &format!(" of {len} bytes\n"))?;
    Some(Blocks::Mapped {
        map,
        _guard: guard,
        block_len,
        populated,
        file: file.clone(),
    })
}

/// Fills the page table of the next `step` bytes of `map` from `from`; returns where the
/// filled part now ends. Where the kernel cannot (before Linux 5.14), pages fault in as they are
/// touched, and that is all it costs.
pub(super) fn populate(map: &memmap2::Mmap, from: usize, step: usize) -> usize {
    let to = map.len().min(from + step);
    #[cfg(target_os = "linux")]
    let _ = map.advise_range(memmap2::Advice::PopulateRead, from, to - from);
    to
}

/// True if every page of `bytes` (page-aligned at its start, as a mapping is) is in the page
/// cache, so touching it reads no disk; false if any is not, or the kernel will not say.
fn resident(bytes: &[u8]) -> bool {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mut pages = vec![0u8; bytes.len().div_ceil(page.max(1))];
    // SAFETY: `bytes` is part of a live mapping starting at a page boundary, and `pages` has
    // one byte per page of it, as mincore(2) writes.
    let rc = unsafe {
        libc::mincore(
            bytes.as_ptr() as *mut libc::c_void,
            bytes.len(),
            pages.as_mut_ptr() as *mut _,
        )
    };
    rc == 0 && pages.iter().all(|p| p & 1 == 1)
}
