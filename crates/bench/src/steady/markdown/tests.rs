//! steady.md's tables and bars, from made-up runs.
use super::super::{Cell, CellResult, Floor, LoopCpu};

fn looped(mib_s: f64, writer: f64, reader: f64) -> LoopSample {
    LoopSample {
        mib_s,
        cpu: LoopCpu {
            writer,
            reader,
            making: 0.0,
        },
    }
}
use super::*;

fn sample(mib_s: f64, cpu: f64) -> Sample {
    Sample {
        mib_s,
        bytes: 1 << 30,
        client_cpu_s: cpu,
        server_cpu_s: cpu / 2.0,
        verified: true,
        timers: 2048,
    }
}

/// The table shows medians, spreads, the ratio and CPU per GiB; a run not verified says so.
#[test]
fn the_table_has_medians_ratios_and_cpu_per_gib() {
    let mut cell = CellResult {
        cell: Cell {
            kind: Kind::Memory,
            chunk: 10240,
        },
        tsperf: vec![sample(100.0, 0.5), sample(300.0, 0.4), sample(200.0, 0.3)],
        iperf3: vec![sample(100.0, 0.2), sample(100.0, 0.2), sample(400.0, 0.2)],
        limit: vec![
            looped(800.0, 0.25, 0.01),
            looped(900.0, 0.2, 0.03),
            looped(700.0, 0.1, 0.02),
        ],
    };
    let mut r = SteadyReport {
        cells: vec![cell.clone()],
        floors: vec![Floor {
            chunk: 10240,
            bare_mib_s: 1000.0,
            hashed_mib_s: 900.0,
            stream_mib_s: 850.0,
            bare_cubic_mib_s: 2000.0,
            hashed_cubic_mib_s: 1500.0,
            cpu: [0.1, 0.2, 0.25, 0.05, 0.15].map(|w| LoopCpu {
                writer: w,
                reader: w / 10.0,
                making: if w == 0.25 { 0.03 } else { 0.0 },
            }),
        }],
        hash_s_per_gib: 0.1,
        len: 1 << 30,
        reps: 3,
        machine: tsperf_lab::machine::probe("test"),
    };
    let md = markdown(&r);
    assert!(
        md.contains("| memory | 10 KiB | 200 [100-300] | 100 [100-400] | 2.00x | 800 | 0.400 | 0.200 | 0.200 | 0.100 | all |"),
        "{md}"
    );
    assert!(
        md.contains("| 10 KiB | 1000 | 900 | 10% | 850 | 2000 | 1500 | 25% |"),
        "{md}"
    );
    assert!(md.contains("| memory | 10 KiB | 2048 | 2048 |"), "{md}");
    assert!(
        md.contains("- memory 10 KiB: rate 2.00x (bar 1.00x) met; client CPU 0.400 against 0.300 NOT met (missed in 2 of 3 pairs); server CPU 0.200 against 0.200 met; both ends 0.600 against 0.500."),
        "{md}"
    );
    assert!(
        md.contains("| 10 KiB | 0.100 / 0.010 | 0.200 / 0.020 | 0.250 + 0.030 making / 0.025 | 0.050 / 0.005 | 0.150 / 0.015 |"),
        "{md}"
    );
    cell.tsperf[0].verified = false;
    r.cells = vec![cell];
    assert!(markdown(&r).contains("NOT ALL"));
}

/// A floor at 10 KiB whose loops spend 0.9 s per GiB writing, 0.09 reading.
fn floor_over_every_bar() -> Floor {
    Floor {
        chunk: 10240,
        bare_mib_s: 2000.0,
        hashed_mib_s: 1500.0,
        stream_mib_s: 900.0,
        bare_cubic_mib_s: 2000.0,
        hashed_cubic_mib_s: 1500.0,
        cpu: [0.9; 5].map(|w| LoopCpu {
            writer: w,
            reader: w / 10.0,
            making: 0.0,
        }),
    }
}

/// `cells` in a report of one repetition whose checksum costs 0.1 s per GiB, beside
/// whole-sitting loops the bars do not use (over every bar).
fn with_loops(cells: Vec<CellResult>) -> SteadyReport {
    SteadyReport {
        cells,
        floors: vec![floor_over_every_bar()],
        hash_s_per_gib: 0.1,
        len: 1 << 30,
        reps: 1,
        machine: tsperf_lab::machine::probe("test"),
    }
}

