//! The measuring programs' help: every option explained, each program opening with what it
//! does.

use crate::common::*;

/// Every option of tspeers, tsscale and tsverdicts says what it does in `-h`.
#[test]
fn every_option_has_help_text() {
    for name in ["tspeers", "tsscale", "tsverdicts"] {
        assert_every_option_has_help(name);
    }
}

/// Each program's help opens with what that program does, not its package's description.
#[test]
fn each_program_describes_itself() {
    for (name, opening) in [
        ("tspeers", "Alternate tsclient and `iperf3"),
        ("tsscale", "Start a fresh tsserver per measurement"),
        (
            "tsverdicts",
            "Make each limit of the verdict's table on purpose",
        ),
    ] {
        assert_describes_itself(name, opening);
    }
}
