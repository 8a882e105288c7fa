//! The verdict's cases, typed: each limit made on purpose, where, on which end, with which
//! file and flags, and the verdicts that name it rightly.

use tsperf_results::verdict::LimitedBy;

/// Where a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Both ends on loopback.
    Loopback,
    /// The server and client in two network namespaces joined by a veth pair, shaped to this
    /// `tc tbf` rate (`None`: unshaped), by `scripts/lan.sh`.
    Namespaces(Option<&'static str>),
}

impl Place {
    /// The name the table gives it.
    pub fn name(self) -> &'static str {
        match self {
            Place::Loopback => "loopback",
            Place::Namespaces(_) => "namespaces",
        }
    }
}

/// What is limited on purpose, beside the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Nothing beyond the flags and the place.
    None,
    /// The server in a cgroup with 1 ms of CPU per 10 ms.
    ServerCpu,
    /// The client in a cgroup with 1 ms of CPU per 10 ms.
    ClientCpu,
    /// The server's stdout (`--log stdout`) read a line per 0.2 ms.
    SlowStdout,
    /// The client's file on a loop device read through a 4 MiB/s limit, cache dropped.
    SlowSource,
    /// The server saving (`--save`) to a loop device written through a 4 MiB/s limit.
    SlowSave,
}

/// Which of the made files a case sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum File {
    /// The big one (36 MiB; 8 MiB quick).
    Big,
    /// 4 MiB.
    Mid,
    /// 1 MiB (256 KiB quick).
    Small,
    /// None: a reverse case asks the server for the big one's size of the generated stream.
    Reverse,
    /// The big one again and again for [`TIMED`] (quick: [`TIMED_QUICK`]), `-t`: a limit
    /// judged on time shares, which need a run of at least `verdict::MIN_JUDGED` whatever
    /// this machine's speed (36 MiB took 17 ms on loopback here).
    BigTimed,
    /// A reverse case for [`TIMED`] (quick: [`TIMED_QUICK`]), `-R -t`.
    ReverseTimed,
    /// The ladder's file for a slow disk: 32 MiB (16 MiB quick).
    Copy,
    /// The ladder's file where its first rung must run long enough to be judged on time
    /// shares (a CPU quota, a link): 128 MiB (64 MiB quick).
    LongCopy,
}

/// How long a timed case runs, `-t` (seconds).
pub const TIMED: &str = "1";
/// How long a timed case runs with `--quick`, `-t` (seconds).
pub const TIMED_QUICK: &str = "0.3";

impl File {
    /// True for a case run for a time, not a size.
    pub fn timed(self) -> bool {
        matches!(self, File::BigTimed | File::ReverseTimed)
    }
}

/// What names a case rightly.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// A single run's `limited_by`: one of these.
    Verdict(&'static [LimitedBy]),
    /// `tsclient --ladder`: the stage its closing line names, the copy's costliest (its
    /// `costs[0].stage`): one of these.
    Stage(&'static [&'static str]),
}

impl Expect {
    /// The names that are right, as the record keeps them.
    pub fn names(self) -> Vec<&'static str> {
        match self {
            Expect::Verdict(v) => v.iter().map(|e| e.as_str()).collect(),
            Expect::Stage(s) => s.to_vec(),
        }
    }
}

/// One case of the table.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Its name (`server-quota`), as `--only` takes it.
    pub name: &'static str,
    /// Where it runs.
    pub place: Place,
    /// What is made, in words for the table.
    pub made: &'static str,
    /// What names it rightly.
    pub expect: Expect,
    /// What is limited on purpose.
    pub limit: Limit,
    /// What it sends.
    pub file: File,
    /// The client's flags beyond `--host`, `--port` and `--json`.
    pub client: &'static [&'static str],
}

use Expect::Verdict;
use LimitedBy::{
    Network, ReceiverCpu, ReceiverDisk, ReceiverLog, SenderBuffer, SenderCpu, SenderSource,
    SharedCpu,
};

const CPUS: &[LimitedBy] = &[SenderCpu, SharedCpu];
const CHUNK: &[&str] = &["--chunk", "10240"];
const REVERSE: &[&str] = &["-R", "--chunk", "10240"];
/// A ladder case: the rungs of a copy of the case's file against a saving server.
const LADDER: &[&str] = &["--ladder"];

