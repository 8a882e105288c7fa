#!/usr/bin/env bash
# The cipher's cost: each TLS 1.3 suite sealed and opened in memory by rustls (no socket), beside
# tsclient clear and over TLS (--tls) against one tsserver on loopback, alternating: whether an
# end over TLS costs no more than its clear run plus the cipher's own cost (within 15%).
#
#   scripts/cipher.sh [--out DIR] [--bytes SIZE (1GiB)] [--reps R (5)] [--chunk BYTES]
#                     [--bin-dir DIR]   (use the tsperf binaries in DIR instead of building them)
#
# Writes DIR/cipher.md and DIR/cipher.json (default DIR: results).
set -euo pipefail
prog=cipher.sh
source "$(dirname "$0")/common.sh"
caller_paths
cd "$(dirname "$0")/.."
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }

out=results bytes=1GiB reps=5 chunk=10240 bin=""
while (($#)); do
  case $1 in
    --out) out=$(here "${2:?--out needs a directory}"); shift 2 ;;
    --bytes) bytes=${2:?--bytes needs a size}; shift 2 ;;
    --reps) reps=${2:?--reps needs a number}; shift 2 ;;
    --chunk) chunk=${2:?--chunk needs a size}; shift 2 ;;
    --bin-dir) bin=$(here "${2:?--bin-dir needs a directory}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$prog: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

bin=$(binaries "$bin" tsserver tsclient tscipher)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain --untracked-files=no -- . ":!results" 2>/dev/null) ]] || commit+="+dirty"
exec "$bin/tscipher" --bytes "$bytes" --chunk "$chunk" --reps "$reps" --out "$out" --commit "$commit"
