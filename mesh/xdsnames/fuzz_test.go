package xdsnames

import "testing"

// FuzzParseTwin: a name ParseTwin accepts is exactly the name its twin
// formats to, so no two names parse to one pair.
func FuzzParseTwin(f *testing.F) {
	f.Add("quic:svc-b.shop@default.web")
	f.Fuzz(func(t *testing.T, name string) {
		tw, err := ParseTwin(name)
		if err != nil {
			return
		}
		if got := TwinCluster(tw); got != name {
			t.Fatalf("ParseTwin(%q) = %+v, which formats to %q", name, tw, got)
		}
	})
}

// FuzzTwinCluster: a twin whose parts are DNS labels formats to a name
// that parses back to it; any other twin's name is refused.
func FuzzTwinCluster(f *testing.F) {
	f.Add("svc-b", "shop", "default", "web")
	f.Fuzz(func(t *testing.T, svc, ns, sa, saNS string) {
		tw := Twin{Service: svc, Namespace: ns, SA: sa, SANamespace: saNS}
		got, err := ParseTwin(TwinCluster(tw))
		valid := isLabel(svc) && isLabel(ns) && isLabel(sa) && isLabel(saNS)
		switch {
		case valid && (err != nil || got != tw):
			t.Fatalf("ParseTwin(TwinCluster(%+v)) = %+v, %v", tw, got, err)
		case !valid && err == nil:
			t.Fatalf("ParseTwin(TwinCluster(%+v)) accepted a twin whose parts are not all DNS labels", tw)
		}
	})
}
