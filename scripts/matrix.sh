#!/usr/bin/env bash
# The whole seed comparison: build, generate the test file, start servers, run the grid, and
# leave tables, charts and raw JSON in results/ (a --quick run in results/tmp/quick/; or --out DIR).
#
#   scripts/matrix.sh [--quick] [--out DIR] [--reps R] [--file PATH] [--chunks LIST] [--io LIST]
#                     [--host HOST [--port PORT]] [--lan [--rate RATE]] [--stdout-to pty|file]
#                     [--time SECS] [--streams LIST] [--reverse] [--ladder | --ladder-only]
#                     [--anchors] [--bin-dir DIR]
#
#   --quick         a 4 MiB file, one repetition, small latency counts: the grid in under a minute
#   --out DIR       where results go (default results/, the committed ones; results/tmp/quick/
#                   with --quick, so a trial run never overwrites them)
#   --reps R        repetitions of every stream cell (default 3)
#   --file PATH     the file to stream (default testdata/tsl.txt, 36 MiB, generated if missing)
#   --chunks LIST   chunk sizes, comma-separated (default 102,1024,10240)
#   --io LIST       client I/O strategies as a grid dimension: write,writev,sendfile (default write)
#   --host HOST     run the whole grid against a tsserver already running on HOST (the real LAN
#                   case: start `tsserver --allow-client-log` there; each transfer asks for its sink)
#   --port PORT     that server's port (default 7433)
#   --lan           run across an emulated gigabit LAN: two network namespaces (needs root)
#   --rate RATE     the emulated LAN's rate (default 1gbit)
#   --stdout-to     where the --log stdout server's stdout goes: pty (default; read by tmux if
#                   installed, else by script) or file
#   --time SECS     size every stream cell by time: a timed run of SECS (tsclient --time)
#   --streams LIST  stream counts as a grid dimension (tsclient -P), e.g. 1,4 (default 1)
#   --reverse       the stream grid in reverse too (tsclient -R: the server sends the file's size
#                   of generated text, the client receives and logs; sinks none and file)
#   --ladder        after the grid, the file-copy ladder (tsclient --ladder FILE, --reps times)
#                   against a server that saves: ladder.md, ladder.json, ladder.svg
#   --ladder-only   the ladder alone, not the grid
#   --anchors       with --lan and a ladder: scp, rsync -e ssh and curl copy the same file between
#                   the same two namespaces, alternating with the ladder's runs, beside its rungs
#                   in ladder.md (scripts/anchors.sh: needs openssh-server, rsync, curl, nginx-light)
#   --bin-dir DIR   use the tsperf binaries in DIR instead of building them
set -euo pipefail
prog=matrix.sh
# Paths given on the command line are the caller's: resolve them before moving to the repository.
source "$(dirname "$0")/common.sh"
caller_paths
cd "$(dirname "$0")/.."

usage() { sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "matrix.sh: $*" >&2; usage >&2; exit 2; }

out="" reps="" file="" chunks=102,1024,10240 host="" port=7433 quick=0 lan=0 rate=1gbit stdout_to=pty bin="" io=write time="" streams=1 reverse=0 ladder= anchors=0
while (($#)); do
  case $1 in
    --quick) quick=1; shift ;;
    --out) out=$(here "${2:?--out needs a directory}"); shift 2 ;;
    --reps) reps=${2:?--reps needs a number}; shift 2 ;;
    --file) file=$(here "${2:?--file needs a path}"); shift 2 ;;
    --chunks) chunks=${2:?--chunks needs a list}; shift 2 ;;
    --io) io=${2:?--io needs a list}; shift 2 ;;
    --host) host=${2:?--host needs a host}; shift 2 ;;
    --port) port=${2:?--port needs a number}; shift 2 ;;
    --lan) lan=1; shift ;;
    --rate) rate=${2:?--rate needs a rate}; shift 2 ;;
    --stdout-to) stdout_to=${2:?--stdout-to needs pty or file}; shift 2 ;;
    --bin-dir) bin=$(here "${2:?--bin-dir needs a directory}"); shift 2 ;;
    --time) time=${2:?--time needs seconds}; shift 2 ;;
    --streams) streams=${2:?--streams needs a list}; shift 2 ;;
    --reverse) reverse=1; shift ;;
    --ladder) ladder=--ladder; shift ;;
    --ladder-only) ladder=--ladder-only; shift ;;
    --anchors) anchors=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown option '$1'" ;;
  esac
