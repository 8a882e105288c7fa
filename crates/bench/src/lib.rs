//! How tsperf measures itself, apart from what ships: tsperf beside iperf3 and the bare loops
//! that bound it ([`peers`], [`floor`], [`streams`], [`steady`]), many clients at once against
//! each server model ([`scale`], its load generator [`loadgen`]), the verdict's truth table
//! ([`verdicts`]), and how a `-P` session's streams are best driven ([`fanout`]). It runs
//! tsserver and tsclient as processes through the grid's harness ([`tsperf_lab::harness`]) and
//! writes its reports as the grid does ([`tsperf_lab::report`]). The product (the root package
//! and its .deb) does not depend on it; `scripts/peers.sh`, `scripts/scale.sh` and
//! `scripts/verdicts.sh` build and run its programs.

pub mod bars;
pub mod cipher;
pub mod cli;
pub mod fanout;
pub mod floor;
pub mod loadgen;
pub mod peers;
pub mod scale;
pub mod steady;
pub mod streams;
pub mod verdicts;
