// Package envcheck asks a container engine whether it can host kind's node
// containers, before anything builds a node image or creates a cluster. It
// starts a container with the flags kind v0.33's docker provider gives a
// node (pkg/cluster/internal/providers/docker/provision.go: commonArgs and
// runArgsForNode) and checks, inside it, what a node needs: systemd as PID
// 1 reaching multi-user, an openable /dev/kmsg (the kubelet's OOM watcher
// is fatal without it), cgroups it can create and limit, nftables, and a
// nested container run by containerd with runc under CPU and memory limits.
//
// When the engine refuses kind's --privileged outright (Docker before 23
// asks the kernel for every capability, and a daemon whose own bounding
// set lacks one gets "unable to apply caps"), the same checks run on a
// container given what --privileged gives, within the daemon's own
// capabilities: that says whether a patched provider could host kind there.
package envcheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Status is a check's outcome. Every check starts as NotReached; a check
// that ran is Pass or Fail, and both carry the evidence.
type Status string

const (
	Pass       Status = "pass"
	Fail       Status = "FAIL"
	NotReached Status = "not reached"
)

// Check is one question asked of the engine.
type Check struct {
	Name     string
	Status   Status
	Evidence string
}

// Report is one run of the check.
type Report struct {
	// Server is the engine's version (docker version's Server.Version).
	Server string
	// DaemonCapBnd is the engine daemon's capability bounding set.
	DaemonCapBnd uint64
	// Exact are the checks on a container with kind's own flags.
	Exact []Check
	// Within are the same checks with --privileged replaced by what it
	// gives, inside the daemon's capabilities; empty when Exact passed.
	Within []Check
	// WithinCaps are the capabilities the Within container was given.
	WithinCaps []string
}

// HostsKind reports whether kind's own node flags passed every check.
func (r Report) HostsKind() bool { return allPass(r.Exact) }

// HostsPatchedKind reports whether the node checks pass with --privileged
// replaced by its equivalent within the daemon's capabilities.
func (r Report) HostsPatchedKind() bool { return len(r.Within) > 0 && allPass(r.Within) }

func allPass(cs []Check) bool {
	if len(cs) == 0 {
		return false
	}
	for _, c := range cs {
		if c.Status != Pass {
			return false
		}
	}
	return true
}

// Verdict is the report's one-line answer.
func (r Report) Verdict() string {
	switch {
	case r.HostsKind():
		return "the engine hosts kind's node containers with kind's own flags"
	case r.HostsPatchedKind():
		return fmt.Sprintf("the engine refuses kind's --privileged node (%s), but hosts a node given what --privileged gives within the daemon's capabilities: kind runs here only with a provider that passes those flags", firstFailure(r.Exact))
	default:
		return "the engine cannot host kind's node containers"
	}
}

// Table renders the report for a person.
func (r Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine: Docker %s, daemon capability bounding set %#x (lacks %s)\n", r.Server, r.DaemonCapBnd, orNone(MissingCaps(r.DaemonCapBnd)))
	section := func(title string, cs []Check) {
		fmt.Fprintf(&b, "\n%s\n", title)
		for _, c := range cs {
			fmt.Fprintf(&b, "  %-12s %-38s %s\n", c.Status, c.Name, strings.ReplaceAll(c.Evidence, "\n", "\n"+strings.Repeat(" ", 54)))
		}
	}
	section("kind's node flags (--privileged):", r.Exact)
	if len(r.Within) > 0 {
		section(fmt.Sprintf("--privileged replaced by --cap-add of the daemon's %d capabilities, all devices, unmasked paths:", len(r.WithinCaps)), r.Within)
	}
	fmt.Fprintf(&b, "\nverdict: %s\n", r.Verdict())
	return b.String()
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// Options configure a run.
type Options struct {
	// Image is a Debian image with systemd, nftables, containerd, runc and
	// busybox-static (ProbeSpec builds one).
	Image string
	// BootTimeout is how long systemd gets to reach multi-user: kind's own
	// deadline is 30 s (provision.go waits for "Reached target .*Multi-User
	// System.*|detected cgroup v1" in the node's log).
	BootTimeout time.Duration
	// Say receives progress lines.
	Say func(format string, args ...any)
}

// Run asks the engine. An error means the check itself could not run (no
// engine, no image); a refusal by the engine is a Fail in the report.
func Run(ctx context.Context, o Options) (Report, error) {
	if o.BootTimeout == 0 {
		o.BootTimeout = 30 * time.Second
	}
	if o.Say == nil {
		o.Say = func(string, ...any) {}
	}
	var r Report
	var err error
	if r.Server, r.DaemonCapBnd, err = Engine(ctx); err != nil {
		return r, err
	}
	if out, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", o.Image); err != nil {
		return r, fmt.Errorf("envcheck: image %s is not in the engine: %w\n%s", o.Image, err, out)
	}
	sweep(ctx)
	_, hasModules := os.Stat("/lib/modules")
	r.Exact = probe(ctx, o, "exact", KindNodeArgs(hasModules == nil))
	if r.HostsKind() {
		return r, nil
	}
	r.WithinCaps = DockerCaps(r.DaemonCapBnd)
	r.Within = probe(ctx, o, "within", WithinArgs(hasModules == nil, r.WithinCaps))
	return r, nil
}