done
[[ -z $reps || $reps =~ ^[1-9][0-9]*$ ]] || bad "invalid --reps '$reps': expected a positive whole number"
[[ -z $time || $time =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "invalid --time '$time': expected seconds, e.g. 2 or 0.5"
[[ $streams =~ ^([1-9][0-9]?|1[01][0-9]|12[0-8])(,([1-9][0-9]?|1[01][0-9]|12[0-8]))*$ ]] ||
  bad "invalid --streams '$streams': expected a comma-separated list of stream counts from 1 to 128, e.g. 1,4"
[[ $port =~ ^[0-9]+$ ]] || bad "invalid --port '$port': expected a number"
((anchors)) && [[ $lan == 0 || -z $ladder ]] && bad "--anchors runs real copy tools between the two namespaces: give --lan and --ladder or --ladder-only"
[[ -n $host && $lan == 1 ]] && bad "--host and --lan cannot be combined: --lan starts its own server"
[[ $stdout_to == pty || $stdout_to == file ]] || bad "invalid --stdout-to '$stdout_to': expected pty or file"
[[ $io =~ ^(write|writev|sendfile)(,(write|writev|sendfile))*$ ]] || bad "invalid --io '$io': expected a comma-separated list of write, writev, sendfile"

bin=$(binaries "$bin" tsserver tsclient tsgen tsmatrix)
# Only a full run writes the committed results/ by default.
if [[ -z $out ]]; then ((quick)) && out=results/tmp/quick || out=results; fi

if ((quick)); then
  reps=${reps:-1} latency_count=100 stall_count=3
  if [[ -z $file ]]; then file=testdata/tsl-quick.txt; [[ -f $file ]] || "$bin/tsgen" --size 4MiB "$file"; fi
else
  reps=${reps:-3} latency_count=1000 stall_count=20
  if [[ -z $file ]]; then file=testdata/tsl.txt; [[ -f $file ]] || "$bin/tsgen" "$file"; fi
fi
[[ -f $file ]] || { echo "matrix.sh: file '$file' not found: expected a regular file to stream" >&2; exit 1; }

work=$(mktemp -d -t tsperf-matrix.XXXXXX)
session=tsperf-matrix-$$
ns=tsm$$
cleanup() {
  # Every process the grid starts carries $work in its command line.
  pkill -TERM -f -- "$work" 2>/dev/null || true
  tmux kill-session -t "$session" 2>/dev/null || true
  ((lan)) && scripts/lan.sh down --name "$ns" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

args=(--out "$out" --file "$file" --reps "$reps" --latency-count "$latency_count" --stall-count "$stall_count"
      --stdout-to "$stdout_to" --tmux-session "$session" --work "$work")
IFS=, read -r -a chunk_list <<<"$chunks"
for c in "${chunk_list[@]}"; do args+=(--chunks "$c"); done
args+=(--io "$io")
[[ -n $time ]] && args+=(--time "$time")
args+=(--streams "$streams")
((reverse)) && args+=(--reverse)
[[ -n $ladder ]] && args+=("$ladder")
if [[ -n $host ]]; then
  args+=(--host "$host" --port "$port" --network "a tsserver on $host:$port")
elif ((lan)); then
  scripts/lan.sh up --name "$ns" --rate "$rate"
  # The rate in Gbit/s, for the tables' "fraction of the line" column.
  line=$(awk -v r="$rate" 'BEGIN { n = r + 0; u = substr(r, length(n "") + 1);
    f = (u == "gbit") ? 1 : (u == "mbit") ? 1e-3 : (u == "kbit") ? 1e-6 : 1e-9; print n * f }')
  if ((anchors)); then
    source scripts/anchors.sh
    anchors_up "$work" "$ns" "$file"
    args+=("${anchor_args[@]}")
  fi
  shaped="tbf $rate"; [[ $rate == none ]] && shaped=unshaped
  args+=(--line-gbit "$line" --bind 198.18.0.1 --server-wrap "ip netns exec $ns-srv" --client-wrap "ip netns exec $ns-cli"
         --network "an emulated LAN (veth between two namespaces, $shaped)")
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+="+dirty"
args+=(--commit "$commit")

mkdir -p "$out"
"$bin/tsmatrix" "${args[@]}"
echo
if [[ $ladder == --ladder-only ]]; then
  echo "matrix.sh: results in $out/: ladder.md, ladder.json, ladder.svg"
else
  echo "matrix.sh: results in $out/: matrix.md, matrix.csv, throughput.svg, latency.svg, timeline.svg, runs.jsonl, setup.json${ladder:+, ladder.md, ladder.json, ladder.svg}"
fi