/// A bar the cell's own checksummed loop (run beside it) misses too says so, with the loop's
/// figure: "beyond this machine's limit" where tsperf is within 5% of the loop, "not this
/// machine's limit" with how far it is where it is not; one the loop meets is plainly not met.
#[test]
fn a_bar_the_cells_own_loop_misses_too_names_the_limit() {
    // Each cell's own loop: the stream loop's writer over the client's bar (0.2 + 0.1),
    // its reader under the server's (0.1 + 0.1); the one-buffer loop under both.
    let cell = |kind, t: f64, i: f64| CellResult {
        cell: Cell { kind, chunk: 10240 },
        tsperf: vec![sample(t, 0.5)],
        iperf3: vec![sample(i, 0.2)],
        limit: match kind {
            Kind::Memory | Kind::Reverse => vec![looped(900.0, 0.4, 0.04)],
            Kind::OneBuffer => vec![looped(1500.0, 0.2, 0.02)],
            _ => vec![],
        },
    };
    let md = markdown(&with_loops(vec![
        cell(Kind::Memory, 100.0, 1000.0),
        cell(Kind::OneBuffer, 100.0, 1000.0),
        cell(Kind::Reverse, 100.0, 1000.0),
        cell(Kind::Sendfile, 100.0, 1000.0),
    ]));
    let beyond = "NOT met (missed in 1 of 1 pairs), beyond this machine's limit";
    // Far below the loop, the miss is tsperf's own.
    let own = "NOT met (missed in 1 of 1 pairs), not this machine's limit";
    assert!(
        md.contains(&format!(
            "- memory 10 KiB: rate 0.10x (bar 1.00x) {own}: tsperf 0.11x its loop (the \
             checksummed loop moves 0.90x iperf3's rate); client CPU 0.500 against 0.300 \
             {own}: tsperf 1.25x its loop (the checksummed loop's writer spends 0.400); \
             server CPU 0.250 against 0.200 NOT met (missed in 1 of 1 pairs); both ends 0.750 \
             against 0.500."
        )),
        "{md}"
    );
    assert!(
        md.contains(
            "- memory, one buffer 10 KiB: rate 0.10x (bar 1.00x) NOT met (missed in 1 of 1 \
             pairs); client CPU 0.500 against 0.300 NOT met (missed in 1 of 1 pairs); server \
             CPU 0.250 against 0.200 NOT met (missed in 1 of 1 pairs); both ends 0.750 \
             against 0.500."
        ),
        "{md}"
    );
    // Reverse: the server writes, so the writer's figure is the server's limit.
    assert!(
        md.contains(&format!(
            "- memory -R 10 KiB: client CPU 0.500 against 0.300 NOT met (missed in 1 of 1 \
             pairs); server CPU 0.250 \
             against 0.200 {beyond} (the checksummed loop's writer spends 0.400); both ends \
             0.750 against 0.500."
        )),
        "{md}"
    );
    assert!(
        md.contains(
            "- sendfile / -Z 10 KiB: client CPU 0.500 against 0.300 NOT met (missed in 1 of 1 \
             pairs);"
        ),
        "{md}"
    );
    assert!(
        md.contains("| sendfile / -Z | 10 KiB | 100 [100-100] | 1000 [1000-1000] | 0.10x | - |"),
        "{md}"
    );
}

/// Within 5% of its loop, a bar the loop misses too is the machine's limit.
#[test]
fn a_bar_missed_at_its_own_loop_is_beyond_the_machine() {
    // 880 MiB/s against the loop's 900, 0.41 s of client CPU per GiB against its 0.40.
    let md = markdown(&with_loops(vec![CellResult {
        cell: Cell {
            kind: Kind::Memory,
            chunk: 131072,
        },
        tsperf: vec![sample(880.0, 0.41)],
        iperf3: vec![sample(1000.0, 0.2)],
        limit: vec![looped(900.0, 0.4, 0.04)],
    }]));
    let beyond = "NOT met (missed in 1 of 1 pairs), beyond this machine's limit";
    assert!(
        md.contains(&format!(
            "- memory 128 KiB: rate 0.88x (bar 1.00x) {beyond} (the checksummed loop moves \
             0.90x iperf3's rate); client CPU 0.410 against 0.300 {beyond} (the checksummed \
             loop's writer spends 0.400); server CPU 0.205 against 0.200 NOT met (missed in 1 \
             of 1 pairs);"
        )),
        "{md}"
    );
}

/// A client makes its generated stream's period each run, as the stream loop's writer does:
/// a client CPU bar is held to the loop's writer with that making, a server's (which makes it
/// once for all its runs) to the writer without it.
#[test]
fn a_clients_bar_counts_the_making_of_its_period() {
    // The loop's writer 0.25 s per GiB and 0.23 making its period: 0.48 against the client's
    // 0.49 (bar 0.2 + 0.1); as the -R cell's server, 0.25 against the server's 0.49.
    let limit = vec![LoopSample {
        mib_s: 2000.0,
        cpu: LoopCpu {
            writer: 0.25,
            reader: 0.04,
            making: 0.23,
        },
    }];
    let cell = |kind, client: f64, server: f64| CellResult {
        cell: Cell { kind, chunk: 10240 },
        tsperf: vec![Sample {
            client_cpu_s: client,
            server_cpu_s: server,
            ..sample(1100.0, 0.0)
        }],
        iperf3: vec![Sample {
            client_cpu_s: 0.2,
            server_cpu_s: 0.2,
            ..sample(1000.0, 0.0)
        }],
        limit: limit.clone(),
    };
    let md = markdown(&with_loops(vec![
        cell(Kind::Memory, 0.49, 0.1),
        cell(Kind::Reverse, 0.1, 0.49),
    ]));
    let not_met = "NOT met (missed in 1 of 1 pairs)";
    assert!(
        md.contains(&format!(
            "- memory 10 KiB: rate 1.10x (bar 1.00x) met; client CPU 0.490 against 0.300 \
             {not_met}, beyond this machine's limit (the checksummed loop's writer spends \
             0.480, 0.230 of it making its period); server CPU 0.100 against 0.300 met;"
        )),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "- memory -R 10 KiB: client CPU 0.100 against 0.300 met; server CPU 0.490 against \
             0.300 {not_met}; both ends"
        )),
        "{md}"
    );
}

