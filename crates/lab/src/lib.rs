//! The comparison grid and what it leaves behind. It runs tsserver and tsclient as processes
//! ([`harness`]), never linking the server: the grid ([`matrix`]), its tables and charts
//! ([`report`]), the peers (iperf3 and a bare loop, [`peers`] and [`floor`]), many clients at
//! once ([`scale`]), and the machine a result came from ([`machine`]); results folders are read
//! and written through [`folder`], safe on a folder that may be anyone's.

pub mod bars;
pub mod compare;
pub mod fanout;
pub mod floor;
pub mod folder;
pub mod harness;
pub mod loadgen;
pub mod machine;
pub mod matrix;
pub mod peers;
pub mod report;
pub mod scale;
pub mod steady;
pub mod streams;
pub mod verdicts;
