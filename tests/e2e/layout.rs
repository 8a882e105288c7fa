//! The structure is enforced, not kept by habit. The crates depend only downwards
//! (read from `cargo metadata`), the protocol crate stays pure, and files and functions stay
//! small. The end-to-end test modules (this directory) are exempt from the size rules: a test
//! module is a list of cases.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The triple `cargo` builds for here, from `cargo -vV`.
fn host_triple(cargo: &str) -> String {
    let out = Command::new(cargo)
        .arg("-vV")
        .output()
        .expect("run cargo -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("cargo -vV names its host")
        .to_owned()
}

/// `cargo metadata` of the workspace for this platform, offline. A build fetches only
/// this platform's crates, and metadata for every platform needs the others' too (a fresh
/// clone failed here on `anstyle-wincon`); `.ci/run` runs the suite with a cargo home that holds
/// only what `cargo fetch --target <host>` brought.
fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let host = host_triple(&cargo);
    let out = Command::new(&cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each workspace package's normal (not dev, not build) dependencies, by name.
fn direct_deps(meta: &serde_json::Value) -> BTreeMap<String, BTreeSet<String>> {
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| members.contains(p["id"].as_str().unwrap()))
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// Every crate `package` pulls in through normal dependencies, transitively (the resolve graph,
/// as `cargo tree -p PACKAGE -e normal` shows it).
fn transitive_normal(meta: &serde_json::Value, package: &str) -> BTreeSet<String> {
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: BTreeMap<&str, &serde_json::Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let start = name_of
        .iter()
        .find(|(_, n)| **n == package)
        .map(|(id, _)| *id)
        .unwrap();
    let (mut seen, mut todo) = (BTreeSet::new(), vec![start]);
    while let Some(id) = todo.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            let dep_id = dep["pkg"].as_str().unwrap();
            if normal && seen.insert(name_of[dep_id].to_owned()) {
                todo.push(dep_id);
            }
        }
    }
    seen
}

/// The crates depend only downwards: proto on nothing of tsperf's, sys and results on proto,
/// the stream engine on proto and sys (no clap, no JSON), server and client never on each other, lab never on the server, nothing on the root
/// package; plotters and csv only in the lab and the measuring package.
#[test]
fn crates_depend_only_downwards() {
    let meta = metadata();
    let deps = direct_deps(&meta);
    let ours = |p: &str| -> BTreeSet<String> {
        deps[p]
            .iter()
            .filter(|d| d.starts_with("tsperf"))
            .cloned()
            .collect()
    };
    let set =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| n.to_string()).collect() };
    assert_eq!(ours("tsperf-proto"), set(&[]));
    assert_eq!(ours("tsperf-sys"), set(&["tsperf-proto"]));
    assert_eq!(ours("tsperf-results"), set(&["tsperf-proto"]));
    // The engine: below the client and the server, pure of clap and of the published JSON.
    assert_eq!(ours("tsperf-stream"), set(&["tsperf-proto", "tsperf-sys"]));
    // Prometheus: the exposition below the server, the exporter apart from the server and the
    // client (it runs tsclient as a process).
    assert_eq!(
        ours("tsperf-metrics"),
        set(&["tsperf-proto", "tsperf-results"])
    );
    assert_eq!(
        ours("tsperf-probe"),
        set(&["tsperf-metrics", "tsperf-results"])
    );
    let engine = transitive_normal(&meta, "tsperf-stream");
    for banned in ["clap", "tsperf-results", "mio"] {
        assert!(!engine.contains(banned), "tsperf-stream pulls in {banned}");
    }
    for user in ["tsperf-client", "tsperf-server"] {
        assert!(
            deps[user].contains("tsperf-stream"),
            "{user} does not use the engine"
        );
    }
    for (package, never) in [
        ("tsperf-server", ["tsperf-client", "tsperf-lab"]),
        ("tsperf-client", ["tsperf-server", "tsperf-lab"]),
        ("tsperf-lab", ["tsperf-server", "tsperf"]),
        ("tsperf-bench", ["tsperf-server", "tsperf"]),
    ] {
        for n in never {
            assert!(!deps[package].contains(n), "{package} depends on {n}");
        }
    }
    for (package, d) in &deps {
        assert!(
            !d.contains("tsperf"),
            "{package} depends on the root package"
        );
        if package != "tsperf-lab" && package != "tsperf-bench" {
            for drawing in ["plotters", "csv"] {
                assert!(!d.contains(drawing), "{package} depends on {drawing}");
            }
        }
    }
}

/// How tsperf measures itself (`tsperf-bench`: tspeers, tsscale, tsverdicts) is apart from what
/// ships: no package depends on it in any way (normal, dev or build), so `cargo tree -p tsperf`
/// never shows it and the .deb cannot carry it.
#[test]
fn nothing_depends_on_the_measuring_package() {
    let meta = metadata();
    let packages = meta["packages"].as_array().unwrap();
    assert!(
        packages.iter().any(|p| p["name"] == "tsperf-bench"),
        "tsperf-bench is not in the workspace"
    );
    for p in packages {
        for d in p["dependencies"].as_array().unwrap() {
            assert_ne!(
                d["name"], "tsperf-bench",
                "{} depends on tsperf-bench ({})",
                p["name"], d["kind"]
            );
        }
    }
}