/// Every case, in the table's order.
pub const CASES: &[Case] = &[
    Case {
        name: "rev-loopback",
        place: Place::Loopback,
        made: "reverse (-R), nothing limited: the server's 10240-byte writes (both ends on this machine's CPUs)",
        expect: Verdict(CPUS),
        limit: Limit::None,
        file: File::ReverseTimed,
        client: REVERSE,
    },
    Case {
        name: "loopback",
        place: Place::Loopback,
        made: "nothing limited: 10240-byte writes (both ends on this machine's CPUs)",
        expect: Verdict(CPUS),
        limit: Limit::None,
        file: File::BigTimed,
        client: CHUNK,
    },
    Case {
        name: "sndbuf-1",
        place: Place::Loopback,
        made: "--sndbuf 1 (4608 B granted, below one 10240-byte write)",
        expect: Verdict(&[SenderBuffer]),
        limit: Limit::None,
        file: File::Small,
        client: &["--chunk", "10240", "--sndbuf", "1"],
    },
    Case {
        name: "sndbuf-4096",
        place: Place::Loopback,
        made: "--sndbuf 4096 (8 KiB granted, below one 10240-byte write)",
        expect: Verdict(&[SenderBuffer]),
        limit: Limit::None,
        file: File::Small,
        client: &["--chunk", "10240", "--sndbuf", "4096"],
    },
    Case {
        name: "log-stdout",
        place: Place::Loopback,
        made: "--log stdout into a pipe read a line per 0.2 ms",
        expect: Verdict(&[ReceiverLog]),
        limit: Limit::SlowStdout,
        file: File::Mid,
        client: &["--chunk", "1024"],
    },
    Case {
        name: "server-quota",
        place: Place::Loopback,
        made: "the server in a cgroup with 1 ms of CPU per 10 ms",
        expect: Verdict(&[ReceiverCpu]),
        limit: Limit::ServerCpu,
        file: File::BigTimed,
        client: CHUNK,
    },
    Case {
        name: "client-quota",
        place: Place::Loopback,
        made: "the client in a cgroup with 1 ms of CPU per 10 ms",
        expect: Verdict(&[SenderCpu]),
        limit: Limit::ClientCpu,
        file: File::BigTimed,
        client: CHUNK,
    },
    Case {
        name: "rev-server-quota",
        place: Place::Loopback,
        made: "reverse (-R): the sending server in a cgroup with 1 ms of CPU per 10 ms",
        expect: Verdict(&[SenderCpu]),
        limit: Limit::ServerCpu,
        file: File::ReverseTimed,
        client: REVERSE,
    },
    Case {
        name: "rev-client-quota",
        place: Place::Loopback,
        made: "reverse (-R): the receiving client in a cgroup with 1 ms of CPU per 10 ms",
        expect: Verdict(&[ReceiverCpu]),
        limit: Limit::ClientCpu,
        file: File::ReverseTimed,
        client: REVERSE,
    },
    Case {
        name: "slow-source",
        place: Place::Loopback,
        made: "the file on a loop device read through a 4 MiB/s blkio limit, cache dropped",
        expect: Verdict(&[SenderSource]),
        limit: Limit::SlowSource,
        file: File::Big,
        client: CHUNK,
    },
    Case {
        name: "slow-save",
        place: Place::Loopback,
        made: "--save to a loop device written through a 4 MiB/s blkio limit (the sync pays it)",
        expect: Verdict(&[ReceiverDisk]),
        limit: Limit::SlowSave,
        file: File::Big,
        client: CHUNK,
    },
    Case {
        name: "lan-1gbit",
        place: Place::Namespaces(Some("1gbit")),
        made: "a 1gbit tbf link between two namespaces",
        expect: Verdict(&[Network]),
        limit: Limit::None,
        file: File::BigTimed,
        client: CHUNK,
    },
    Case {
        name: "rev-lan-1gbit",
        place: Place::Namespaces(Some("1gbit")),
        made: "reverse (-R): a 1gbit tbf link between two namespaces",
        expect: Verdict(&[Network]),
        limit: Limit::None,
        file: File::ReverseTimed,
        client: REVERSE,
    },
    Case {
        name: "lan-sndbuf-1",
        place: Place::Namespaces(Some("1gbit")),
        made: "--sndbuf 1 (4608 B granted, below one 10240-byte write) across the 1gbit link",
        expect: Verdict(&[SenderBuffer]),
        limit: Limit::None,
        file: File::Big,
        client: &["--chunk", "10240", "--sndbuf", "1"],
    },
    Case {
        name: "lan-100mbit",
        place: Place::Namespaces(Some("100mbit")),
        made: "a 100mbit tbf link between two namespaces",
        expect: Verdict(&[Network]),
        limit: Limit::None,
        file: File::Big,
        client: CHUNK,
    },
    Case {
        name: "rev-lan-100mbit",
        place: Place::Namespaces(Some("100mbit")),
        made: "reverse (-R): a 100mbit tbf link between two namespaces",
        expect: Verdict(&[Network]),
        limit: Limit::None,
        file: File::Reverse,
        client: REVERSE,
    },
    Case {
        name: "lan-server-quota",
        place: Place::Namespaces(None),
        made: "the server (in its namespace) with 1 ms of CPU per 10 ms",
        expect: Verdict(&[ReceiverCpu]),
        limit: Limit::ServerCpu,
        file: File::BigTimed,
        client: CHUNK,
    },
    Case {
        name: "lan-client-quota",
        place: Place::Namespaces(None),
        made: "the client (in its namespace) with 1 ms of CPU per 10 ms",
        expect: Verdict(&[SenderCpu]),
        limit: Limit::ClientCpu,
        file: File::BigTimed,
        client: CHUNK,
    },
    Case {
        name: "rev-lan-server-quota",
        place: Place::Namespaces(None),
        made: "reverse (-R): the sending server (in its namespace) with 1 ms of CPU per 10 ms",
        expect: Verdict(&[SenderCpu]),
        limit: Limit::ServerCpu,
        file: File::ReverseTimed,
        client: REVERSE,
    },
    Case {
        name: "lan-unshaped",
        place: Place::Namespaces(None),
        made: "nothing limited: a veth pair without tbf (both ends on this machine's CPUs)",
        expect: Verdict(CPUS),
        limit: Limit::None,
        file: File::BigTimed,
        client: CHUNK,
    },
    Case {
        name: "ladder-slow-source",
        place: Place::Loopback,
        made: "the file on a loop device read through a 4 MiB/s blkio limit",
        expect: Expect::Stage(&["the source disk"]),
        limit: Limit::SlowSource,
        file: File::Copy,
        client: LADDER,
    },
    Case {
        name: "ladder-slow-save",
        place: Place::Loopback,
        made: "--save to a loop device written through a 4 MiB/s blkio limit (direct and durable writes pay it)",
        expect: Expect::Stage(&["the far disk"]),
        limit: Limit::SlowSave,
        file: File::Copy,
        client: LADDER,
    },
    Case {
        name: "ladder-client-quota",
        place: Place::Loopback,
        made: "the sending client in a cgroup with 1 ms of CPU per 10 ms",
        expect: Expect::Stage(&["the sender's CPU", "the cipher"]),
        limit: Limit::ClientCpu,
        file: File::LongCopy,
        client: LADDER,
    },
    Case {
        name: "ladder-lan-1gbit",
        place: Place::Namespaces(Some("1gbit")),
        made: "a 1gbit tbf link between two namespaces",
        expect: Expect::Stage(&["the network"]),
        limit: Limit::None,
        file: File::LongCopy,
        client: LADDER,
    },
];

