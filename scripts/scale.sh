#!/usr/bin/env bash
# Many clients at once: 1, 2, 4 ... 256, 1024, 4096 and 10,000 concurrent clients (the blocking server
# to 1024), each sending a 4 MiB file at 10240-byte
# chunks (all verified), against the event-loop and the thread-per-connection server.
#
#   scripts/scale.sh [--out DIR] [--counts LIST] [--reps R (5)] [--file PATH] [--chunk BYTES]
#                    [--bin-dir DIR]   (use the tsperf binaries in DIR instead of building them)
#
# Writes DIR/scale.md, DIR/scale.json and DIR/scale.svg (default DIR: results).
set -euo pipefail
prog=scale.sh
# Paths given on the command line are the caller's: resolve them before moving to the repository.
source "$(dirname "$0")/common.sh"
caller_paths
cd "$(dirname "$0")/.."
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }

out=results counts=1,2,4,8,16,32,64,128,256,1024,4096,10000 reps=5 file=testdata/tsl-quick.txt chunk=10240 bin=""
while (($#)); do
  case $1 in
    --out) out=$(here "${2:?--out needs a directory}"); shift 2 ;;
    --counts) counts=${2:?--counts needs a list}; shift 2 ;;
    --reps) reps=${2:?--reps needs a number}; shift 2 ;;
    --file) file=$(here "${2:?--file needs a path}"); shift 2 ;;
    --chunk) chunk=${2:?--chunk needs a size}; shift 2 ;;
    --bin-dir) bin=$(here "${2:?--bin-dir needs a directory}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "scale.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

bin=$(binaries "$bin" tsserver tsgen tsscale)
[[ -f $file ]] || "$bin/tsgen" --size 4MiB "$file"
# tsscale raises its open-file limit (and so its servers') as far as the largest count needs.
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Dirty when tracked code differs from the commit; results being rewritten do not count.
[[ -z $(git status --porcelain --untracked-files=no -- . ":!results" 2>/dev/null) ]] || commit+="+dirty"
exec "$bin/tsscale" --file "$file" --chunk "$chunk" --counts "$counts" --reps "$reps" --out "$out" --commit "$commit"
