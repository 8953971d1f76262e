package proxy_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/quic-go/quic-go"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
	"github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// TestQUICInboundServesTheApp runs the agent's QUIC inbound in a pod
// netns, beside the TCP inbound on the same number: a twin's client in
// another netns, presenting its account's SVID, reaches the pod's app
// over HTTP/3, and the app's own record shows HTTP/3 at the inbound and
// the client's SPIFFE ID in the XFCC the inbound set.
func TestQUICInboundServesTheApp(t *testing.T) {
	privileged.Require(t)
	rig := proxytest.NewRig(t, 1)
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	issue := func(sa string) tls.Certificate {
		s, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: sa}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c := tls.Certificate{PrivateKey: s.PrivateKey, Leaf: s.Certificates[0]}
		for _, x := range s.Certificates {
			c.Certificate = append(c.Certificate, x.Raw)
		}
		return c
	}
	apiSVID, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "api"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const apiID, webID = "spiffe://aether.test/ns/demo/sa/api", "spiffe://aether.test/ns/demo/sa/web"

	// The app: in the pod netns on 127.0.0.1:7080, recording what the
	// inbound sent it.
	seen := make(chan string, 4)
	var appLn net.Listener
	if err := transparent.InNetns(rig.Pod.Path, func() error {
		var err error
		appLn, err = net.Listen("tcp", "127.0.0.1:7080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("X-Forwarded-Client-Cert")
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = app.Serve(appLn) }()
	t.Cleanup(func() { _ = app.Close() })

	pod := mtls.Pod{Namespace: "demo", Name: "api-0", ID: apiID, IP: proxytest.PodAddr.Addr(), NetnsPath: rig.Pod.Path,
		Serves: []mtls.Port{{Service: "api", Namespace: "demo", Port: 8080, TargetPort: 7080}}}
	accessLog := t.TempDir() + "/access.log"
	in, cls, err := mtls.InboundListenerFor(mtls.Mesh{Domain: "mesh.test", AccessLog: accessLog}, pod)
	if err != nil {
		t.Fatal(err)
	}
	q, err := eastwest.QuicInbound(in, "demo", "api-0", rig.Pod.Path)
	if err != nil {
		t.Fatal(err)
	}
	svid, err := mtls.SVIDSecret(apiSVID)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := mtls.BundleSecret([]*x509bundle.Bundle{ca.Bundle()})
	if err != nil {
		t.Fatal(err)
	}
	srv := proxytest.NewServer(t)
	srv.Set(t, node, map[resource.Type][]types.Resource{
		resource.ClusterType:  {cls[0]},
		resource.SecretType:   {svid, bundle},
		resource.ListenerType: {in, q},
	})
	p := runProxy(t, srv)
	srv.WaitRequest(t, "an LDS ACK", acked(resource.ListenerType))
	if got := strings.Join(p.Listeners(), ","); !strings.Contains(got, q.GetName()) || !strings.Contains(got, in.GetName()) {
		t.Fatalf("running listeners %s, want the TCP and the QUIC inbound", got)
	}

	// The twin's client, in the backend netns.
	var pc net.PacketConn
	if err := transparent.InNetns(rig.Back.Path, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", "0.0.0.0:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc}
	t.Cleanup(func() { _ = tr.Close(); _ = pc.Close() })
	web := issue("web")
	u, err := h3.NewUpstream(h3.UpstreamOptions{Transport: tr, Bundles: ca.Bundle(), SNI: "8080.api.demo.mesh.test",
		Certificate: func() (*tls.Certificate, error) { return &web, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.demo.mesh.test/", nil)
	resp, err := u.RoundTrip(req, netip.AddrPortFrom(proxytest.PodAddr.Addr(), constants.InboundPort))
	if err != nil {
		t.Fatalf("request over the QUIC inbound: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/3.0" {
		t.Fatalf("response %s over %s, want 200 over HTTP/3", resp.Status, resp.Proto)
	}
	_, _ = io.ReadAll(resp.Body)
	if x := <-seen; !strings.Contains(x, "URI="+webID) || !strings.Contains(x, "By="+apiID) {
		t.Fatalf("app saw XFCC %q, want the client's ID set by the inbound", x)
	}
	// The inbound's own access log: the request came in over HTTP/3 from
	// the client's identity.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(accessLog)
		if strings.Contains(string(b), `"protocol":"HTTP/3.0"`) && strings.Contains(string(b), `"source":"`+webID+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log does not show an HTTP/3 request from %s:\n%s", webID, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
