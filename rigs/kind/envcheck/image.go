package envcheck

import "github.com/aether-mesh/aether/rigs/kind/rootfs"

// ProbeSpec is the probe's image: a Debian node's tools, with Debian's own
// containerd and runc for the nested run (the node image carries its own
// builds; this asks only whether the engine lets a node nest containers).
//
// Its entrypoint makes the cgroup mounts writable before systemd starts:
// docker mounts them read-only in a container that is not --privileged,
// and a plain remount of a v1 hierarchy fails (its superblock is the
// host's: "mount point is busy"), so each is remounted as a bind, which
// changes only this mount's flag. Under --privileged they are already
// writable and the remount changes nothing.
func ProbeSpec() rootfs.Spec {
	return rootfs.Spec{
		Repository: "aether-kind-probe",
		Suite:      "bookworm",
		Packages: []string{"systemd", "systemd-sysv", "dbus", "nftables", "iproute2", "util-linux", "mount",
			"procps", "containerd", "runc", "busybox-static"},
		Changes: []string{"ENV container=docker", `ENTRYPOINT ["/usr/local/bin/probe-entrypoint"]`},
		Setup: `systemctl mask getty@tty1.service console-getty.service systemd-binfmt.service >/dev/null 2>&1
mkdir -p /usr/local/bin
cat > /usr/local/bin/probe-entrypoint <<'SH'
#!/bin/sh
mount -o remount,rw /sys/fs/cgroup 2>/dev/null
for m in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts); do
  mount -o remount,bind,rw "$m" || echo "probe-entrypoint: cannot make $m writable"
done
exec /sbin/init
SH
chmod 0755 /usr/local/bin/probe-entrypoint`,
	}
}
