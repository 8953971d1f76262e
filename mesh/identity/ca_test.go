package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

var cart = Account{Namespace: "shop", ServiceAccount: "cart"}

func newTestCA(t testing.TB, td string) *CA {
	t.Helper()
	ca, err := NewCA(CAConfig{TrustDomain: td, MeshDomain: "mesh.local"})
	if err != nil {
		t.Fatalf("NewCA(%q): %v", td, err)
	}
	return ca
}

func issue(t testing.TB, ca *CA, req Request) *x509svid.SVID {
	t.Helper()
	svid, err := ca.Issue(req)
	if err != nil {
		t.Fatalf("Issue(%+v): %v", req, err)
	}
	return svid
}

func TestIssuedSVIDCarriesExactlyTheMeshSANs(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	issuedAt := time.Now().Truncate(time.Second)
	svid := issue(t, ca, Request{Account: cart, TTL: 10 * time.Minute, IssuedAt: issuedAt})

	if got, want := svid.ID.String(), "spiffe://aether.test/ns/shop/sa/cart"; got != want {
		t.Errorf("SVID ID = %q, want %q", got, want)
	}
	if len(svid.Certificates) != 1 {
		t.Fatalf("chain has %d certificates, want the leaf alone", len(svid.Certificates))
	}
	leaf := svid.Certificates[0]
	var uris []string
	for _, u := range leaf.URIs {
		uris = append(uris, u.String())
	}
	if want := []string{"spiffe://aether.test/ns/shop/sa/cart"}; !slices.Equal(uris, want) {
		t.Errorf("URI SANs = %q, want %q", uris, want)
	}
	if want := []string{"cart.shop.mesh.local", "*.cart.shop.mesh.local"}; !slices.Equal(leaf.DNSNames, want) {
		t.Errorf("DNS SANs = %q, want %q", leaf.DNSNames, want)
	}
	if len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
		t.Errorf("unexpected SANs: IPs %v, emails %v", leaf.IPAddresses, leaf.EmailAddresses)
	}
	if leaf.IsCA || leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("leaf IsCA=%v KeyUsage=%b, want a non-CA with DigitalSignature only", leaf.IsCA, leaf.KeyUsage)
	}
	if want := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}; !slices.Equal(leaf.ExtKeyUsage, want) {
		t.Errorf("ExtKeyUsage = %v, want %v", leaf.ExtKeyUsage, want)
	}
	if !leaf.NotBefore.Equal(issuedAt.Add(-time.Minute)) || !leaf.NotAfter.Equal(issuedAt.Add(10*time.Minute)) {
		t.Errorf("validity %s..%s, want %s..%s", leaf.NotBefore, leaf.NotAfter,
			issuedAt.Add(-time.Minute), issuedAt.Add(10*time.Minute))
	}
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("leaf key is %T, want ECDSA P-256", leaf.PublicKey)
	}
	assertSPIFFEConformant(t, svid)
}

// assertSPIFFEConformant round-trips the SVID through go-spiffe's parser,
// which checks the leaf's SPIFFE constraints and that the key matches.
func assertSPIFFEConformant(t *testing.T, svid *x509svid.SVID) {
	t.Helper()
	certPEM, keyPEM, err := svid.Marshal()
	if err != nil {
		t.Fatalf("marshal SVID: %v", err)
	}
	parsed, err := x509svid.Parse(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("go-spiffe refuses the SVID: %v", err)
	}
	if parsed.ID != svid.ID {
		t.Errorf("parsed ID %s, want %s", parsed.ID, svid.ID)
	}
}

func TestRootIsASPIFFESigningCertificate(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	roots := ca.Bundle().X509Authorities()
	if len(roots) != 1 {
		t.Fatalf("bundle holds %d authorities, want 1", len(roots))
	}
	root := roots[0]
	if !root.IsCA || root.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("root IsCA=%v KeyUsage=%b, want CA with CertSign|CRLSign", root.IsCA, root.KeyUsage)
	}
	if len(root.URIs) != 1 || root.URIs[0].String() != "spiffe://aether.test" {
		t.Errorf("root URI SANs = %v, want [spiffe://aether.test]", root.URIs)
	}
	if pub, ok := root.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("root key is %T, want ECDSA P-256", root.PublicKey)
	}
	if err := root.CheckSignatureFrom(root); err != nil {
		t.Errorf("root is not self-signed: %v", err)
	}
	if got := ca.Bundle().TrustDomain().Name(); got != "aether.test" {
		t.Errorf("bundle trust domain %q, want aether.test", got)
	}
}

