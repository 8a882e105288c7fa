#!/usr/bin/env bash
# Emulated gigabit LAN: two network namespaces joined by a veth pair, rate-limited with tc tbf.
#
#   scripts/lan.sh up [--name NAME] [--rate 1gbit]   server 198.18.0.1 in NAME-srv, client 198.18.0.2 in NAME-cli
#                                                    (--rate none: the veth pair unshaped)
#   scripts/lan.sh down [--name NAME]                remove both namespaces (and the veth pair with them)
#
# Addresses come from 198.18.0.0/15, the range set aside for network benchmarks. Needs root and
# iproute2 (ip, tc). netem is not needed: tbf limits the rate; there is no added delay or loss.
set -euo pipefail

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "lan.sh: $*" >&2; exit 1; }

cmd=${1:-}
[[ -n $cmd ]] || { usage >&2; exit 2; }
[[ $cmd == -h || $cmd == --help ]] && { usage; exit 0; }
shift
name=tsperf
rate=1gbit
while (($#)); do
  case $1 in
    --name) name=${2:?--name needs a value}; shift 2 ;;
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "lan.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $name =~ ^[a-z0-9]{1,12}$ ]] || { echo "lan.sh: invalid name '$name': expected 1 to 12 lowercase letters or digits" >&2; exit 2; }
[[ $rate == none || $rate =~ ^[0-9]+(bit|kbit|mbit|gbit)$ ]] || { echo "lan.sh: invalid rate '$rate': expected e.g. 1gbit or 100mbit, or none" >&2; exit 2; }

[[ $EUID -eq 0 ]] || die "needs root: network namespaces and tc qdiscs can only be made by root"
command -v ip >/dev/null || die "needs iproute2: 'ip' is not installed (apt-get install iproute2)"
command -v tc >/dev/null || die "needs iproute2: 'tc' is not installed (apt-get install iproute2)"

srv=$name-srv
cli=$name-cli

down() {
  ip netns del "$srv" 2>/dev/null || true
  ip netns del "$cli" 2>/dev/null || true
}

case $cmd in
  up)
    down
    trap 'down; die "could not bring the LAN up (see above)"' ERR
    ip netns add "$srv"
    ip netns add "$cli"
    ip link add "$name-s" type veth peer name "$name-c"
    ip link set "$name-s" netns "$srv"
    ip link set "$name-c" netns "$cli"
    ip -n "$srv" addr add 198.18.0.1/24 dev "$name-s"
    ip -n "$cli" addr add 198.18.0.2/24 dev "$name-c"
    for ns in "$srv" "$cli"; do ip -n "$ns" link set lo up; done
    ip -n "$srv" link set "$name-s" up
    ip -n "$cli" link set "$name-c" up
    if [[ $rate != none ]]; then
      tc -n "$cli" qdisc replace dev "$name-c" root tbf rate "$rate" burst 256kb latency 10ms
      tc -n "$srv" qdisc replace dev "$name-s" root tbf rate "$rate" burst 256kb latency 10ms
    fi
    trap - ERR
    echo "lan.sh: up: server 198.18.0.1 in netns $srv, client 198.18.0.2 in netns $cli, $rate each way"
    ;;
  down)
    down
    echo "lan.sh: down: removed $srv and $cli"
    ;;
  *) echo "lan.sh: unknown command '$cmd': expected up or down" >&2; usage >&2; exit 2 ;;
esac
