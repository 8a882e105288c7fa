#!/usr/bin/env bash
# Did a change alter what tsclient prints? Runs every mode (each direction, -P, --bidir, timed,
# intervals, latency and under load; human, --json and --json-stream) and a set of refused
# command lines with the binaries of OLD and of NEW, each against a tsserver of its own build on
# loopback, masks every number (and units, signs, digests, verdicts, bar lengths, a number's
# padding, how many alike interval samples: what a measurement decides), and prints the
# differences that are left.
#
#   scripts/same-output.sh OLD_BIN_DIR NEW_BIN_DIR [--keep DIR]
#
# OLD_BIN_DIR: e.g. a build of the commit before (git worktree add /tmp/old REV; cd /tmp/old;
# CARGO_TARGET_DIR=/tmp/oldt cargo build --release --bins; then /tmp/oldt/release). Exit 0 when
# nothing but numbers differs, 1 naming the runs that do. A figure a measurement may leave out
# (null, "?") is masked as a number; a line only some measurements print (the idle-slower note
# of a latency run under load) is left out.
set -euo pipefail
prog=same-output.sh
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
(($# == 2 || $# == 4)) || { usage >&2; exit 2; }
old=$1 new=$2 keep=""
[[ ${3:-} == --keep ]] && keep=$4
for d in "$old" "$new"; do
  for b in tsserver tsclient; do
    [[ -x $d/$b ]] || { echo "$prog: '$d/$b' not found: expected a directory of tsperf binaries" >&2; exit 2; }
  done
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c "open('$work/f.bin','wb').write(bytes(range(256))*40000)"
mkdir -p "$work/serve" && cp "$work/f.bin" "$work/serve/s.bin"

# runs BIN OUT: every mode against a fresh server of BIN's build.
runs() {
  local bin=$1 out=$2 i=0 f=$work/f.bin port spid j
  mkdir -p "$out"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$bin/tsserver" --port "$port" --log none --serve "$work/serve" >/dev/null 2>&1 &
  spid=$!
  sleep 0.5
  one() {
    i=$((i + 1))
    local rc=0
    timeout 60 "$bin/tsclient" --port "$port" --no-progress "$@" >"$out/$i.out" 2>"$out/$i.err" || rc=$?
    echo "rc=$rc" >>"$out/$i.err"
    echo "$*" >"$out/$i.cmd"
  }
  for j in "" --json; do
    one $j "$f"
    one $j --nonblocking --chunk 1024 "$f"
    one $j --io writev "$f"
    one $j --io sendfile "$f"
    one $j --bytes 8MiB
    one $j --one-buffer --bytes 4MiB
    one $j --io sendfile --bytes 4MiB
    one $j -R --bytes 4MiB
    one $j -R -P 2 --bytes 4MiB
    one $j -R s.bin
    one $j --bidir "$f"
    one $j --bidir -P 2 "$f"
    one $j --bidir --bytes 3MiB
    one $j -t 0.3 "$f"
    one $j -t 0.3 -i 0.1 -O 0.1 "$f"
    one $j -P 2 "$f"
    one $j --latency --count 50
    one $j --latency --count 50 --under-load "$f"
    one $j -R --log file --log-file "$work/c.log" --bytes 1MiB
    one $j -R --io writev --batch 8 --bytes 1MiB
  done
  one --json-stream -i 0.1 -t 0.3 "$f"
  one --json-stream --latency --count 20
  one --latency --chunk 5
  one --nodelay "$f"
  one -R --sndbuf 64k
  one --bytes 1k "$f"
  one -R dir/x
  one -R x --bytes 1k
  one --min-rate 1MiB
  one --log file "$f"
  one -R --log stdout --json
  one -t 1 --io sendfile "$f"
  one --batch 4 "$f"
  one --host 127.0.0.1:1 --port 2 "$f"
  one --json --latency --chunk 5
  one --auth-key "$work/no-such-key" "$f"
  kill "$spid" && wait "$spid" 2>/dev/null || true
}

# masked FILE: FILE with what a measurement decides masked.
masked() {
  python3 - "$1" <<'PY'
import re, sys
s = open(sys.argv[1], errors="replace").read()
for pat, to in [
    (r'"tsperf": ?"[^"]*"', '"tsperf":V'),
    (r'(xxh3 |"digest": ?")[0-9a-f]+', r'\1H'),
    (r'/tmp/tmp\.[A-Za-z0-9]+', 'TMP'),
    (r'[+-]?\d+(\.\d+)?(e[-+]?\d+)?', 'N'),
    (r'N (µs|ms|s|B|KiB|MiB|GiB)\b', 'N U'),
    (r'<N%', 'N%'),
    (r'client clock [+-] N', 'client clock ± N'),
    (r'retransmits?', 'retransmit'),
    (r'\|#+', '|#'),
    (r'"(largest|limited_by)": ?"[a-z-]+"', r'"\1":X'),
    (r'limited by[: ][^\n;(]*', 'limited by X'),
    (r'"delivery_rate_app_limited": ?(true|false)', '"d":B'),
    (r'under N U \(a figure needs ten times the ±\)', 'N U'),
    (r'(for its file|waiting for a CPU) (N%|\?)', r'\1 N%'),
    (r'N transfers? of', 'N transfer of'),
    (r'(": ?)null', r'\1N'),
    (r'(window full|send buffer full) (N%|\?)', r'\1 N%'),
    (r'\n  idle pN N U is slower than loaded pN N U:[^\n]*', ''),
    (r',\n *"idle_slower": "[^"]*"', ''),
    (r'(\n +(min|max|pN)) +N U \|', r'\1 N U |'),
    # A number's width is measured too: the padding before it.
    (r' {2,}N', ' N'),
    # How many intervals a timed run's end shows is timing: alike samples count once.
    (r'(\{[^{}]*\})(,\1)+', r'\1'),
]:
    s = re.sub(pat, to, s)
# Alike lines in a row (a sample each) count once.
lines = s.split('\n')
s = '\n'.join(l for i, l in enumerate(lines) if i == 0 or l != lines[i - 1])
sys.stdout.write(s)
PY
}

echo "$prog: running every mode with $old, then with $new..." >&2
runs "$old" "$work/old"
runs "$new" "$work/new"
differ=0 total=0
for f in "$work"/old/*.out "$work"/old/*.err; do
  b=$(basename "$f")
  total=$((total + 1))
  if ! diff -q <(masked "$work/old/$b") <(masked "$work/new/$b") >/dev/null; then
    differ=$((differ + 1))
    echo "== tsclient $(cat "$work/old/${b%.*}.cmd") ($b)"
    diff <(masked "$work/old/$b") <(masked "$work/new/$b") | head -20 || true
  fi
done
[[ -n $keep ]] && cp -r "$work/old" "$work/new" "$keep/"
echo "$prog: $differ of $total outputs differ beyond their numbers"
((differ == 0))
