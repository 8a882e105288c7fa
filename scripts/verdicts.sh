#!/usr/bin/env bash
# The verdict's truth table: make each limit on purpose, run tsclient against it, and record
# what tsperf says it was limited by, beside what was made (tsverdicts; this builds it first).
#
#   scripts/verdicts.sh [--out DIR] [--reps R] [--quick] [--only LIST] [--bin-dir DIR]
#
#   --out DIR      where verdicts.jsonl and verdicts.md go (default results/; with --quick,
#                  results/tmp/verdicts)
#   --reps R       runs per case (default 3): a verdict must hold in each
#   --quick        small files and 1 run per case: the fast subset the tests also run
#   --only LIST    only these cases, comma-separated (names as in the table)
#   --bin-dir DIR  use the tsperf binaries in DIR instead of building them
#
# Cases on loopback need nothing; the rest need root: network namespaces and tc (a shaped link,
# addresses from 198.18.0.0/15, by scripts/lan.sh), control groups v1 or v2 (CPU quotas with a
# 10 ms period; a slow disk on a loop device through an io limit). A case whose means are
# missing is skipped with a line saying why.
set -euo pipefail
prog=verdicts.sh
source "$(dirname "$0")/common.sh"
caller_paths
cd "$(dirname "$0")/.."

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "$prog: $*" >&2; usage >&2; exit 2; }

# The flags are checked here, before anything is built, and again by tsverdicts.
args=() bin=""
while (($#)); do
  case $1 in
    --out) args+=(--out "$(here "${2:?--out needs a directory}")"); shift 2 ;;
    --reps)
      [[ ${2:-} =~ ^[1-9][0-9]?$ ]] || bad "invalid --reps '${2:-}': expected a whole number from 1 to 99"
      args+=(--reps "$2"); shift 2 ;;
    --only) args+=(--only "${2:?--only needs a list}"); shift 2 ;;
    --quick) args+=(--quick); shift ;;
    --bin-dir) bin=$(here "${2:?--bin-dir needs a directory}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown option '$1'" ;;
  esac
done
bin=$(binaries "$bin" tsserver tsclient tsverdicts)
exec "$bin/tsverdicts" --bin-dir "$bin" "${args[@]}"
