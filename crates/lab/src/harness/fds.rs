//! The open-file limit of a load generator that holds thousands of sockets.

use anyhow::{Result, bail};

/// Raises this process's open-file limit (`RLIMIT_NOFILE`) to at least `need`, the hard limit
/// too where allowed (root); the servers it starts inherit it. Each client of the load
/// generator holds its socket (the file is opened once for all), the server a socket per client.
pub fn raise_open_files(need: u64) -> Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a local rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            bail!(
                "cannot read the open-file limit: {}",
                std::io::Error::last_os_error()
            );
        }
        if lim.rlim_cur >= need {
            return Ok(());
        }
        let raised = libc::rlimit {
            rlim_cur: need.max(lim.rlim_cur),
            rlim_max: need.max(lim.rlim_max),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
            return Ok(());
        }
        let soft = libc::rlimit {
            rlim_cur: lim.rlim_max,
            ..lim
        };
        libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
    }
    if lim.rlim_max >= need {
        return Ok(());
    }
    bail!(
        "the largest count needs about {need} open files and the limit is {} (raise it with \
         ulimit -Hn, or run as root)",
        lim.rlim_max
    )
}