// KindNodeArgs are kind v0.33's `docker run` flags for a node, without
// --net kind, the labels and the hostname (the check uses the default
// bridge). kind mounts /lib/modules read-only; a host without it (no
// loadable modules) would have docker create it, so it is left out there.
func KindNodeArgs(hostHasModules bool) []string {
	args := []string{"--detach", "--tty", "--restart=on-failure:1", "--init=false", "--cgroupns=private",
		"--privileged", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
		"--tmpfs", "/tmp", "--tmpfs", "/run", "--volume", "/var"}
	if hostHasModules {
		args = append(args, "--volume", "/lib/modules:/lib/modules:ro")
	}
	return args
}

// WithinArgs are KindNodeArgs with --privileged replaced by PrivilegedAs.
func WithinArgs(hostHasModules bool, caps []string) []string {
	var args []string
	for _, a := range KindNodeArgs(hostHasModules) {
		if a != "--privileged" {
			args = append(args, a)
		}
	}
	return append(args, PrivilegedAs(caps)...)
}

// PrivilegedAs is what --privileged gives a container, as far as a daemon
// holding caps can grant it: those capabilities, every device allowed in
// the devices cgroup with /dev/kmsg and /dev/fuse present, /proc and /sys
// unmasked. What it cannot give is the rw flag of the cgroup mounts; a
// node's entrypoint remounts them (ProbeSpec's does).
func PrivilegedAs(caps []string) []string {
	var args []string
	for _, c := range caps {
		args = append(args, "--cap-add", c)
	}
	return append(args, "--security-opt", "systempaths=unconfined", "--device-cgroup-rule", "a *:* rwm",
		"--device", "/dev/kmsg", "--device", "/dev/fuse")
}

// PrivilegedAsEnv is the patched kind's variable (third_party/kind): the
// flags a node gets instead of --privileged, one per line.
const PrivilegedAsEnv = "KIND_EXPERIMENTAL_DOCKER_PRIVILEGED_AS"

// RefusesPrivileged reports whether a Docker engine of version server,
// whose daemon holds bnd, refuses --privileged: before 23 it asks for
// every capability the kernel has.
func RefusesPrivileged(server string, bnd uint64) bool {
	major, err := strconv.Atoi(strings.SplitN(server, ".", 2)[0])
	return err == nil && major < 23 && len(MissingCaps(bnd)) > 0
}

// Engine is the local engine's version and its daemon's bounding set.
func Engine(ctx context.Context) (server string, bnd uint64, err error) {
	out, err := docker(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		return "", 0, fmt.Errorf("envcheck: no container engine answers (docker version): %w\n%s", err, out)
	}
	bnd, err = daemonCapBnd()
	return strings.TrimSpace(out), bnd, err
}

// The probe's scripts, run in the node with docker exec. Each prints its
// evidence; a non-zero exit is a failure.
const (
	scriptSystemd = `state=$(timeout 60 systemctl is-system-running --wait 2>&1); echo "system: $state"; failed=$(systemctl --failed --no-legend --plain | awk '{print $1}' | tr '\n' ' '); echo "failed units: ${failed:-none}"; [ "$state" = running ]`
	scriptKmsg    = `exec 3</dev/kmsg && echo "/dev/kmsg opened for reading"`
	// cgroups: a node's kubelet and containerd create and limit cgroups in
	// every controller; on v2 they need the controllers delegated.
	scriptCgroups = `if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  echo "v2: controllers $(cat /sys/fs/cgroup/cgroup.controllers)"; mkdir /sys/fs/cgroup/aether-probe && rmdir /sys/fs/cgroup/aether-probe
else
  ok=""; bad=""
  for c in cpu cpuacct cpuset memory pids devices freezer blkio; do
    d=$(awk -v c=$c '$3=="cgroup" && ("," $4 ",") ~ ("," c ",") {print $2; exit}' /proc/self/mounts)
    if [ -n "$d" ] && mkdir "$d/aether-probe" 2>/dev/null && rmdir "$d/aether-probe"; then ok="$ok $c"; else bad="$bad $c${d:+($d)}"; fi
  done
  echo "v1: writable:${ok:- none}; not:${bad:- none}"; [ -z "$bad" ]
fi`
	scriptNft    = `nft add table inet aether_probe && nft add chain inet aether_probe c '{ type filter hook output priority 0; }' && nft list table inet aether_probe | grep -c 'hook output' | sed 's/^/chains listed back: /' && nft delete table inet aether_probe`
	scriptNested = `systemctl is-active --quiet containerd || systemctl start containerd; mkdir -p /probe/bin && cp /bin/busybox /probe/bin/ &&
timeout 60 ctr run --rm --cpus 0.5 --memory-limit 67108864 --rootfs /probe aether-probe-nested /bin/busybox sh -c 'echo nested-ok; cat /proc/self/cgroup | grep -E "cpu|memory" | head -3' 2>&1`
)

