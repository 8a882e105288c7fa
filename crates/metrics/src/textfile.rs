//! Metrics for node_exporter's textfile collector: written to a temporary file beside the
//! target and renamed over it, so the collector never reads half a file.

use std::io::{self, Write};
use std::path::Path;

/// Writes `text` to `path` whole: a temporary file in the same directory, synced, then renamed
/// over `path`. The error names the path.
pub fn write(path: &Path, text: &str) -> io::Result<()> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        named(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file name",
        ))
    })?;
    // The collector reads only `*.prom`: a leading dot and another suffix keep it away.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(named)?;
    tmp.write_all(text.as_bytes()).map_err(named)?;
    tmp.as_file().sync_all().map_err(named)?;
    // Readable by the collector's user, as a file written by hand would be.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644)).map_err(named)?;
    tmp.persist(path).map_err(|e| named(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file is replaced whole and nothing else is left in its directory.
    #[test]
    fn replaces_whole_and_leaves_nothing_beside() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tsperf.prom");
        write(&p, "a 1\n").unwrap();
        write(&p, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let e = write(&dir.path().join("no/such/x.prom"), "").unwrap_err();
        assert!(e.to_string().contains("no/such/x.prom"), "{e}");
    }
}
