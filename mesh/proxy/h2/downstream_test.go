package h2

import (
	"fmt"
	"testing"

	"github.com/aether-mesh/aether/mesh/proxy/hcm"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/mtls"
)

// TestPoolHashKeepsItsForm: the pool key's filter state part, now built
// without fmt, is the string fmt's "%s=%q;" made for every value, quotes,
// escapes and non-ASCII included, and leaves out what is not shared or
// not Hashable.
func TestPoolHashKeepsItsForm(t *testing.T) {
	values := []string{"spiffe://aether.test/ns/demo/sa/a", `a"b\c`, "tab\there", "ünï", "\x00\x7f", ""}
	for _, v := range values {
		fs := []hcm.FilterState{
			{Key: mtls.MapperKey, Value: v, Shared: true, Hashable: true},
			{Key: "unshared", Value: "x", Hashable: true},
			{Key: "unhashable", Value: "y", Shared: true},
			{Key: "second", Value: v + "2", Shared: true, Hashable: true},
		}
		want := fmt.Sprintf("%s=%q;%s=%q;", mtls.MapperKey, v, "second", v+"2")
		if got := poolHash(fs); got != want {
			t.Errorf("poolHash with value %q = %q, want %q", v, got, want)
		}
	}
}

// TestDownstreamDerivesOncePerConnection: what a connection's requests
// take from its chain and peer (the XFCC value, the mapper's source, the
// pool key) is what each request formatted for itself before.
func TestDownstreamDerivesOncePerConnection(t *testing.T) {
	fs := []hcm.FilterState{{Key: mtls.MapperKey, Value: "spiffe://aether.test/ns/demo/sa/a", Shared: true, Hashable: true}}
	set := &listener.HTTPChain{FilterState: fs, HCM: &hcm.Config{SetXFCC: true}}
	for _, tc := range []struct {
		name      string
		chain     *listener.HTTPChain
		peer, own string
		xfcc      string
	}{
		{"both IDs", set, "spiffe://p", "spiffe://o", "By=spiffe://o;URI=spiffe://p"},
		{"no own ID", set, "spiffe://p", "", "URI=spiffe://p"},
		{"no peer", set, "", "spiffe://o", ""},
		{"chain sets none", &listener.HTTPChain{HCM: &hcm.Config{}}, "spiffe://p", "spiffe://o", ""},
	} {
		d := newDownstream(tc.chain, tc.peer, tc.own)
		if d.xfcc != tc.xfcc {
			t.Errorf("%s: XFCC %q, want %q", tc.name, d.xfcc, tc.xfcc)
		}
	}
	d := newDownstream(set, "", "")
	if want := upstreamKeyOf(fs); d.up != want || d.up.source != fs[0].Value {
		t.Errorf("upstream key %+v, want %+v with source %q", d.up, want, fs[0].Value)
	}
	if d.source != fs[0].Value {
		t.Errorf("source %q, want %q", d.source, fs[0].Value)
	}
	// A connection no chain took is served, as before, and fails its
	// requests, not its accept.
	if d := newDownstream(nil, "", ""); d.chain != nil {
		t.Errorf("no chain: %+v", d)
	}
}
