//! Hostile figures: the committed results with any of their numbers set to anything JSON can
//! hold, the edges (0, negative, 5e-324, 1.7e308, the integers' ends) and arbitrary doubles.
//! The grid's parser and every renderer of its report (tables, CSV, charts, `--compare`) must
//! render what parses, or fail with an error, and never panic or run away (a rate of 1.7e308
//! made an axis of 2^31 ticks; a negative round trip a panic). `tsperf-bench` holds its own
//! renderers to the same (feature `testing`).

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::Value;

use super::Setup;
#[cfg(test)]
use super::{Run, aggregate, exporters};
use crate::folder;

/// The committed results' folder.
fn results() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../results"))
}

/// The committed results' file `name` (JSON lines), as JSON.
pub fn committed_lines(name: &str) -> Vec<Value> {
    std::fs::read_to_string(results().join(name))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The committed grid's setup and runs, as JSON.
pub fn committed() -> &'static (Setup, Vec<Value>) {
    static LINES: OnceLock<(Setup, Vec<Value>)> = OnceLock::new();
    LINES.get_or_init(|| {
        let setup = folder::read_json(&results().join("setup.json"), "a grid setup").unwrap();
        (setup, committed_lines("runs.jsonl"))
    })
}

/// Every number's place in `v`, as JSON pointers.
fn numbers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Number(_) => out.push(at),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                numbers(x, format!("{at}/{i}"), out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                numbers(x, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
}

/// What a number may be set to: the edges, and any double.
pub fn figure() -> impl Strategy<Value = Value> {
    let edge = prop_oneof![
        Just(Value::from(0)),
        Just(Value::from(0.0)),
        Just(Value::from(-1.5)),
        Just(Value::from(5e-324)),
        Just(Value::from(f64::MIN_POSITIVE)),
        Just(Value::from(1e16)),
        Just(Value::from(-1e16)),
        Just(Value::from(1.7e308)),
        Just(Value::from(-1.7e308)),
        Just(Value::from(u64::MAX)),
        Just(Value::from(i64::MIN)),
        Just(Value::from(u32::MAX)),
    ];
    // NaN and the infinities are not JSON: they stay what they were.
    let any = any::<f64>()
        .prop_map(|x| serde_json::Number::from_f64(x).map_or(Value::from(1), Value::Number));
    prop_oneof![3 => edge, 1 => any]
}

/// `lines` with the numbers `picks` chose set to their figures (`picks`: an index into every
/// number of every line, and a figure), each line then parsed as a `T` if it still is one.
/// Parsed as serde takes them, not as [`folder::parse`] does (which refuses a figure past any
/// measurement): the renderers must hold on their own.
pub fn mutated<T: serde::de::DeserializeOwned>(
    lines: &[Value],
    picks: &[(usize, Value)],
) -> Vec<T> {
    let mut lines = lines.to_vec();
    let mut places = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let mut here = Vec::new();
        numbers(l, String::new(), &mut here);
        places.extend(here.into_iter().map(|p| (i, p)));
    }
    for (pick, figure) in picks {
        let (line, pointer) = &places[pick % places.len()];
        if let Some(v) = lines[*line].pointer_mut(pointer) {
            *v = figure.clone();
        }
    }
    lines
        .iter()
        .filter_map(|l| serde_json::from_value(l.clone()).ok())
        .collect()
}

/// `text`, a JSON-lines file, with every fractional number set to `float` and every integer
/// to `int` (`None`: left as it was).
pub fn with_numbers(text: &str, float: Option<f64>, int: Option<&Value>) -> String {
    fn walk(v: &mut Value, float: Option<f64>, int: Option<&Value>) {
        match v {
            Value::Number(n) if n.is_f64() => {
                if let Some(f) = float {
                    *v = serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number);
                }
            }
            Value::Number(_) => {
                if let Some(i) = int {
                    *v = i.clone();
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, float, int)),
            Value::Object(o) => o.values_mut().for_each(|x| walk(x, float, int)),
            _ => {}
        }
    }
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            walk(&mut v, float, int);
            serde_json::to_string(&v).unwrap() + "\n"
        })
        .collect()
}

/// The edges numbers are set to: every fraction at 0, negative, the smallest and the largest
/// double (the integers as they were, so the runs still parse), and every integer at 0 and at
/// its largest.
pub fn edges() -> Vec<(&'static str, Option<f64>, Option<Value>)> {
    vec![
        ("zero", Some(0.0), None),
        ("negative", Some(-1.5), None),
        ("tiny", Some(5e-324), None),
        ("huge", Some(1.7e308), None),
        ("negative-huge", Some(-1.7e308), None),
        ("integers-zero", None, Some(Value::from(0))),
        ("integers-max", None, Some(Value::from(u64::MAX))),
        ("all-zero", Some(0.0), Some(Value::from(0))),
    ]
}

#[cfg(test)]
proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The grid's report and both ways of `--compare` against the untouched runs.
    #[test]
    fn the_report_takes_any_figure(
        picks in proptest::collection::vec((any::<usize>(), figure()), 1..40),
        every in any::<bool>(),
    ) {
        let (setup, lines) = committed();
        // Either a few numbers anywhere, or one figure in every place it was picked for.
        let picks: Vec<(usize, Value)> = if every {
            let f = picks[0].1.clone();
            (0..4000).map(|i| (i * 7919, f.clone())).collect()
        } else {
            picks
        };
        let runs: Vec<Run> = mutated(lines, &picks);
        let good: Vec<Run> = mutated(lines, &[]);
        let m = aggregate(setup.clone(), &runs);
        for e in exporters() {
            let _ = e.serialize(&m);
        }
        for (old, new) in [(&good, &runs), (&runs, &good)] {
            if let Ok(c) = crate::compare::compare_runs((setup, old), (setup, new)) {
                let _ = crate::compare::markdown(&c, "old", "new");
                let _ = crate::compare::chart(&c, "old", "new");
            }
        }
    }
}
