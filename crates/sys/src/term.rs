//! What a descriptor is (a terminal, a pipe, a regular file, the null device...), and whether
//! output to it may be coloured.

use tsperf_proto::StdoutKind;

/// What this process's stdout is: a terminal, a pipe, a file, the null device... (`fstat` and
/// `isatty` of descriptor 1, the server's own view, sent to clients in its Accept).
pub fn stdout_kind() -> StdoutKind {
    kind_of(libc::STDOUT_FILENO)
}

/// What descriptor `fd` is: a terminal, a pipe, a regular file, the null device...
pub fn kind_of(fd: i32) -> StdoutKind {
    // SAFETY: an all-zero stat is a valid value for fstat to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into the struct we own; an invalid `fd` is an error return, not UB.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return StdoutKind::Closed;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFIFO => StdoutKind::Pipe,
        libc::S_IFREG => StdoutKind::File,
        libc::S_IFSOCK => StdoutKind::Socket,
        // SAFETY: isatty only asks about the descriptor; it touches no memory of ours.
        libc::S_IFCHR if unsafe { libc::isatty(fd) } == 1 => StdoutKind::Terminal,
        // /dev/null is character device 1:3 on Linux.
        libc::S_IFCHR if libc::major(st.st_rdev) == 1 && libc::minor(st.st_rdev) == 3 => {
            StdoutKind::Null
        }
        libc::S_IFCHR => StdoutKind::CharDevice,
        _ => StdoutKind::Unknown,
    }
}

/// True if output to `fd` may be coloured: it is a terminal and `NO_COLOR` is not set
/// (<https://no-color.org>: any non-empty value).
pub fn colour(fd: i32) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && kind_of(fd) == StdoutKind::Terminal
}