/// The sendfile cells have their own loop (the file sent with sendfile): a server CPU bar its
/// reader misses too is the machine's limit there as well, and its rate shows in the table.
#[test]
fn a_sendfile_cell_is_held_to_its_own_loop() {
    // The server's 0.33 s per GiB against iperf3's 0.2 plus the hash's 0.1, the loop's reader
    // 0.32; the client's 0.66 against 0.4 plus 0.1, the loop's writer 0.55.
    let md = markdown(&with_loops(vec![CellResult {
        cell: Cell {
            kind: Kind::Sendfile,
            chunk: 131072,
        },
        tsperf: vec![sample(1100.0, 0.66)],
        iperf3: vec![sample(1000.0, 0.4)],
        limit: vec![looped(1200.0, 0.55, 0.32)],
    }]));
    let beyond = "NOT met (missed in 1 of 1 pairs), beyond this machine's limit";
    assert!(
        md.contains(&format!(
            "- sendfile / -Z 128 KiB: rate 1.10x (bar 1.00x) met; client CPU 0.660 against \
             0.500 NOT met (missed in 1 of 1 pairs), not this machine's limit: tsperf 1.20x its \
             loop (the checksummed loop's writer spends 0.550); server CPU 0.330 against 0.300 \
             {beyond} (the checksummed loop's reader spends 0.320);"
        )),
        "{md}"
    );
    assert!(
        md.contains(
            "| sendfile / -Z | 128 KiB | 1100 [1100-1100] | 1000 [1000-1000] | 1.10x | 1200 |"
        ),
        "{md}"
    );
}

/// A bar missed by less than its figures' last digit gives them a digit more: it never
/// reads "0.153 against 0.153 NOT met" (seen in results/steady.md).
#[test]
fn a_bar_missed_by_a_hair_shows_the_hair() {
    let r = one_cell(
        Kind::Reverse,
        131072,
        (vec![sample(100.0, 0.1532)], vec![sample(100.0, 0.0528)]),
        0.1,
    );
    let md = markdown(&r);
    assert!(
        md.contains(
            "client CPU 0.1532 against 0.1528 NOT met (missed in 1 of 1 pairs); \
             server CPU 0.077 against 0.126 met;"
        ),
        "{md}"
    );
    let mut rate = r.cells[0].clone();
    rate.cell = Cell {
        kind: Kind::Memory,
        chunk: 131072,
    };
    rate.tsperf[0].mib_s = 99.7;
    let md = markdown(&SteadyReport {
        cells: vec![rate],
        ..r
    });
    assert!(
        md.contains("rate 0.997x (bar 1.000x) NOT met (missed in 1 of 1 pairs);"),
        "{md}"
    );
}

/// A bar missed by the medians says in how many of the pairs (each tsperf run against the
/// iperf3 run beside it) it was missed: a coin toss reads as one.
#[test]
fn a_missed_bar_says_how_many_pairs_missed_it() {
    let r = one_cell(
        Kind::Reverse,
        1024,
        (
            vec![sample(90.0, 0.30), sample(120.0, 0.10), sample(80.0, 0.35)],
            vec![sample(100.0, 0.2), sample(100.0, 0.2), sample(100.0, 0.2)],
        ),
        0.0,
    );
    let md = markdown(&r);
    assert!(
        md.contains(
            "client CPU 0.300 against 0.200 NOT met (missed in 2 of 3 pairs); \
             server CPU 0.150 against 0.100 NOT met (missed in 2 of 3 pairs);"
        ),
        "{md}"
    );
    let mut rate = r.cells[0].clone();
    rate.cell = Cell {
        kind: Kind::Memory,
        chunk: 10240,
    };
    let md = markdown(&SteadyReport {
        cells: vec![rate],
        ..r
    });
    assert!(
        md.contains("NOT met (missed in 2 of 3 pairs); client"),
        "{md}"
    );
}

/// A report of one cell of `kind` at `chunk` with these (tsperf, iperf3) runs and no loops.
fn one_cell(
    kind: Kind,
    chunk: u32,
    (tsperf, iperf3): (Vec<Sample>, Vec<Sample>),
    hash: f64,
) -> SteadyReport {
    SteadyReport {
        reps: tsperf.len() as u32,
        cells: vec![CellResult {
            cell: Cell { kind, chunk },
            tsperf,
            iperf3,
            limit: vec![],
        }],
        floors: vec![],
        hash_s_per_gib: hash,
        len: 1 << 30,
        machine: tsperf_lab::machine::probe("test"),
    }
}
