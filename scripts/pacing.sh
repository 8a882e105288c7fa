#!/usr/bin/env bash
# How closely -b paces a timed run, each way, in both server models, across an emulated LAN: two
# network namespaces joined by a veth pair (scripts/lan.sh; 198.18.0.0/15), the link unshaped so
# the pace is the only limit. Each cell is one timed run (`-t`); it reports the rate asked, the
# rate the receiving end measured, and how long past its time the run ended (what the sender's
# socket still held when its time was up).
#
#   scripts/pacing.sh [--out DIR] [--time SECS (3)] [--rates "1M 10M 100M"] [--bin-dir DIR]
#
# Needs root (namespaces) and python3 (to read the JSON). Writes DIR/pacing.md (default
# DIR: results).
set -euo pipefail
prog=pacing.sh
source "$(dirname "$0")/common.sh"
caller_paths
cd "$(dirname "$0")/.."
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }

out=results time=3 rates="1M 10M 100M" bin=""
while (($#)); do
  case $1 in
    --out) out=$(here "${2:?--out needs a directory}"); shift 2 ;;
    --time) time=${2:?--time needs seconds}; shift 2 ;;
    --rates) rates=${2:?--rates needs a list such as \"1M 10M\"}; shift 2 ;;
    --bin-dir) bin=$(here "${2:?--bin-dir needs a directory}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$prog: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $time =~ ^[0-9]+$ && $time -ge 1 && $time -le 30 ]] || { echo "$prog: invalid --time '$time': expected 1 to 30 seconds" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "$prog: needs root: the runs cross two network namespaces" >&2; exit 1; }
command -v python3 >/dev/null || { echo "$prog: needs python3 to read tsclient's JSON" >&2; exit 1; }
bin=$(binaries "$bin" tsserver tsclient)
bin=$(cd "$bin" && pwd)
mkdir -p "$out"

name=tspace
scripts/lan.sh up --name "$name" --rate none >&2
server=""
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  scripts/lan.sh down --name "$name" >&2 || true
}
trap cleanup EXIT

rows=$(mktemp)
for model in event-loop blocking; do
  flag=(); [[ $model == blocking ]] && flag=(--blocking)
  ip netns exec "$name-srv" "$bin/tsserver" --port 7433 --log none "${flag[@]}" >/dev/null 2>&1 &
  server=$!
  sleep 0.5
  for way in forward reverse; do
    dir=(); [[ $way == reverse ]] && dir=(-R)
    for rate in $rates; do
      json=$(timeout $((time + 30)) ip netns exec "$name-cli" "$bin/tsclient" --host 198.18.0.1 \
        --port 7433 -b "$rate" -t "$time" "${dir[@]}" --json 2>/dev/null || true)
      printf '%s\t%s\t%s\t%s\n' "$model" "$way" "$rate" "${json//$'\n'/ }" >>"$rows"
      echo "$prog: $model $way -b $rate done" >&2
    done
  done
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain --untracked-files=no -- . ":!results" 2>/dev/null) ]] || commit+="+dirty"
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
python3 - "$rows" "$time" "$commit" "$cpu ($(nproc) cores), kernel $(uname -r)" >"$out/pacing.md" <<'EOF'
import json, sys
rows, time, commit, machine = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
scale = {"K": 1e3, "M": 1e6, "G": 1e9}
print("# How closely -b paces a timed run\n")
print(f"Written by `scripts/pacing.sh` on {machine}; tsperf commit {commit}. Two network "
      "namespaces joined by an unshaped veth pair; one timed run (`-t "
      f"{time:g}`) a cell. *Rate* is what the receiving end measured (first to last byte); "
      "*past its time* is how much longer than its time the run took (what the sender's "
      "socket still held when its time was up).\n")
print("| server | direction | -b | asked Mbit/s | rate Mbit/s | of asked | past its time | verified |")
print("|---|---|---:|---:|---:|---:|---:|:-:|")
for line in open(rows):
    model, way, rate, text = line.rstrip("\n").split("\t", 3)
    asked = float(rate[:-1]) * scale[rate[-1].upper()] / 1e6 if rate[-1].isalpha() else float(rate) / 1e6
    try:
        v = json.loads(text)
        got = v["mib_per_s"] * 1048576 * 8 / 1e6
        past = f'{v["elapsed_s"] - time:.2f} s'
        ok = "yes" if v.get("verified") else "no"
        print(f"| {model} | {way} | {rate} | {asked:g} | {got:.2f} | {got / asked:.0%} | {past} | {ok} |")
    except (ValueError, KeyError, TypeError):
        error = (json.loads(text).get("error") if text.startswith("{") else None) or "no result"
        print(f"| {model} | {way} | {rate} | {asked:g} | failed: {error} | | | no |")
EOF
rm -f "$rows"
echo "$prog: wrote $out/pacing.md" >&2
