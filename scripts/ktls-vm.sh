#!/usr/bin/env bash
# Runs a command on a kernel that has kernel TLS, in a throwaway VM, for the tests of tsperf's
# kernel TLS data path where the machine's own kernel has none (CONFIG_TLS unset).
#
#   scripts/ktls-vm.sh COMMAND...      the command's output, and its exit status
#   scripts/ktls-vm.sh --check         exits 0 where a VM can be started here, else says why
#
# The VM boots Debian's kernel (linux-image-amd64: its tls and crypto modules) under QEMU with
# an initramfs made here (busybox-static), mounts this machine's root read-only over 9p under a
# tmpfs overlay (every path as here, every write kept in the VM's memory), loads the tls
# module, and runs COMMAND in that root (loopback up, as root). Nothing is written back to this
# machine; the VM has no network device. It runs under KVM
# where KVM works and otherwise in QEMU's emulator (slower: a few seconds to boot).
# Needs: qemu-system-x86, linux-image-amd64, busybox-static (.ci/run installs them as root).
set -euo pipefail

die() { echo "ktls-vm: $*" >&2; exit 2; }

kernel=${TSPERF_VM_KERNEL:-$(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -1 || true)}
ver=${kernel#/boot/vmlinuz-}
mods=/lib/modules/$ver
busybox=$(command -v busybox || true)
qemu=$(command -v qemu-system-x86_64 || true)

why_not() {
  [[ -n $qemu ]] || { echo "no qemu-system-x86_64 (apt-get install qemu-system-x86)"; return; }
  [[ -n $kernel && -f $kernel ]] || { echo "no Debian kernel in /boot (apt-get install linux-image-amd64)"; return; }
  [[ -f $mods/kernel/net/tls/tls.ko || -f $mods/kernel/net/tls/tls.ko.xz ]] || { echo "$kernel has no tls module under $mods"; return; }
  [[ -n $busybox ]] && ! ldd "$busybox" >/dev/null 2>&1 ||
    { echo "no static busybox (apt-get install busybox-static)"; return; }
  [[ -r $kernel ]] || { echo "$kernel is not readable (run as root)"; return; }
}

if [[ ${1:-} == --check ]]; then
  why=$(why_not)
  [[ -z $why ]] || { echo "ktls-vm: cannot start a VM here: $why"; exit 1; }
  exit 0
fi
(($#)) || die "usage: scripts/ktls-vm.sh COMMAND... (or --check)"
why=$(why_not)
[[ -z $why ]] || die "cannot start a VM here: $why"

work=$(mktemp -d /tmp/tsperf-ktls-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,sbin,proc,sys,dev,mnt,rw,new,lib/modules}
cp "$busybox" "$root/bin/busybox"
for a in sh mount insmod modprobe poweroff chroot cat sed; do ln -s busybox "$root/bin/$a"; done
ln -s ../bin/busybox "$root/sbin/modprobe"
# The modules the VM loads, and what the kernel asks modprobe for (the ciphers tls uses).
mkdir -p "$root/lib/modules/$ver/kernel"
for d in crypto arch/x86/crypto lib/crypto net/tls net/9p fs/9p fs/netfs fs/fscache fs/overlayfs drivers/virtio; do
  [[ -d $mods/kernel/$d ]] || continue
  mkdir -p "$root/lib/modules/$ver/kernel/$d"
  cp -r "$mods/kernel/$d/." "$root/lib/modules/$ver/kernel/$d/"
done
cp "$mods"/modules.{dep,alias,symbols,builtin} "$root/lib/modules/$ver/" 2>/dev/null || true
printf '%s\n' "$*" >"$root/job"
cat >"$root/init" <<'IN'
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in virtio_pci 9pnet_virtio 9p overlay tls; do modprobe $m || echo "ktls-vm: cannot load $m"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 hostroot /mnt || echo "ktls-vm: no root"
# The host's root, read-only, under a tmpfs that takes every write: the same paths (a build
# under /tmp included), nothing written back.
mount -t tmpfs rw /rw && mkdir -p /rw/upper /rw/work
if mount -t overlay -o lowerdir=/mnt,upperdir=/rw/upper,workdir=/rw/work root /new; then
  r=/new
else
  echo "ktls-vm: no overlay: /tmp is a fresh tmpfs"; r=/mnt; mount -t tmpfs tmp /mnt/tmp
fi
mount -t proc proc $r/proc; mount -t sysfs sys $r/sys; mount -t devtmpfs dev $r/dev
cp /job $r/tmp/.ktls-vm-job
chroot $r /bin/sh -c 'ip link set lo up; cd "$0"; echo; echo ktls-vm-begin; /bin/bash /tmp/.ktls-vm-job; echo "ktls-vm-rc=$?"' "$PWD_HOST"
poweroff -f
IN
sed -i "s|\"\$PWD_HOST\"|'$PWD'|" "$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"

accel=tcg cpu=max
if [[ -w /dev/kvm ]] && [[ ${TSPERF_VM_ACCEL:-} == kvm ]]; then accel=kvm cpu=host; fi
out=$work/console
timeout "${TSPERF_VM_TIMEOUT:-600}" "$qemu" -accel "$accel" -cpu "$cpu" -m 2048 -smp 2 \
  -nographic -no-reboot -nic none -kernel "$kernel" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 quiet panic=-1" \
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
  </dev/null 2>&1 | tr -d '\r' >"$out" || true
# The command's output, between the markers; all of the console where it never began.
if grep -q '^ktls-vm-begin$' "$out"; then
  sed -n '/^ktls-vm-begin$/,/^ktls-vm-rc=/p' "$out" | sed '1d;$d'
else
  cat "$out"
fi
rc=$(sed -n 's/^ktls-vm-rc=\([0-9]*\)$/\1/p' "$out" | tail -1)
[[ -n $rc ]] || die "the VM ended before the command did (see its console above)"
exit "$rc"
