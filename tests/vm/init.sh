#!/bin/busybox sh
# The guest's /init (tests/vm/run.sh builds the initramfs around it). Loads what the host's root over
# 9p needs, overlays it with a RAM layer, runs the command written to the shared directory, and hands
# its exit code back there. Output goes to the two serial ports run.sh streams.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.list); do insmod "/mods/$m" || echo "vm: insmod $m failed" > /dev/ttyS2; done
mkdir -p /host /rw /root
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=1048576 host /host
mount -t tmpfs -o size=90% tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /root
share=$(cat /share.path)
mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 share "/root$share"
kver=$(cat /kernel.version)
mkdir -p "/root/lib/modules/$kver"
mount --bind "/root$(cat /modules.path)" "/root/lib/modules/$kver"
# The kernel loads modules on demand (ip_vs, dummy, ip_set...) through the modprobe of the init's
# root, this initramfs: hand those requests to the host's modprobe inside the new root.
mkdir -p /sbin
printf '#!/bin/busybox sh\nexec /bin/busybox chroot /root /sbin/modprobe "$@"\n' > /sbin/modprobe
chmod +x /sbin/modprobe
mount -t proc proc /root/proc
mount -t sysfs sys /root/sys
mount -t devtmpfs dev /root/dev
mkdir -p /root/dev/pts
mount -t devpts devpts /root/dev/pts
mount -t tmpfs tmpfs /root/run
mkdir -p /root/run/netns
# ttyS0 carries the firmware's and the kernel's console (discarded); ttyS1 is stdout, ttyS2 stderr.
stty -F /dev/ttyS1 raw -echo 2>/dev/null
stty -F /dev/ttyS2 raw -echo 2>/dev/null
chroot /root /bin/sh -c "ip link set lo up 2>/dev/null; exec /bin/sh $share/cmd.sh" >/dev/ttyS1 2>/dev/ttyS2 </dev/null
echo $? > "/root$share/rc"
sync
poweroff -f
