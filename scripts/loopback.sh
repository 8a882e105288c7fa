#!/usr/bin/env bash
# The main job until the grid lands: build, generate testdata/tsl.txt (36 MiB) if missing, start a
# tsserver on a free loopback port, send the file at chunks 102, 1024 and 10240, stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release
file=${1:-testdata/tsl.txt}
[[ -f $file ]] || "$bin/tsgen" "$file"

log=$(mktemp)
"$bin/tsserver" --bind 127.0.0.1 --port 0 >/dev/null 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do
  port=$(sed -n 's/^tsserver: listening on .*:\([0-9]*\)$/\1/p' "$log")
  [[ -n $port ]] && break
  sleep 0.05
done
[[ -n ${port:-} ]] || { echo "loopback.sh: tsserver did not start: $(cat "$log")" >&2; exit 1; }

for chunk in 102 1024 10240; do
  "$bin/tsclient" --port "$port" --chunk "$chunk" "$file"
  echo
done
