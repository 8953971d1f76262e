package xdsnames

import (
	"strings"
	"testing"
)

func TestTwinNameRoundTrips(t *testing.T) {
	tw := Twin{Service: "svc-b", Namespace: "shop", SANamespace: "web", SA: "default"}
	name := TwinCluster(tw)
	if name != "quic:svc-b.shop@default.web" {
		t.Fatalf("TwinCluster = %q", name)
	}
	got, err := ParseTwin(name)
	if err != nil || got != tw {
		t.Fatalf("ParseTwin(%q) = %+v, %v; want %+v", name, got, err, tw)
	}
}

func TestParseTwinRefusesMalformedNames(t *testing.T) {
	for name, want := range map[string]string{
		"h2:svc-b.shop":                "no \"quic:\" prefix",
		"quic:svc-b.shop":              "no @<sa>.<sa-ns>",
		"quic:svc-b@default.web":       "not <svc>.<ns>",
		"quic:svc-b.shop@default":      "not <sa>.<sa-ns>",
		"quic:svc-b.shop@default.we.b": "is not a DNS label",
		"quic:svc-b.Shop@default.web":  "is not a DNS label",
		"quic:.shop@default.web":       "is not a DNS label",
		"quic:svc-b.shop@-default.web": "is not a DNS label",
	} {
		_, err := ParseTwin(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTwin(%q) = %v, want an error containing %q", name, err, want)
		}
	}
}
