//! How a receiving end writes a stream to its disk (version 14): the hello's `save` asks it
//! of a server, the Report's says how it was done.

/// How a receiving end writes a stream to its disk, each way verified and timed apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveMode {
    /// Written into the page cache and renamed into place, never synced: the disk's cache.
    Buffered,
    /// Written, then synced (`fsync`) before the end is reported, the sync timed apart.
    Durable,
    /// Written past the page cache (`O_DIRECT`, aligned blocks), then synced.
    Direct,
    /// Not written at all, even by a server that saves (`--save`): the stream from memory to
    /// memory.
    Discard,
}

impl SaveMode {
    /// True for a mode that writes to the disk.
    pub fn writes(self) -> bool {
        self != SaveMode::Discard
    }

    /// Every mode, in wire order (the hello's code is the index plus one).
    pub const ALL: [SaveMode; 4] = [
        SaveMode::Buffered,
        SaveMode::Durable,
        SaveMode::Direct,
        SaveMode::Discard,
    ];

    /// The mode's name, as a flag takes it and JSON shows it.
    pub fn name(self) -> &'static str {
        match self {
            SaveMode::Buffered => "buffered",
            SaveMode::Durable => "durable",
            SaveMode::Direct => "direct",
            SaveMode::Discard => "none",
        }
    }

    /// The wire code (the hello's, the report's): 0 = none asked (the hello) or not saved (the
    /// report), 1 = buffered, 2 = durable, 3 = direct, 4 = not written (the hello only).
    pub(crate) fn code(save: Option<SaveMode>) -> u8 {
        save.map_or(0, |m| m as u8 + 1)
    }

    /// The mode of a wire code; `None` for an unknown code.
    pub(crate) fn of(code: u8) -> Option<Option<SaveMode>> {
        match code {
            0 => Some(None),
            _ => SaveMode::ALL.get(usize::from(code) - 1).copied().map(Some),
        }
    }
}
