package h2_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

var dstSNI = xdsnames.SNI(8080, "dst", ns, meshDomain)

// direct is an h2 client straight to the inbound listener presenting svid
// (none when nil), trusting the mesh's CA for the server.
func (m *mesh) direct(svid *x509svid.SVID, sni string) *http.Client {
	roots := x509.NewCertPool()
	for _, c := range m.ca.Bundle().X509Authorities() {
		roots.AddCert(c)
	}
	cfg := &tls.Config{ServerName: sni, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13,
		InsecureSkipVerify: true, SessionTicketsDisabled: true}
	if svid != nil {
		chain, key, _ := svid.Marshal()
		cert, err := tls.X509KeyPair(chain, key)
		if err != nil {
			panic(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: &http2.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
}

func (m *mesh) refused(reason string) float64 {
	v, _ := m.metrics.Value("aether_proxy_http_tls_refused_total", map[string]string{"listener": m.inbound.Name(), "reason": reason})
	return v
}

// A client with no certificate, one from another trust domain and one
// with an expired SVID are each refused at the inbound handshake and
// counted by reason; the app sees none of them. A good client, in the same
// run, gets through: the refusals are not a broken listener.
func TestInboundRefusesBadPeers(t *testing.T) {
	m := newMesh(t, meshConfig{})
	other, err := identity.NewCA(identity.CAConfig{TrustDomain: "other.test", MeshDomain: meshDomain})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue(identity.Request{Account: identity.Account{Namespace: ns, ServiceAccount: "sa-a"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://%s/", m.inbound.Addr())
	for _, c := range []struct {
		name   string
		svid   *x509svid.SVID
		reason string
	}{
		{"no certificate", nil, metrics.RefusedNoClientCert},
		{"another trust domain", foreign, metrics.RefusedPeer},
		{"expired SVID", m.issue(t, "sa-a", time.Minute, time.Now().Add(-time.Hour)), metrics.RefusedPeer},
	} {
		before := m.refused(c.reason)
		resp, err := m.direct(c.svid, dstSNI).Get(url)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d, want the handshake refused", c.name, resp.StatusCode)
		}
		waitFor(t, c.name+" counted as "+c.reason, func() bool { return m.refused(c.reason) == before+1 })
	}
	if m.app.count() != 0 {
		t.Errorf("the app saw %d requests from refused peers, want none", m.app.count())
	}
	good := m.issue(t, "sa-a", time.Hour, time.Time{})
	resp, err := m.direct(good, dstSNI).Get(url)
	if err != nil {
		t.Fatalf("a valid SVID in the same run: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "By=" + id("dst") + ";URI=" + id("sa-a"); resp.StatusCode != 200 || string(b) != want {
		t.Errorf("a valid SVID got %d with XFCC %q, want 200 and %q", resp.StatusCode, b, want)
	}
}

// An SNI no filter chain names is closed at the handshake and counted.
func TestInboundSNISelectsTheChain(t *testing.T) {
	m := newMesh(t, meshConfig{})
	good := m.issue(t, "sa-a", time.Hour, time.Time{})
	before := m.refused(metrics.RefusedNoChain)
	if resp, err := m.direct(good, "9090.dst."+ns+"."+meshDomain).Get(fmt.Sprintf("https://%s/", m.inbound.Addr())); err == nil {
		resp.Body.Close()
		t.Errorf("an unknown SNI answered %d, want no filter chain", resp.StatusCode)
	}
	waitFor(t, "the unknown SNI counted", func() bool { return m.refused(metrics.RefusedNoChain) == before+1 })
}

// A client's own XFCC never reaches the app: SANITIZE_SET replaces it.
func TestInboundSanitizesXFCC(t *testing.T) {
	m := newMesh(t, meshConfig{})
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://%s/", m.inbound.Addr()), nil)
	req.Header.Set("X-Forwarded-Client-Cert", "URI="+id("admin"))
	resp, err := m.direct(m.issue(t, "sa-a", time.Hour, time.Time{}), dstSNI).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if peers := m.app.peers(); peers[id("sa-a")] != 1 || len(peers) != 1 {
		t.Errorf("the app saw peers %v, want only %s", peers, id("sa-a"))
	}
}

// Rotation: a new SVID secret is presented from the next handshake on,
// and a connection opened before it keeps serving.
func TestRotationKeepsLiveConnections(t *testing.T) {
	m := newMesh(t, meshConfig{})
	client := m.direct(m.issue(t, "sa-a", time.Hour, time.Time{}), dstSNI)
	url := fmt.Sprintf("https://%s/", m.inbound.Addr())
	first := serverSerial(t, client, url)
	m.putSecret(t, svidSecret(t, m.issue(t, "dst", time.Hour, time.Time{})))
	if again := serverSerial(t, client, url); again != first {
		t.Errorf("the live connection's server certificate changed (%s → %s); it should keep its session", first, again)
	}
	fresh := m.direct(m.issue(t, "sa-a", time.Hour, time.Time{}), dstSNI)
	if next := serverSerial(t, fresh, url); next == first {
		t.Errorf("a new handshake after rotation still presents serial %s", first)
	}
}

func serverSerial(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.TLS.PeerCertificates[0].SerialNumber.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
