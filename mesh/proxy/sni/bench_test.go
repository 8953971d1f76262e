package sni_test

import (
	"testing"

	"github.com/aether-mesh/aether/mesh/proxy/sni"
	"github.com/aether-mesh/aether/mesh/proxy/sni/snitest"
)

// BenchmarkInitialReader is the inspection cost of one new QUIC
// connection: keys derived, two Initials opened, the ClientHello parsed.
func BenchmarkInitialReader(b *testing.B) {
	hello, err := snitest.QUICClientHello("echo.ns1.svc.cluster.local", "h3")
	if err != nil {
		b.Fatal(err)
	}
	_, dgs, err := snitest.Initials(sni.Version1, hello, 1100)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r := sni.NewInitialReader(0)
		for _, d := range dgs {
			if _, _, err := r.Read(d); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkReadClientHello is the TCP inspection cost per connection.
func BenchmarkReadClientHello(b *testing.B) {
	hello, err := snitest.TLSClientHello("echo.ns1.svc.cluster.local", "h2")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := sni.ReadClientHello(bytesReader(hello), 0); err != nil {
			b.Fatal(err)
		}
	}
}