/// The protocol crate pulls in no sockets, no libc, no event loop and no clap, at any depth,
/// and forbids unsafe code.
#[test]
fn proto_is_pure() {
    let meta = metadata();
    let all = transitive_normal(&meta, "tsperf-proto");
    for banned in ["libc", "socket2", "mio", "clap"] {
        assert!(
            !all.contains(banned),
            "tsperf-proto pulls in {banned}: {all:?}"
        );
    }
    assert!(
        !all.iter().any(|d| d.starts_with("tsperf")),
        "tsperf-proto pulls in {all:?}"
    );
    let lib = std::fs::read_to_string(root().join("crates/proto/src/lib.rs")).unwrap();
    assert!(lib.contains("#![forbid(unsafe_code)]"));
    let fuzz = std::fs::read_to_string(root().join("fuzz/Cargo.toml")).unwrap();
    let tsperf_deps: Vec<&str> = fuzz.lines().filter(|l| l.starts_with("tsperf")).collect();
    assert_eq!(tsperf_deps.len(), 1, "{tsperf_deps:?}");
    assert!(
        tsperf_deps[0].starts_with("tsperf-proto"),
        "{tsperf_deps:?}"
    );
}

/// The protocol's code reads no clock: every time is passed in by its driver
/// (quinn-proto's `handle_timeout(now)`). Its tests take one `Instant` as their epoch and move
/// it by hand, so they are not held to this (test modules: `tests.rs`, `tests/`, `pair.rs`, and a
/// file's own `mod tests` at its end).
#[test]
fn proto_reads_no_clock() {
    let code = code_of("crates/proto/src");
    assert!(code.len() > 10, "{code:?}");
    for (path, text) in code {
        for clock in ["Instant::now", "SystemTime::now", "UNIX_EPOCH", "elapsed()"] {
            assert!(
                !text.contains(clock),
                "{} reads a clock ({clock}): pass the time in",
                path.display()
            );
        }
    }
}

/// The client's results and the JSON contract are typed end to end: no
/// untyped `serde_json::Value` (or `json!`) where results are built or combined, so a renamed
/// field is a compile error, never a silent `null`. Tests may read JSON untyped.
#[test]
fn client_and_results_have_no_untyped_json() {
    for dir in ["crates/client/src", "crates/results/src"] {
        let code = code_of(dir);
        assert!(code.len() > 5, "{dir}: {code:?}");
        for (path, text) in code {
            for untyped in ["serde_json::Value", "json!(", "Value::Null"] {
                assert!(
                    !text.contains(untyped),
                    "{} builds untyped JSON ({untyped}): use the types of tsperf_results::json",
                    path.display()
                );
            }
        }
    }
}

/// A server is a value. Nothing of it lives in a process-wide static (no
/// `static` item, no `thread_local!`) in the server crate: its stop, console, sessions,
/// counters and log file belong to a `Server`, so two servers in one process stay apart.
#[test]
fn the_server_keeps_no_state_in_statics() {
    let code = code_of("crates/server/src");
    assert!(code.len() > 10, "{code:?}");
    for (path, text) in code {
        for line in text.lines() {
            let item = line
                .trim_start()
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ");
            assert!(
                !item.starts_with("static ") && !item.starts_with("thread_local!"),
                "{}: {line:?}: server state belongs to its Server value",
                path.display()
            );
        }
    }
}

/// The code of every `.rs` file under `dir` (from the workspace's top), without its tests:
/// test modules (`tests.rs`, `tests/`, `pair.rs`) are left out, and a file's own `mod tests`
/// at its end is cut off.
fn code_of(dir: &str) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&root().join(dir), &mut files);
    files
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name != "tests.rs"
                && name != "pair.rs"
                && !p.components().any(|c| c.as_os_str() == "tests")
        })
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text
                .split("\n#[cfg(test)]\nmod tests {")
                .next()
                .unwrap()
                .to_owned();
            (p, code)
        })
        .collect()
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The functions in `text` (a Rust file) and their length in lines, from `fn` to the brace at
/// the same indentation that closes it.
fn functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let mut rest = line.trim_start();
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "unsafe ",
            "const ",
        ] {
            rest = rest.strip_prefix(prefix).unwrap_or(rest);
        }
        let Some(sig) = rest.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = sig
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = " ".repeat(indent) + "}";
        let end = lines[i + 1..]
            .iter()
            .position(|l| {
                l.strip_prefix(close.as_str()).is_some_and(|after| {
                    after.is_empty() || after.starts_with([' ', ';', ',', ')'])
                })
            })
            .map_or(lines.len(), |p| i + 1 + p);
        out.push((name, end - i + 1));
    }
    out
}

