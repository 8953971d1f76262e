package secret_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"

	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy/secret"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

func TestSecretsCompileAndVerify(t *testing.T) {
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	svid, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "a"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := agentmtls.SVIDSecret(svid)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := agentmtls.BundleSecret([]*x509bundle.Bundle{ca.Bundle()})
	if err != nil {
		t.Fatal(err)
	}
	st := secret.NewStore()
	for _, s := range []*tlsv3.Secret{ss, bs} {
		c, err := secret.FromProto(s)
		if err != nil {
			t.Fatal(err)
		}
		st.Apply([]*secret.Secret{c}, nil)
	}
	cert, err := st.Certificate(svid.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.VerifyPeer(xdsnames.TrustBundleSecret, cert.Certificate)
	if err != nil || got != svid.ID {
		t.Errorf("VerifyPeer = %v, %v; want %s", got, err, svid.ID)
	}
	st.Apply(nil, []string{svid.ID.String()})
	if _, err := st.Certificate(svid.ID.String()); !errors.Is(err, secret.ErrMissing) {
		t.Errorf("a removed secret reads %v, want ErrMissing", err)
	}
}

func TestSecretNACKsUnsupportedFields(t *testing.T) {
	for _, c := range []struct {
		name  string
		s     *tlsv3.Secret
		field string
	}{
		{"trusted_ca instead of the SPIFFE validator", &tlsv3.Secret{Name: "v", Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "x"}},
		}}}, `Secret "v".validation_context.trusted_ca`},
		{"a certificate from a file", &tlsv3.Secret{Name: "c", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/x"}},
		}}}, `Secret "c".tls_certificate.certificate_chain.filename`},
		{"session ticket keys", &tlsv3.Secret{Name: "k", Type: &tlsv3.Secret_SessionTicketKeys{SessionTicketKeys: &tlsv3.TlsSessionTicketKeys{
			Keys: []*corev3.DataSource{{Specifier: &corev3.DataSource_InlineString{InlineString: strings.Repeat("k", 80)}}},
		}}}, `Secret "k".session_ticket_keys`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := secret.FromProto(c.s)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %v, want one naming %s", err, c.field)
			}
		})
	}
}