// probe starts one node container with args and runs every check in it.
func probe(ctx context.Context, o Options, tag string, args []string) []Check {
	checks := []Check{
		{Name: "node container starts", Status: NotReached},
		{Name: "systemd reaches multi-user (30 s)", Status: NotReached},
		{Name: "systemd running, no failed unit", Status: NotReached},
		{Name: "/dev/kmsg opens", Status: NotReached},
		{Name: "cgroups created in every controller", Status: NotReached},
		{Name: "nftables table and chain", Status: NotReached},
		{Name: "nested ctr run (runc, cpu+memory limits)", Status: NotReached},
	}
	name := fmt.Sprintf("aether-envcheck-%d-%s", os.Getpid(), tag)
	defer docker(context.WithoutCancel(ctx), "rm", "--force", "--volumes", name)
	o.Say("envcheck: starting %s", name)
	runArgs := append([]string{"run", "--name", name, "--label", label + "=" + strconv.Itoa(os.Getpid())}, args...)
	out, err := docker(ctx, append(runArgs, o.Image)...)
	if err != nil {
		checks[0].Status, checks[0].Evidence = Fail, engineError(out)+" ("+err.Error()+")"
		return checks
	}
	checks[0].Status, checks[0].Evidence = Pass, "running"
	booted, logLine := waitBoot(ctx, name, o.BootTimeout)
	if !booted {
		checks[1].Status, checks[1].Evidence = Fail, "no match in the node's log within "+o.BootTimeout.String()+"; last line: "+logLine
		return checks
	}
	checks[1].Status, checks[1].Evidence = Pass, logLine
	for i, script := range []string{scriptSystemd, scriptKmsg, scriptCgroups, scriptNft, scriptNested} {
		c := &checks[i+2]
		o.Say("envcheck: %s: %s", name, c.Name)
		out, err := docker(ctx, "exec", name, "/bin/sh", "-c", script)
		c.Evidence = strings.TrimSpace(out)
		c.Status = Pass
		if err != nil || (i == 4 && !strings.Contains(out, "nested-ok")) {
			c.Status = Fail
			if err != nil {
				c.Evidence += " (" + err.Error() + ")"
			}
		}
	}
	return checks
}

// label marks the check's containers with the id of the process that made
// them, so a later run removes only those whose maker is gone.
const label = "io.aether.envcheck"

// sweep removes containers a crashed check left behind.
func sweep(ctx context.Context) {
	out, err := docker(ctx, "ps", "--all", "--filter", "label="+label, "--format", `{{.Names}} {{.Label "`+label+`"}}`)
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if pid, err := strconv.Atoi(f[1]); err == nil && pid != os.Getpid() && !alive(pid) {
			docker(ctx, "rm", "--force", "--volumes", f[0])
		}
	}
}

func alive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

var (
	bootLine = regexp.MustCompile(`Reached target .*Multi-User System.*|detected cgroup v1`)
	// ansi matches the colour codes systemd writes to a tty.
	ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)
)

// engineError is the line of a failed docker run that says why: with
// --detach the created container's id comes first on the same output.
func engineError(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		if strings.Contains(l, "Error") || strings.Contains(l, "error") {
			return strings.TrimSpace(strings.TrimPrefix(l, "docker: "))
		}
	}
	return lines[len(lines)-1]
}

// waitBoot polls the node's log as kind does, for at most d.
func waitBoot(ctx context.Context, name string, d time.Duration) (bool, string) {
	deadline := time.Now().Add(d)
	last := ""
	for {
		out, _ := docker(ctx, "logs", name)
		out = ansi.ReplaceAllString(out, "")
		if m := bootLine.FindString(out); m != "" {
			return true, strings.TrimSpace(m)
		}
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) > 0 {
			last = lines[len(lines)-1]
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, last
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// firstFailure names the first failed check and its evidence.
func firstFailure(cs []Check) string {
	for _, c := range cs {
		if c.Status == Fail {
			return c.Name + ": " + c.Evidence
		}
	}
	return "no check failed"
}