/// Every file of the crates and the root package's source is under 800 lines (from 500 it says
/// why it is one piece), every function under 80.
#[test]
fn files_and_functions_stay_small() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        rust_files(&krate.unwrap().path().join("src"), &mut files);
    }
    assert!(files.len() > 50, "{files:?}");
    let mut over = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(root()).unwrap().display().to_string();
        let n = text.lines().count();
        if n >= 800 {
            over.push(format!("{rel}: {n} lines"));
        } else if n >= 500 && !says_why_one_piece(&text) {
            over.push(format!(
                "{rel}: {n} lines, and its module doc does not say why it is one piece (a \
                 `//! One piece: ...` paragraph)"
            ));
        }
        for (name, len) in functions(&text) {
            if len >= 80 {
                over.push(format!("{rel}: fn {name} is {len} lines"));
            }
        }
    }
    assert!(over.is_empty(), "over the limits:\n{}", over.join("\n"));
}

/// A file of 500 lines or more says in its module doc why it is one piece: a line
/// of its leading `//!` block starts `One piece:`. Seams follow concepts, not a line count.
fn says_why_one_piece(text: &str) -> bool {
    text.lines().take_while(|l| l.starts_with("//!")).any(|l| {
        l.trim_start_matches("//!")
            .trim_start()
            .starts_with("One piece:")
    })
}

/// The reason is read from the module doc alone.
#[test]
fn a_long_file_says_why_it_is_one_piece() {
    assert!(says_why_one_piece(
        "//! The loop.\n//!\n//! One piece: the state machine.\nfn a() {}\n"
    ));
    assert!(!says_why_one_piece(
        "//! The loop.\nfn a() {}\n// One piece: not the doc\n"
    ));
    assert!(!says_why_one_piece("fn a() {}\n"));
}

/// The function finder sees a long function and ends each at its own closing brace.
#[test]
fn function_lengths_are_measured() {
    let body = "    x();\n".repeat(3);
    let text = format!(
        "pub(crate) fn a() {{\n{body}}}\n\nimpl X {{\n    fn b(&self) -> u8 {{\n        1\n    }}\n}}\n\
         trait T {{\n    fn c(&self);\n}}\n"
    );
    assert_eq!(
        functions(&text),
        vec![("a".to_owned(), 5), ("b".to_owned(), 3)]
    );
}

/// Every relative link in README.md and docs/*.md names a file that exists (anchors aside), and
/// the README stays a five-minute read: at most 16 KB.
#[test]
fn doc_links_resolve_and_the_readme_is_short() {
    let mut pages = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap();
            if target.is_empty() || target.contains("://") {
                continue;
            }
            if !page.parent().unwrap().join(target).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    let readme = std::fs::metadata(root().join("README.md")).unwrap().len();
    assert!(readme <= 16 * 1024, "README.md is {readme} bytes");
}

/// The README's first screen is what tsperf is and its Quick start (before the background), and
/// no example sends to a benchmark address (198.18.0.0/15) a reader could run before making the
/// namespace that holds it: such an address appears only where the namespaces are named.
#[test]
fn the_readme_starts_with_the_quick_start_and_no_example_leaves_the_machine() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let at = |h: &str| {
        readme
            .find(h)
            .unwrap_or_else(|| panic!("no {h:?} in README.md"))
    };
    assert!(
        at("## Quick start") < at("## Why it exists"),
        "Quick start first"
    );
    assert!(
        at("## Quick start") < 2000,
        "the Quick start on the first screen"
    );
    for (n, line) in readme.lines().enumerate() {
        if line.contains("198.18.") || line.contains("198.19.") {
            assert!(line.contains("namespace"), "README.md:{}: {line}", n + 1);
        }
    }
}

/// No tracked file reaches 1 MiB: large test data is generated (tsgen), and committed results
/// are kept small (a grid with many cells runs fewer repetitions).
#[test]
fn tracked_files_stay_under_a_mebibyte() {
    let Ok(out) = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
    else {
        eprintln!("skipped: git is not installed");
        return;
    };
    if !out.status.success() {
        eprintln!("skipped: not a git checkout");
        return;
    }
    let big: Vec<String> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| std::fs::metadata(root().join(p)).is_ok_and(|m| m.len() >= 1 << 20))
        .collect();
    assert!(big.is_empty(), "tracked files of 1 MiB or more: {big:?}");
}

/// A page that sends the reader to a README section (`README "Limits and
/// security"`) names a heading the README has (the systemd unit, now
/// packaging/debian/tsserver.service, cited "Security and limits").
#[test]
fn readme_sections_cited_elsewhere_exist() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let headings: BTreeSet<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .collect();
    let mut cited = Vec::new();
    let pages = ["docs", "packaging/debian"]
        .into_iter()
        .flat_map(|d| std::fs::read_dir(root().join(d)).unwrap());
    for e in pages {
        let p = e.unwrap().path();
        if !p.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        for (i, _) in text.match_indices("README \"") {
            let rest = &text[i + 8..];
            let title = &rest[..rest.find('"').unwrap_or(rest.len())];
            cited.push((p.display().to_string(), title.to_owned()));
        }
    }
    assert!(!cited.is_empty(), "the service file cites the README");
    let missing: Vec<_> = cited
        .iter()
        .filter(|(_, t)| !headings.contains(t.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "README has no such section: {missing:?}"
    );
}