func TestSVIDVerifiesUnderItsOwnTrustDomainOnly(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	other := newTestCA(t, "other.test")
	impostor := newTestCA(t, "aether.test") // same name, another root key
	svid := issue(t, ca, Request{Account: cart, TTL: time.Hour})

	id, _, err := x509svid.Verify(svid.Certificates, ca.Bundle())
	if err != nil {
		t.Fatalf("control: SVID does not verify under its own bundle: %v", err)
	}
	if id != svid.ID {
		t.Errorf("verified ID %s, want %s", id, svid.ID)
	}

	_, _, err = x509svid.Verify(svid.Certificates, other.Bundle())
	if err == nil || !strings.Contains(err.Error(), "aether.test") {
		t.Errorf("under other.test's bundle: err = %v, want a refusal naming aether.test", err)
	}
	both := x509bundle.NewSet(ca.Bundle(), other.Bundle())
	otherSVID := issue(t, other, Request{Account: cart, TTL: time.Hour})
	if _, _, err := x509svid.Verify(otherSVID.Certificates, both); err != nil {
		t.Errorf("control: other.test's SVID does not verify with both bundles: %v", err)
	}
	if _, _, err := x509svid.Verify(otherSVID.Certificates, x509bundle.NewSet(ca.Bundle())); err == nil {
		t.Error("other.test's SVID verifies with aether.test's bundle alone")
	}

	forged := issue(t, impostor, Request{Account: cart, TTL: time.Hour})
	_, _, err = x509svid.Verify(forged.Certificates, ca.Bundle())
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("SVID from another root claiming aether.test: err = %v, want x509.UnknownAuthorityError", err)
	}
}

func TestIssuedAtInThePastGivesAnExpiredSVID(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	now := time.Now()
	inLifetime := issue(t, ca, Request{Account: cart, TTL: time.Hour, IssuedAt: now.Add(-30 * time.Minute)})
	if _, _, err := x509svid.Verify(inLifetime.Certificates, ca.Bundle(), x509svid.WithTime(now)); err != nil {
		t.Fatalf("control: an SVID issued 30m ago with a 1h TTL does not verify: %v", err)
	}
	expired := issue(t, ca, Request{Account: cart, TTL: time.Hour, IssuedAt: now.Add(-2 * time.Hour)})
	_, _, err := x509svid.Verify(expired.Certificates, ca.Bundle(), x509svid.WithTime(now))
	var invalid x509.CertificateInvalidError
	if !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Errorf("SVID issued 2h ago with a 1h TTL: err = %v, want x509.CertificateInvalidError with reason Expired", err)
	}
}

func TestOmitDNSSANsLeavesTheURISANAlone(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	svid := issue(t, ca, Request{Account: cart, TTL: time.Hour, OmitDNSSANs: true})
	leaf := svid.Certificates[0]
	if len(leaf.DNSNames) != 0 {
		t.Errorf("DNS SANs = %q, want none", leaf.DNSNames)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://aether.test/ns/shop/sa/cart" {
		t.Errorf("URI SANs = %v, want [spiffe://aether.test/ns/shop/sa/cart]", leaf.URIs)
	}
	if _, _, err := x509svid.Verify(svid.Certificates, ca.Bundle()); err != nil {
		t.Errorf("an SVID without DNS SANs must still verify (it differs only by them): %v", err)
	}
	assertSPIFFEConformant(t, svid)
}

func TestNewCARefusesBadConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  CAConfig
		want []string
	}{
		{"empty trust domain", CAConfig{MeshDomain: "mesh.local"}, []string{"invalid trust domain", "empty"}},
		{"upper-case trust domain", CAConfig{TrustDomain: "Aether.test", MeshDomain: "mesh.local"},
			[]string{"invalid trust domain", `"Aether.test"`}},
		{"trust domain as URI", CAConfig{TrustDomain: "spiffe://aether.test", MeshDomain: "mesh.local"},
			[]string{"invalid trust domain", "not a URI"}},
		{"empty mesh domain", CAConfig{TrustDomain: "aether.test"}, []string{`"aether.test"`, `invalid mesh domain ""`}},
		{"mesh domain with space", CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh local"},
			[]string{`invalid mesh domain "mesh local"`}},
		{"upper-case mesh domain", CAConfig{TrustDomain: "aether.test", MeshDomain: "Mesh.Local"},
			[]string{`invalid mesh domain "Mesh.Local"`}},
		{"negative root TTL", CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.local", RootTTL: -time.Hour},
			[]string{"root TTL -1h0m0s is not positive"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ca, err := NewCA(c.cfg)
			if err == nil {
				t.Fatalf("NewCA(%+v) = %v, want an error", c.cfg, ca)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestIssueRefusesBadRequests(t *testing.T) {
	ca, err := NewCA(CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.local", RootTTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		req  Request
		want []string
	}{
		{"empty namespace", Request{Account: Account{ServiceAccount: "cart"}, TTL: time.Hour},
			[]string{`account "/cart"`, "empty namespace"}},
		{"empty service account", Request{Account: Account{Namespace: "shop"}, TTL: time.Hour},
			[]string{`account "shop/"`, "empty service account"}},
		{"dotted service account", Request{Account: Account{Namespace: "shop", ServiceAccount: "a.b"}, TTL: time.Hour},
			[]string{`service account "a.b" is not a DNS-1123 label`}},
		{"upper-case namespace", Request{Account: Account{Namespace: "Shop", ServiceAccount: "cart"}, TTL: time.Hour},
			[]string{`namespace "Shop" is not a DNS-1123 label`}},
		{"zero TTL", Request{Account: cart, TTL: 0},
			[]string{"spiffe://aether.test/ns/shop/sa/cart", "TTL 0s is not positive"}},
		{"negative TTL", Request{Account: cart, TTL: -time.Second},
			[]string{"TTL -1s is not positive"}},
		{"TTL past the root", Request{Account: cart, TTL: 48 * time.Hour},
			[]string{"spiffe://aether.test/ns/shop/sa/cart", "is after the aether.test root's"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svid, err := ca.Issue(c.req)
			if err == nil {
				t.Fatalf("Issue(%+v) = %v, want an error", c.req, svid.ID)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Two valid labels and a valid mesh domain can still make a DNS name longer
// than 253 characters; the identity itself is fine without DNS SANs.
func TestIssueRefusesAnOverlongDNSSAN(t *testing.T) {
	long := strings.Repeat("a", 63)
	ca, err := NewCA(CAConfig{TrustDomain: "aether.test", MeshDomain: long + "." + long + ".local"})
	if err != nil {
		t.Fatalf("control: a 133-character mesh domain is valid: %v", err)
	}
	a := Account{Namespace: long, ServiceAccount: long}
	_, err = ca.Issue(Request{Account: a, TTL: time.Hour})
	if err == nil || !strings.Contains(err.Error(), `DNS SAN "`+long+"."+long+"."+long) {
		t.Errorf("err = %v, want one naming the over-long DNS SAN", err)
	}
	if _, err := ca.Issue(Request{Account: a, TTL: time.Hour, OmitDNSSANs: true}); err != nil {
		t.Errorf("control: the same account without DNS SANs: %v", err)
	}
}

func TestIDIsTheMeshSpelling(t *testing.T) {
	td := spiffeid.RequireTrustDomainFromString("aether.test")
	id, err := ID(td, cart)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := id.String(), "spiffe://aether.test/ns/shop/sa/cart"; got != want {
		t.Errorf("ID = %q, want %q", got, want)
	}
	if _, err := ID(spiffeid.TrustDomain{}, cart); err == nil || !strings.Contains(err.Error(), "empty trust domain") {
		t.Errorf("zero trust domain: err = %v, want one naming the empty trust domain", err)
	}
}

// NamesServer is the hostname check a TLS client runs against the SANs the
// mesh gives an account: the twin SNI of the service of the same name is
// covered by the wildcard (one label), another service's is not.
func TestNamesServer(t *testing.T) {
	a := Account{Namespace: "demo", ServiceAccount: "api"}
	for _, c := range []struct {
		name string
		want bool
	}{
		{"8080.api.demo.mesh.test", true},
		{"api.demo.mesh.test", true},
		{"8080.cart.demo.mesh.test", false},
		{"8080.api.other.mesh.test", false},
		{"1.8080.api.demo.mesh.test", false},
	} {
		if got := NamesServer(a, "mesh.test", c.name); got != c.want {
			t.Errorf("NamesServer(api.demo, %q) = %v, want %v", c.name, got, c.want)
		}
	}
}
