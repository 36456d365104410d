#!/usr/bin/env bash
# tests/vm/run.sh [--mem MiB] [--timeout SECONDS] -- CMD [ARGS...]
#
# Runs CMD as root in a qemu guest (software emulation) with Debian's stock 6.1 kernel, which has
# IPVS, ipset and every netfilter module. The host's root filesystem is visible read-only at the same
# paths under a RAM overlay (the checkout, deno and its cache are there); the guest has its own
# kernel and network stack, no network. CMD runs in the current directory; its stdout and stderr
# stream here; the exit code is CMD's. A guest that does not boot, or CMD that outlives the timeout,
# ends with a message on stderr and exit 125.
set -euo pipefail

mem=1024
timeout=600
while [ $# -gt 0 ]; do
  case "$1" in
  --mem) mem=$2; shift 2 ;;
  --timeout) timeout=$2; shift 2 ;;
  --) shift; break ;;
  *) echo "usage: $0 [--mem MiB] [--timeout SECONDS] -- CMD [ARGS...]" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [--mem MiB] [--timeout SECONDS] -- CMD [ARGS...]" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
cache=${KPD_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-proxy-deno/vm}
for tool in qemu-system-x86_64 busybox cpio depmod modprobe xz; do
  command -v "$tool" >/dev/null || { echo "vm: $tool is not installed" >&2; exit 125; }
done

# The kernel: the newest linux-image-6.1.0-N-amd64 Debian offers, unpacked once into the cache.
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -f "$cache/ready" ]; then
  newest() { apt-cache search '^linux-image-6\.1\.0-[0-9]+-amd64$' | awk '{print $1}' | sort -V | tail -n 1; }
  pkg=$(newest)
  if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then apt-get update -qq >/dev/null 2>&1 || true; pkg=$(newest); fi
  [ -n "$pkg" ] || { echo "vm: no linux-image-6.1.0-*-amd64 package in apt's lists (apt-get update?)" >&2; exit 125; }
  rm -rf "$cache/root" "$cache"/*.deb
  (cd "$cache" && apt-get download -qq "$pkg" 2>/dev/null)
  dpkg-deb -x "$cache"/*.deb "$cache/root"
  kver=$(ls "$cache/root/lib/modules")
  depmod -b "$cache/root" "$kver"
  vmlinuz=$(ls "$cache/root/boot"/vmlinuz-*)
  off=$(grep -abo $'\xfd7zXZ\x00' "$vmlinuz" | head -n 1 | cut -d: -f1)
  tail -c +$((off + 1)) "$vmlinuz" | xz -dc >"$cache/vmlinux" 2>/dev/null || true
  echo "$kver" >"$cache/kernel.version"
  rm -f "$cache"/*.deb
  touch "$cache/ready"
fi
flock -u 9
kver=$(cat "$cache/kernel.version")

# Per run: the initramfs (busybox, the modules 9p and overlay need, /init) and the shared directory.
run=$(mktemp -d /tmp/kpd-vm.XXXXXX)
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/initrd/bin" "$run/initrd/mods" "$run/share"
cp "$(command -v busybox)" "$run/initrd/bin/busybox"
for m in virtio_pci 9pnet_virtio 9p overlay; do
  modprobe -d "$cache/root" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' >"$run/list"
while read -r ko; do cp "$ko" "$run/initrd/mods/"; basename "$ko"; done <"$run/list" >"$run/initrd/modules.list"
cp "$here/init.sh" "$run/initrd/init"
chmod +x "$run/initrd/init"
echo "$run/share" >"$run/initrd/share.path"
echo "$cache/root/lib/modules/$kver" >"$run/initrd/modules.path"
echo "$kver" >"$run/initrd/kernel.version"
(cd "$run/initrd" && find . | cpio -o -H newc --quiet) >"$run/initrd.cpio"

# Deno's caches: the guest reads the host's DENO_DIR through 9p while the host's own tests keep
# writing its SQLite databases (the V8 code cache among them), and a torn page read there crashes
# deno's deserializer. The guest gets databases of its own in RAM; the directories (npm packages,
# emitted JavaScript: files written whole) stay shared.
host_deno_dir=${DENO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/deno}
{
  echo "export PATH=$(printf %q "$PATH") HOME=$(printf %q "$HOME") NO_COLOR=${NO_COLOR:-} DENO_DIR=/run/kpd-deno-dir"
  echo "mkdir -p /run/kpd-deno-dir"
  echo "for d in $(printf %q "$host_deno_dir")/*/; do [ -d \"\$d\" ] && ln -s \"\${d%/}\" /run/kpd-deno-dir/; done"
  echo "cd $(printf %q "$PWD")"
  printf 'exec'
  printf ' %q' "$@"
  echo
} >"$run/share/cmd.sh"

# These machines' CPUs expose no virtualization extensions: software emulation (TCG). Multi-threaded
# TCG runs each vCPU on a host thread of its own, so with the host's cores as vCPUs (at most 4) the
# guest's own parallel work (deno's threads, the program beside the test's agents) runs side by side:
# the ipvs end-to-end run took 3m02s on one vCPU and 1m44s on two, on an idle 2-core host.
cpus=$(nproc 2>/dev/null || echo 1)
[ "$cpus" -le 4 ] || cpus=4
set +e
timeout --kill-after=10 "$timeout" qemu-system-x86_64 -M pc -accel tcg,thread=multi -cpu max -smp "$cpus" -m "$mem" \
  -kernel "$cache/vmlinux" -initrd "$run/initrd.cpio" \
  -append "console=ttyS0 quiet loglevel=0 panic=-1 rdinit=/init" \
  -nographic -no-reboot -nodefaults \
  -serial null -serial file:/dev/stdout -serial file:/dev/stderr \
  -virtfs local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap \
  -virtfs local,path="$run/share",mount_tag=share,security_model=passthrough \
  </dev/null
qemu=$?
set -e
if [ -f "$run/share/rc" ]; then
  exit "$(cat "$run/share/rc")"
fi
if [ "$qemu" -eq 124 ] || [ "$qemu" -eq 137 ]; then
  echo "vm: no result within ${timeout}s (guest hung or CMD still running); qemu stopped" >&2
else
  echo "vm: the guest ended without a result (qemu exited $qemu; did it boot?)" >&2
fi
exit 125
