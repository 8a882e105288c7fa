//! The comparison grid a user runs and what it leaves behind. It runs tsserver and tsclient as
//! processes ([`harness`]), never linking the server: the grid ([`matrix`]) and its file-copy
//! ladder ([`ladder`]), its tables and charts ([`report`]), two grid runs side by side ([`compare`]), and the machine a result came
//! from ([`machine`]); results folders are read and written through [`folder`], safe on a folder
//! that may be anyone's. How tsperf measures itself (beside iperf3, many clients, the verdict's
//! truth table) is the `tsperf-bench` package, which builds on this one.

pub mod anchors;
pub mod compare;
pub mod folder;
pub mod harness;
pub mod ladder;
pub mod machine;
pub mod matrix;
pub mod report;
