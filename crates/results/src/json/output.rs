//! Whatever `tsclient --json` prints, typed: a result or a failure object.

use serde::{Deserialize, Serialize};

use super::{ClientJson, FailureJson, StreamEntry};

/// Whatever `tsclient --json` prints, one object per run: a result ([`ClientJson`]), or a
/// failure object (a stream's, with what it had measured; or a run's that measured nothing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub enum ClientOutput {
    /// A run that measured something.
    Result(ClientJson),
    /// A lone stream that failed or was interrupted.
    StreamFailed(StreamEntry),
    /// A run that failed before it measured anything, a usage error's included.
    Failed(FailureJson),
}

impl ClientOutput {
    /// Parses one printed object. A result that does not parse is an error naming its field
    /// (the result's own error, not the untagged enum's "did not match any variant").
    pub fn parse(text: &str) -> serde_json::Result<ClientOutput> {
        match serde_json::from_str::<ClientJson>(text) {
            Ok(r) => Ok(ClientOutput::Result(r)),
            Err(result_error) => match serde_json::from_str::<ClientOutput>(text) {
                Ok(out @ (ClientOutput::StreamFailed(_) | ClientOutput::Failed(_))) => Ok(out),
                _ => Err(result_error),
            },
        }
    }
}
