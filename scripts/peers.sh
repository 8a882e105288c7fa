#!/usr/bin/env bash
# tsperf against iperf3: the same file and chunk sizes, alternating, median of 21; writes peers.md and peers.svg.
# (Twenty-one, not three: loopback on a small VM swings by ±30% from run to run, and 11-run medians
# still moved the nonblocking / blocking ratio at 10240 bytes between 0.88 and 1.03.)
#
#   scripts/peers.sh [--out DIR] [--file PATH] [--chunks LIST] [--reps R]
#                    [--bin-dir DIR]   (use the tsperf binaries in DIR instead of building them)
#                    [--streams LIST [--time SECS]]  (instead: timed runs of LIST streams, forward
#                                      and reverse, against iperf3 -P N and -R; writes streams.md)
#                    [--lan [--rate RATE]]  (with --streams: across an emulated LAN, two network
#                                      namespaces, tbf RATE (default 1gbit); out default results/lan)
#                    [--steady [--size SIZE]]  (instead: large writes, memory to memory, -R, -P 2,
#                                      sendfile vs -Z, file vs -F, CPU per GiB on each end, median
#                                      of --reps (default 7) of SIZE (default 1GiB); writes steady.md)
#
# iperf3 is installed with apt-get when missing and running as root; otherwise the script skips
# with a message (exit 0).
set -euo pipefail
prog=peers.sh
# Paths given on the command line are the caller's: resolve them before moving to the repository.
source "$(dirname "$0")/common.sh"
caller_paths
cd "$(dirname "$0")/.."
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }

out="" file=testdata/tsl.txt chunks=102,1024,10240 reps="" bin="" streams="" time=3 lan=0 rate=1gbit
steady=0 size=1GiB file_given=0
while (($#)); do
  case $1 in
    --out) out=$(here "${2:?--out needs a directory}"); shift 2 ;;
    --file) file=$(here "${2:?--file needs a path}"); file_given=1; shift 2 ;;
    --chunks) chunks=${2:?--chunks needs a list}; shift 2 ;;
    --reps) reps=${2:?--reps needs a number}; shift 2 ;;
    --bin-dir) bin=$(here "${2:?--bin-dir needs a directory}"); shift 2 ;;
    --streams) streams=${2:?--streams needs a list}; shift 2 ;;
    --time) time=${2:?--time needs seconds}; shift 2 ;;
    --lan) lan=1; shift ;;
    --rate) rate=${2:?--rate needs a rate}; shift 2 ;;
    --steady) steady=1; shift ;;
    --size) size=${2:?--size needs a size}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "peers.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

if ((lan)) && [[ -z $streams ]]; then
  echo "peers.sh: --lan applies to --streams (the per-chunk comparison runs on loopback)" >&2; usage >&2; exit 2
fi
if ((steady)) && { ((lan)) || [[ -n $streams ]]; }; then
  echo "peers.sh: --steady runs on loopback, one stream or two, on its own (not with --lan or --streams)" >&2; usage >&2; exit 2
fi
[[ -n $reps ]] || { ((steady)) && reps=7 || reps=21; }
[[ -n $out ]] || { ((lan)) && out=results/lan || out=results; }
bin=$(binaries "$bin" tsserver tsclient tsgen tspeers)

if ! command -v iperf3 >/dev/null; then
  if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "peers.sh: installing iperf3" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null 2>&1; } || true
  fi
  command -v iperf3 >/dev/null || { echo "peers.sh: skipped: iperf3 is not installed and could not be installed (run as root, or apt-get install iperf3)"; exit 0; }
fi

work=$(mktemp -d -t tsperf-peers.XXXXXX)
ns=tsp$$
cleanup() {
  pkill -TERM -f -- "$work" 2>/dev/null || true; kill "${pids[@]}" 2>/dev/null || true
  ((lan)) && scripts/lan.sh down --name "$ns" >/dev/null 2>&1
  rm -rf "$work"
}
pids=()
trap cleanup EXIT
trap 'exit 130' INT TERM

# --steady's large file is made for the run (in the work directory, gone after) unless given.
if ((steady && !file_given)); then file=$work/steady.bin; "$bin/tsgen" --size "$size" "$file"; fi
[[ -f $file ]] || "$bin/tsgen" "$file"
mkdir -p "$out"

host=127.0.0.1 srv_wrap=() lan_args=()
if ((lan)); then
  scripts/lan.sh up --name "$ns" --rate "$rate"
  host=198.18.0.1 srv_wrap=(ip netns exec "$ns-srv")
  lan_args=(--host "$host" --server-wrap "ip netns exec $ns-srv" --client-wrap "ip netns exec $ns-cli"
            --network "An emulated LAN (veth between two namespaces, tbf $rate)")
  iport=5201
else
  iport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 15201)
fi
# The iperf3 server's command line names $work, so the clean-up finds it in any namespace.
"${srv_wrap[@]}" iperf3 -s -B "$host" -p "$iport" --logfile "$work/iperf3.log" &
pids+=($!)
iperf3_pid=$!
# iperf3 -s says nothing when it is ready (and counts any probe connection as a failed test):
# wait, bounded, until its port is listening.
for _ in $(seq 100); do
  [[ -n $("${srv_wrap[@]}" ss -Hltn "sport = :$iport" 2>/dev/null) ]] && break
  sleep 0.05
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# tspeers starts its own tsserver (and reads its port from the listening line).
extra=()
[[ -n $streams ]] && extra+=(--streams "$streams" --time "$time" "${lan_args[@]}")
((steady)) && extra+=(--steady --iperf3-pid "$iperf3_pid")
"$bin/tspeers" --file "$file" --chunks "$chunks" --reps "$reps" --iperf3-port "$iport" \
  --out "$out" --commit "$commit" "${extra[@]}"
