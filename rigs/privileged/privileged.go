// Package privileged decides whether a test that needs kernel privileges may
// run, skips it with a reason naming the missing capability when it may not,
// and turns that skip into a failure when AETHER_REQUIRE_PRIVILEGED=1 (set by
// .ci/run, which runs as root: there, nothing privileged may skip).
package privileged

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// EnvRequire names the variable that makes a privileged skip a failure.
const EnvRequire = "AETHER_REQUIRE_PRIVILEGED"

// Capability is a Linux capability a rig needs.
type Capability struct {
	Name string
	Bit  uint
}

var (
	NetAdmin = Capability{"CAP_NET_ADMIN", unix.CAP_NET_ADMIN}
	SysAdmin = Capability{"CAP_SYS_ADMIN", unix.CAP_SYS_ADMIN}
	NetRaw   = Capability{"CAP_NET_RAW", unix.CAP_NET_RAW}
)

// T is the part of testing.TB (and of ginkgo's GinkgoT()) the helper uses.
type T interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Missing returns a description of what this process lacks among caps, or ""
// when it has them all.
func Missing(caps ...Capability) string {
	eff, err := effective()
	if err != nil {
		return fmt.Sprintf("cannot read capabilities: %v", err)
	}
	return missingFrom(eff, os.Geteuid(), caps)
}

func missingFrom(eff uint64, euid int, caps []Capability) string {
	var lack []string
	for _, c := range caps {
		if eff&(1<<c.Bit) == 0 {
			lack = append(lack, c.Name)
		}
	}
	if len(lack) == 0 {
		return ""
	}
	return fmt.Sprintf("needs %s (euid %d, effective capabilities %#x)", strings.Join(lack, " and "), euid, eff)
}

func effective() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, err
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32, nil
}

// Required reports whether privileged skips are failures in this run.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Require skips t (or fails it, when Required) unless the process has every
// capability in caps. The default set is NET_ADMIN and SYS_ADMIN: namespaces,
// nftables and setns need both.
func Require(t T, caps ...Capability) {
	t.Helper()
	if len(caps) == 0 {
		caps = []Capability{NetAdmin, SysAdmin}
	}
	decide(t, Missing(caps...), Required())
}

// decide skips or fails t for a non-empty reason.
func decide(t T, reason string, required bool) {
	t.Helper()
	if reason == "" {
		return
	}
	if required {
		t.Fatalf("privileged test cannot run: %s; %s=1 makes this a failure", reason, EnvRequire)
		return
	}
	t.Skipf("privileged test skipped: %s (set %s=1 to fail instead)", reason, EnvRequire)
}
