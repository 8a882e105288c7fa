//! Whether this kernel offers kernel TLS (the `tls` module: `CONFIG_TLS`), which could take a
//! stream's keys after its handshake so that `sendfile` works through TLS.

use std::path::Path;

/// Why this kernel offers no kernel TLS; `Ok` where it does (`/proc/net/tls_stat` exists once
/// the `tls` module is loaded).
pub fn offered() -> Result<(), String> {
    offered_at(
        Path::new("/proc/net/tls_stat"),
        Path::new("/sys/module/tls"),
    )
}

fn offered_at(stat: &Path, module: &Path) -> Result<(), String> {
    if stat.exists() {
        return Ok(());
    }
    Err(if module.exists() {
        format!(
            "{} is missing though the tls module is loaded",
            stat.display()
        )
    } else {
        format!(
            "this kernel has no kernel TLS ({} is missing: CONFIG_TLS unset, or the tls module not \
             loaded: modprobe tls)",
            stat.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel TLS is offered where its statistics file is, and its absence says why.
    #[test]
    fn offered_where_its_statistics_are() {
        let d = tempfile::tempdir().unwrap();
        let stat = d.path().join("tls_stat");
        let module = d.path().join("tls");
        let e = offered_at(&stat, &module).unwrap_err();
        assert!(
            e.contains("no kernel TLS") && e.contains("CONFIG_TLS"),
            "{e}"
        );
        std::fs::write(&stat, "TlsCurrTxSw 0\n").unwrap();
        assert_eq!(offered_at(&stat, &module), Ok(()));
    }
}
