package privileged

import (
	"fmt"
	"strings"
	"testing"
)

type fakeT struct{ skipped, failed string }

func (f *fakeT) Helper()                           {}
func (f *fakeT) Skipf(format string, args ...any)  { f.skipped = fmt.Sprintf(format, args...) }
func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestMissingNamesTheCapabilityAndTheHostValue(t *testing.T) {
	onlyNetAdmin := uint64(1) << NetAdmin.Bit
	got := missingFrom(onlyNetAdmin, 1000, []Capability{NetAdmin, SysAdmin})
	if !strings.Contains(got, "needs CAP_SYS_ADMIN") || strings.Contains(got, "CAP_NET_ADMIN and") || !strings.Contains(got, "euid 1000") {
		t.Fatalf("reason %q", got)
	}
	if got := missingFrom(onlyNetAdmin|1<<SysAdmin.Bit, 0, []Capability{NetAdmin, SysAdmin}); got != "" {
		t.Fatalf("nothing is missing, got %q", got)
	}
}

func TestSkipUnlessRequiredThenFail(t *testing.T) {
	var skip fakeT
	decide(&skip, "needs CAP_NET_ADMIN (euid 1000, effective capabilities 0x0)", false)
	if skip.failed != "" || !strings.Contains(skip.skipped, "needs CAP_NET_ADMIN") {
		t.Fatalf("not required: skipped %q failed %q", skip.skipped, skip.failed)
	}
	var fail fakeT
	decide(&fail, "needs CAP_NET_ADMIN (euid 1000, effective capabilities 0x0)", true)
	if fail.skipped != "" || !strings.Contains(fail.failed, EnvRequire+"=1") {
		t.Fatalf("required: skipped %q failed %q", fail.skipped, fail.failed)
	}
	var none fakeT
	decide(&none, "", true)
	if none.skipped != "" || none.failed != "" {
		t.Fatalf("with every capability nothing may skip or fail: %+v", none)
	}
}
