//! One open file for many sources in one process: a load generator's thousands of clients of
//! one file would otherwise hold a descriptor each.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use super::{Access, Source, basename};

impl Source {
    /// A source of `file`, opened once for many sources in one process (a load generator's
    /// thousands of clients of one file: a descriptor each would be thousands more), checked
    /// as [`Source::open`] checks a path; `path` names it and gives the announced name.
    pub fn open_shared(file: Arc<File>, path: &Path, chunk: u32, batch: u32) -> Result<Source> {
        let meta = file
            .metadata()
            .with_context(|| format!("cannot stat file '{}'", path.display()))?;
        if !meta.is_file() || meta.len() == 0 {
            bail!(
                "'{}' is not a regular file of at least 1 byte: expected one",
                path.display()
            );
        }
        Source::from_shared(file, path, basename(path)?, chunk, batch, Access::Map)
    }
}
