#!/usr/bin/env bash
# The verdict's truth table: make each limit on purpose, run tsclient against it, and record
# what tsperf says it was limited by, beside what was made.
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
# addresses from 198.18.0.0/15), cgroup v1 cpu (CPU quotas with a 10 ms period) and blkio (a slow
# disk on a loop device). A case whose tools are missing is skipped with a line saying why.
set -euo pipefail
prog=verdicts.sh
source "$(dirname "$0")/common.sh"
caller_paths
cd "$(dirname "$0")/.."

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
bad() { echo "$prog: $*" >&2; usage >&2; exit 2; }

out="" reps=3 quick=0 only="" bin=""
while (($#)); do
  case $1 in
    --out) out=$(here "${2:?--out needs a directory}"); shift 2 ;;
    --reps) reps=${2:?--reps needs a number}; shift 2 ;;
    --quick) quick=1; reps=1; shift ;;
    --only) only=,${2:?--only needs a list},; shift 2 ;;
    --bin-dir) bin=$(here "${2:?--bin-dir needs a directory}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad "unknown option '$1'" ;;
  esac
done
[[ $reps =~ ^[1-9][0-9]?$ ]] || bad "invalid --reps '$reps': expected a whole number from 1 to 99"
bin=$(binaries "$bin" tsserver tsclient tsgen tsreport)
bin=$(cd "$bin" && pwd)
if [[ -z $out ]]; then ((quick)) && out=results/tmp/verdicts || out=results; fi
mkdir -p "$out"
jsonl=$out/verdicts.jsonl
: > "$jsonl.part"

work=$(mktemp -d /tmp/tsperf-verdicts.XXXXXX)
server_stdout=$work/server.out
name=tv$$
name=${name:0:8}
cg_cpu=/sys/fs/cgroup/cpu/tsperf-$name
cg_blk=/sys/fs/cgroup/blkio/tsperf-$name
server_pid="" loopdev="" mnt="" has_netns=0
cleanup() {
  set +e
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [[ -n $mnt ]] && umount "$mnt" 2>/dev/null
  [[ -n $loopdev ]] && losetup -d "$loopdev" 2>/dev/null
  for g in "$cg_cpu"-* "$cg_blk"; do [[ -d $g ]] && rmdir "$g" 2>/dev/null; done
  ((has_netns)) && scripts/lan.sh down --name "$name" >/dev/null 2>&1
  rm -rf "$work"
  true
}
trap cleanup EXIT

# Files: small ones for --quick, the grid's size otherwise.
if ((quick)); then big=8MiB mid=4MiB small=256KiB; else big=36MiB mid=4MiB small=1MiB; fi
"$bin/tsgen" --size "$big" "$work/big.txt" >/dev/null
"$bin/tsgen" --size "$mid" "$work/mid.txt" >/dev/null
"$bin/tsgen" --size "$small" "$work/small.txt" >/dev/null

root=0; [[ $EUID -eq 0 ]] && root=1
has_netns=0; ((root)) && command -v ip >/dev/null && command -v tc >/dev/null && has_netns=1
has_cpu=0; ((root)) && [[ -w /sys/fs/cgroup/cpu ]] && has_cpu=1
has_blk=0; ((root)) && [[ -w /sys/fs/cgroup/blkio ]] && command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null && has_blk=1

# skip "CASE, CASE" WHY: says why the cases cannot be made here, and records it for the table.
skip() {
  echo "$prog: skipped $1: $2" >&2
  local c
  for c in ${1//,/ }; do
    wanted "$c" && printf '{"case":"%s","where":"","made":"","expect":"","rep":0,"skipped":"%s","result":null}\n' "$c" "$2" >> "$jsonl.part"
  done
  return 0
}
wanted() { [[ -z $only || $only == *,$1,* ]]; }

# cpu_group NAME QUOTA_US: a cgroup allowed QUOTA_US of CPU per 10 ms period; prints its path.
cpu_group() {
  local g=$cg_cpu-$1
  mkdir -p "$g"
  echo 10000 > "$g/cpu.cfs_period_us"
  echo "$2" > "$g/cpu.cfs_quota_us"
  printf '%s' "$g"
}

# lan_up RATE: two namespaces joined by a veth pair, each end shaped to RATE with tbf (none:
# not shaped), by scripts/lan.sh.
lan_up() { scripts/lan.sh up --name "$name" --rate "$1" >/dev/null; }

# in_place NS CGROUP CMD...: runs CMD in network namespace NS (or here for "-") and in CGROUP
# (or none for "-"). The cgroup is joined before `ip netns exec`, which hides /sys/fs/cgroup.
in_place() {
  local ns=$1 cg=$2; shift 2
  local join=""
  [[ $cg != - ]] && join="echo \$\$ > '$cg/cgroup.procs'; "
  if [[ $ns == - ]]; then
    exec bash -c "${join}exec \"\$@\"" _ "$@"
  else
    exec bash -c "${join}exec ip netns exec '$ns' \"\$@\"" _ "$@"
  fi
}

# start_server NS CGROUP ARGS...: starts tsserver, its stdout to $server_stdout, and sets $port
# once it listens.
start_server() {
  local ns=$1 cg=$2; shift 2
  # The last server's lines must not be read as this one's.
  rm -f "$work/server.out" "$work/server.err"
  in_place "$ns" "$cg" "$bin/tsserver" --port 0 "$@" > "$server_stdout" 2> "$work/server.err" &
  server_pid=$!
  port=""
  for _ in $(seq 100); do
    port=$(grep -o 'listening on .*' "$work/server.err" "$work/server.out" 2>/dev/null | grep -o '[0-9]*$' | head -1) || true
    [[ -n $port ]] && return 0
    sleep 0.05
  done
  echo "$prog: tsserver did not start: $(cat "$work/server.err")" >&2
  exit 1
}

stop_server() {
  [[ -n $server_pid ]] && { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true; }
  server_pid=""
}

# run_case NAME WHERE MADE EXPECT NS CGROUP FILE CLIENT_ARGS...: REPS runs of tsclient, each
# recorded as one line of verdicts.jsonl (FILE "-": none, a reverse run).
run_case() {
  local case=$1 where=$2 made=$3 expect=$4 ns=$5 cg=$6 file=$7; shift 7
  local host=127.0.0.1
  [[ $ns != - ]] && host=198.18.0.1
  local rep
  for rep in $(seq "$reps"); do
    local json
    # A reverse case (file "-") names no file: its arguments ask the server for the bytes.
    local files=("$file")
    [[ $file == - ]] && files=()
    json=$(in_place "$ns" "$cg" "$bin/tsclient" --host "$host" --port "$port" --json "$@" "${files[@]}" 2>/dev/null) || true
    [[ -n $json ]] || json='{"error":"tsclient printed nothing"}'
    printf '{"case":"%s","where":"%s","made":"%s","expect":"%s","rep":%d,"result":%s}\n' \
      "$case" "$where" "$made" "$expect" "$rep" "$(tr -d '\n' <<<"$json")" >> "$jsonl.part"
    echo "$prog: $case $rep/$reps: $(grep -o '"limited_by": *"[a-z-]*"' <<<"$json" | head -1 || echo '?')" >&2
  done
}

# --- loopback --------------------------------------------------------------------------------
start_server - - --log none
wanted rev-loopback && run_case rev-loopback loopback "reverse (-R), nothing limited: the server's 10240-byte writes (both ends on this machine's CPUs)" "sender-cpu|shared-cpu" - - - -R --bytes "$big" --chunk 10240
wanted loopback && run_case loopback loopback "nothing limited: 10240-byte writes (both ends on this machine's CPUs)" "sender-cpu|shared-cpu" - - "$work/big.txt" --chunk 10240
wanted sndbuf-1 && run_case sndbuf-1 loopback "--sndbuf 1 (4608 B granted, below one 10240-byte write)" sender-buffer - - "$work/small.txt" --chunk 10240 --sndbuf 1
wanted sndbuf-4096 && run_case sndbuf-4096 loopback "--sndbuf 4096 (8 KiB granted, below one 10240-byte write)" sender-buffer - - "$work/small.txt" --chunk 10240 --sndbuf 4096
stop_server
if wanted log-stdout; then
  # A slow terminal: the server's stdout read a line at a time, 0.2 ms per line, by a reader
  # that sleeps between lines (it takes little CPU, as a terminal on another machine would).
  mkfifo "$work/slow-stdout"
  perl -e '$| = 1; while (<STDIN>) { select(undef, undef, undef, 0.0002) }' < "$work/slow-stdout" &
  server_stdout=$work/slow-stdout
  start_server - - --log stdout
  run_case log-stdout loopback "--log stdout into a pipe read a line per 0.2 ms" receiver-log - - "$work/mid.txt" --chunk 1024
  stop_server
  server_stdout=$work/server.out
  wait 2>/dev/null || true
fi
if ((has_cpu)); then
  g=$(cpu_group srv 1000)
  start_server - "$g" --log none
  wanted server-quota && run_case server-quota loopback "the server in a cgroup with 1 ms of CPU per 10 ms" receiver-cpu - - "$work/big.txt" --chunk 10240
  stop_server
  start_server - - --log none
  g=$(cpu_group cli 1000)
  wanted client-quota && run_case client-quota loopback "the client in a cgroup with 1 ms of CPU per 10 ms" sender-cpu - "$g" "$work/big.txt" --chunk 10240
  stop_server
  # Reverse (tsclient -R): the server sends, so the roles turn round.
  g=$(cpu_group rsrv 1000)
  start_server - "$g" --log none
  wanted rev-server-quota && run_case rev-server-quota loopback "reverse (-R): the sending server in a cgroup with 1 ms of CPU per 10 ms" sender-cpu - - - -R --bytes "$big" --chunk 10240
  stop_server
  start_server - - --log none
  g=$(cpu_group rcli 1000)
  wanted rev-client-quota && run_case rev-client-quota loopback "reverse (-R): the receiving client in a cgroup with 1 ms of CPU per 10 ms" receiver-cpu - "$g" - -R --bytes "$big" --chunk 10240
  stop_server
else
  skip "server-quota, client-quota, rev-server-quota, rev-client-quota" "needs root and cgroup v1 cpu at /sys/fs/cgroup/cpu"
fi

# A slow disk: a loop device, read (or written) through a blkio limit.
if ((has_blk)) && { wanted slow-source || wanted slow-save; }; then
  truncate -s 128M "$work/disk.img"
  loopdev=$(losetup -f --show "$work/disk.img")
  mkfs.ext4 -q "$work/disk.img" 2>/dev/null || mkfs.ext4 -q "$loopdev"
  mnt=$work/mnt; mkdir -p "$mnt"; mount "$loopdev" "$mnt"
  cp "$work/big.txt" "$mnt/source.txt"; mkdir -p "$mnt/save"
  devno=$(cat "/sys/block/${loopdev#/dev/}/dev")
  mkdir -p "$cg_blk"
  echo "$devno 4194304" > "$cg_blk/blkio.throttle.read_bps_device"
  echo "$devno 4194304" > "$cg_blk/blkio.throttle.write_bps_device"
  start_server - - --log none
  if wanted slow-source; then
    for rep in $(seq "$reps"); do
      sync; echo 1 > /proc/sys/vm/drop_caches
      reps_saved=$reps; reps=1
      run_case slow-source loopback "the file on a loop device read through a 4 MiB/s blkio limit, cache dropped" sender-source - "$cg_blk" "$mnt/source.txt" --chunk 10240
      reps=$reps_saved
    done
  fi
  stop_server
  if wanted slow-save; then
    start_server - "$cg_blk" --log none --save "$mnt/save" --overwrite
    run_case slow-save loopback "--save to a loop device written through a 4 MiB/s blkio limit (the sync pays it)" receiver-disk - - "$work/big.txt" --chunk 10240
    stop_server
  fi
else
  ((has_blk)) || skip "slow-source, slow-save" "needs root, cgroup v1 blkio, losetup and mkfs.ext4"
fi

# --- across two namespaces (one machine) ------------------------------------------------------
if ((has_netns)); then
  for rate in 1gbit 100mbit; do
    lan_up "$rate"
    start_server "$name-srv" - --log none
    wanted "lan-$rate" && run_case "lan-$rate" "namespaces" "a $rate tbf link between two namespaces" network "$name-cli" - "$work/big.txt" --chunk 10240
    wanted "rev-lan-$rate" && run_case "rev-lan-$rate" "namespaces" "reverse (-R): a $rate tbf link between two namespaces" network "$name-cli" - - -R --bytes "$big" --chunk 10240
    if [[ $rate == 1gbit ]]; then
      wanted lan-sndbuf-1 && run_case lan-sndbuf-1 namespaces "--sndbuf 1 (4608 B granted, below one 10240-byte write) across the 1gbit link" sender-buffer "$name-cli" - "$work/big.txt" --chunk 10240 --sndbuf 1
    fi
    stop_server
  done
  # A path with delay, so that a send buffer can be smaller than its bandwidth × delay while
  # larger than one write: netem, where the kernel has it.
  if wanted lan-sndbuf-bdp; then
    lan_up none
    if tc -n "$name-cli" qdisc replace dev "$name-c" root netem delay 5ms rate 1gbit 2>/dev/null &&
       tc -n "$name-srv" qdisc replace dev "$name-s" root netem delay 5ms rate 1gbit 2>/dev/null; then
      start_server "$name-srv" - --log none
      run_case lan-sndbuf-bdp namespaces "--sndbuf 65536 (128 KiB granted, above one write) on a 1gbit link with a 10 ms round trip: below its bandwidth × delay of 1.25 MB" sender-buffer "$name-cli" - "$work/small.txt" --chunk 10240 --sndbuf 65536
      stop_server
    else
      skip lan-sndbuf-bdp "needs netem (tc qdisc netem) for a path with delay; this kernel has none"
    fi
  fi
  lan_up none
  if ((has_cpu)); then
    g=$(cpu_group lsrv 1000)
    start_server "$name-srv" "$g" --log none
    wanted lan-server-quota && run_case lan-server-quota namespaces "the server (in its namespace) with 1 ms of CPU per 10 ms" receiver-cpu "$name-cli" - "$work/big.txt" --chunk 10240
    stop_server
    start_server "$name-srv" - --log none
    g=$(cpu_group lcli 1000)
    wanted lan-client-quota && run_case lan-client-quota namespaces "the client (in its namespace) with 1 ms of CPU per 10 ms" sender-cpu "$name-cli" "$g" "$work/big.txt" --chunk 10240
    stop_server
    g=$(cpu_group rlsrv 1000)
    start_server "$name-srv" "$g" --log none
    wanted rev-lan-server-quota && run_case rev-lan-server-quota namespaces "reverse (-R): the sending server (in its namespace) with 1 ms of CPU per 10 ms" sender-cpu "$name-cli" - - -R --bytes "$big" --chunk 10240
    stop_server
  fi
  start_server "$name-srv" - --log none
  wanted lan-unshaped && run_case lan-unshaped namespaces "nothing limited: a veth pair without tbf (both ends on this machine's CPUs)" "sender-cpu|shared-cpu" "$name-cli" - "$work/big.txt" --chunk 10240
  stop_server
else
  skip "lan-1gbit, rev-lan-1gbit, lan-sndbuf-1, lan-100mbit, rev-lan-100mbit, lan-sndbuf-bdp, lan-server-quota, lan-client-quota, rev-lan-server-quota, lan-unshaped" "needs root and iproute2 (ip, tc)"
fi

mv "$jsonl.part" "$jsonl"
rm -f "$out/verdicts-machine.json"
"$bin/tsreport" --verdicts --commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$out" >/dev/null
echo "$prog: wrote $jsonl and $out/verdicts.md" >&2
