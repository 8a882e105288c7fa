//! tsperf's results as data, the contract scripts read: one typed JSON object per client run
//! ([`json`]), the grid's raw runs ([`runs`]) and the machine they came from ([`machine`]),
//! what limited a transfer ([`verdict`]), samples in time ([`intervals`]), how the client sent
//! ([`strategy`]), units for people ([`units`]) and the statistics over repetitions
//! ([`stats`]). No sockets here: `tsreport` reads and redraws results without them.

pub mod intervals;
pub mod json;
pub mod machine;
pub mod runs;
pub mod stats;
pub mod strategy;
pub mod units;
pub mod verdict;