/// Cases the table names but this program cannot make anywhere here, and why: a path with
/// delay needs `netem`.
pub const NOT_MADE: &[(&str, &str)] = &[(
    "lan-sndbuf-bdp",
    "needs netem (tc qdisc netem) for a path with delay; this kernel has none",
)];

impl Case {
    /// True for a case of the ladder (`tsclient --ladder`): judged by its closing line.
    pub fn ladder(&self) -> bool {
        matches!(self.expect, Expect::Stage(_))
    }
}

/// The case named `name`.
pub fn case(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are unique and each case expects a verdict; a reverse case asks with -R. A case
    /// judged on time shares (a CPU's, a quota's, nothing limited) runs for a time.
    #[test]
    fn the_table_is_well_formed() {
        for (i, c) in CASES.iter().enumerate() {
            assert!(CASES[..i].iter().all(|d| d.name != c.name), "{}", c.name);
            assert!(!c.expect.names().is_empty(), "{}", c.name);
            assert_eq!(c.ladder(), c.client.contains(&"--ladder"), "{}", c.name);
            assert_eq!(
                matches!(c.file, File::Reverse | File::ReverseTimed),
                c.client.contains(&"-R"),
                "{}",
                c.name
            );
        }
        assert_eq!(case("slow-save").map(|c| c.limit), Some(Limit::SlowSave));
        for c in CASES {
            let Verdict(expect) = c.expect else {
                assert!(
                    matches!(c.file, File::Copy | File::LongCopy),
                    "{}: a ladder copies its file",
                    c.name
                );
                continue;
            };
            let on_cpus = expect.iter().any(|v| {
                matches!(
                    v,
                    LimitedBy::SenderCpu | LimitedBy::ReceiverCpu | LimitedBy::SharedCpu
                )
            });
            assert!(
                !on_cpus || c.file.timed(),
                "{} is judged on CPU shares",
                c.name
            );
        }
    }
}
