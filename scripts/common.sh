# Sourced by the scripts here: what they share. Set `prog` (the script's name) first, and call
# `caller_paths` before moving to the repository's root.

# here PATH: PATH as the caller meant it (relative paths are the caller's working directory's).
here() { if [[ $1 == /* ]]; then printf '%s' "$1"; else printf '%s/%s' "$caller" "$1"; fi; }

# caller_paths: remember the caller's working directory for `here`.
caller_paths() { caller=$PWD; }

# binaries DIR NAME...: builds the release binaries when DIR is empty (and prints the directory
# used), or checks that DIR holds every NAME; exits 1 naming a missing one. tspeers, tsscale and
# tsverdicts, which measure tsperf itself, are the tsperf-bench package's (never shipped).
binaries() {
  local dir=$1; shift
  if [[ -z $dir ]]; then
    local packages=(-p tsperf) b
    for b in "$@"; do
      case $b in tspeers | tsscale | tsverdicts | tscipher) packages=(-p tsperf -p tsperf-bench) ;; esac
    done
    # Quiet, but not silent: on a fresh clone this takes a minute or two.
    echo "$prog: building the release binaries (cargo build --release; a minute or two on a fresh clone)..." >&2
    cargo build --release --quiet --bins "${packages[@]}" >&2
    dir=target/release
  fi
  local b
  for b in "$@"; do
    [[ -x $dir/$b ]] || { echo "$prog: '$dir/$b' not found: build with cargo build --release --workspace" >&2; exit 1; }
  done
  printf '%s' "$dir"
}
