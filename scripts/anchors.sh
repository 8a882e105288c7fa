# Real copy tools beside the ladder's rungs, for `scripts/matrix.sh --ladder-only --lan --anchors`
# (sourced by it, not run). `anchors_up WORK NS FILE` starts the tools' far ends in the two
# namespaces of scripts/lan.sh and fills the array `anchor_args` with tsmatrix's `--anchor`
# flags: scp and rsync over ssh with AES-128-GCM (the ladder's cipher) to an OpenSSH server in
# NS-srv, and curl in NS-srv fetching FILE over plain HTTP from nginx in NS-cli (the same
# direction: the source disk on the client's host, the copy on the server's). Every process
# it starts carries WORK in its command line, so the caller's `pkill -f WORK` stops them.
#
# Needs root and Debian's openssh-server, openssh-client, rsync, curl and nginx-light.

anchors_need() {
  local missing=() tool
  for tool in /usr/sbin/sshd ssh ssh-keygen scp rsync curl /usr/sbin/nginx; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  if ((${#missing[@]})); then
    echo "matrix.sh: --anchors needs ${missing[*]}: apt-get install openssh-server openssh-client rsync curl nginx-light" >&2
    return 1
  fi
}

anchors_up() {
  local work=$1 ns=$2 file=$3 srv=198.18.0.1 cli=198.18.0.2
  anchors_need || return 1
  mkdir -p "$work/anchors" /run/sshd
  local a=$work/anchors
  ssh-keygen -q -t ed25519 -N '' -f "$a/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$a/id"
  cp "$a/id.pub" "$a/authorized_keys"
  cat >"$a/sshd_config" <<EOF
ListenAddress $srv
Port 22
HostKey $a/host_key
PidFile $a/sshd.pid
AuthorizedKeysFile $a/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
Ciphers aes128-gcm@openssh.com
EOF
  ip netns exec "$ns-srv" /usr/sbin/sshd -f "$a/sshd_config" -E "$a/sshd.log"
  cat >"$a/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $a/nginx.pid;
error_log $a/nginx-error.log;
events { worker_connections 64; }
http {
  access_log off;
  sendfile on;
  server { listen $cli:8080; root $(dirname "$file"); }
}
EOF
  ip netns exec "$ns-cli" /usr/sbin/nginx -c "$a/nginx.conf"
  local ssh="ssh -i $a/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -c aes128-gcm@openssh.com"
  # The tools must answer before the runs are timed: a first ssh login, a first fetch.
  local i
  for i in $(seq 1 50); do
    ip netns exec "$ns-cli" $ssh -o ConnectTimeout=1 "root@$srv" true 2>/dev/null && break
    sleep 0.1
  done
  ip netns exec "$ns-cli" $ssh -o ConnectTimeout=2 "root@$srv" true ||
    { echo "matrix.sh: the OpenSSH server in $ns-srv does not answer: $(tail -3 "$a/sshd.log")" >&2; return 1; }
  ip netns exec "$ns-srv" curl -sf -o /dev/null --max-time 5 "http://$cli:8080/$(basename "$file")" ||
    { echo "matrix.sh: nginx in $ns-cli does not serve $file: $(tail -3 "$a/nginx-error.log")" >&2; return 1; }
  anchor_args=(
    --anchor "scp (SFTP, ssh aes128-gcm)=ip netns exec $ns-cli scp -q ${ssh#ssh } \"\$TSPERF_COPY_SRC\" root@$srv:\"\$TSPERF_COPY_DEST\""
    --anchor "rsync -e ssh (aes128-gcm)=ip netns exec $ns-cli rsync -e '$ssh' \"\$TSPERF_COPY_SRC\" root@$srv:\"\$TSPERF_COPY_DEST\""
    --anchor "curl from nginx (HTTP, clear)=ip netns exec $ns-srv curl -sf -o \"\$TSPERF_COPY_DEST\" http://$cli:8080/\$(basename \"\$TSPERF_COPY_SRC\")"
  )
}
