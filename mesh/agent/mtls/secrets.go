package mtls

import (
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// SVIDSecret is the tls_certificate secret of one identity, named by its
// SPIFFE ID.
func SVIDSecret(svid *x509svid.SVID) (*tlsv3.Secret, error) {
	chain, key, err := svid.Marshal()
	if err != nil {
		return nil, fmt.Errorf("SVID secret %s: %w", svid.ID, err)
	}
	return &tlsv3.Secret{
		Name: svid.ID.String(),
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: inline(chain),
			PrivateKey:       inline(key),
		}},
	}, nil
}

// BundleSecret is the trust-bundle validation context: Envoy's SPIFFE
// validator with one trust domain entry per bundle, sorted by name so that
// equal bundles give equal bytes.
func BundleSecret(bundles []*x509bundle.Bundle) (*tlsv3.Secret, error) {
	bs := slices.Clone(bundles)
	slices.SortFunc(bs, func(a, b *x509bundle.Bundle) int {
		return strings.Compare(a.TrustDomain().Name(), b.TrustDomain().Name())
	})
	cfg := &tlsv3.SPIFFECertValidatorConfig{}
	for _, b := range bs {
		var pemBytes []byte
		for _, c := range b.X509Authorities() {
			pemBytes = append(pemBytes, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
		if len(pemBytes) == 0 {
			return nil, fmt.Errorf("trust bundle of %q has no X.509 authorities", b.TrustDomain())
		}
		cfg.TrustDomains = append(cfg.TrustDomains, &tlsv3.SPIFFECertValidatorConfig_TrustDomain{
			Name: b.TrustDomain().Name(), TrustBundle: inline(pemBytes),
		})
	}
	tc, err := anyOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("trust bundle secret: %w", err)
	}
	return &tlsv3.Secret{
		Name: xdsnames.TrustBundleSecret,
		Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CustomValidatorConfig: &corev3.TypedExtensionConfig{Name: xdsnames.SPIFFEValidator, TypedConfig: tc},
		}},
	}, nil
}

func inline(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}

// ads is the config source of every SDS reference: the same ADS stream.
func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

func sds(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: ads()}
}

// anyOf packs m deterministically: the access log's JSON format is a map,
// and a map's wire order would otherwise differ between two encodings of
// one configuration, moving its version (and, after the state dir's JSON
// round trip, its bytes) with no change.
func anyOf(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, fmt.Errorf("marshal %T: %w", m, err)
	}
	return a, nil
}
