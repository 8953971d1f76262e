// Package secret holds the proxy's SDS secrets: the SVIDs it presents and
// the trust bundles it validates peers with. TLS contexts look secrets up
// by name at every handshake, so a rotated secret is presented from the
// next handshake on while live connections keep their session
// (ARCHITECTURE.md, "The mTLS HTTP/2 path", SDS).
//
// The implemented subset is the contract's: tls_certificate with inline
// PEM chain and key, and a validation_context whose only field is Envoy's
// SPIFFE validator (envoy.tls.cert_validator.spiffe) with inline bundles.
// Anything else is an error naming the field, for the xDS client to NACK.
package secret

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// SPIFFEValidator is the validator extension a validation context names.
const SPIFFEValidator = xdsnames.SPIFFEValidator

// ErrMissing says no secret of the name is held: a handshake that needs it
// fails, as Envoy fails a handshake whose on-demand secret was removed.
var ErrMissing = errors.New("no such secret")

// Secret is a compiled Secret resource: exactly one of Cert and Bundles.
type Secret struct {
	Name    string
	Cert    *tls.Certificate
	Bundles *x509bundle.Set
}

// FromProto compiles a Secret resource.
func FromProto(s *tlsv3.Secret) (*Secret, error) {
	path := fmt.Sprintf("Secret %q", s.GetName())
	if err := s.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := fields.Only(s, path, "name", "tls_certificate", "validation_context"); err != nil {
		return nil, err
	}
	switch {
	case s.GetTlsCertificate() != nil:
		c, err := certificate(s.GetTlsCertificate(), path+".tls_certificate")
		return &Secret{Name: s.GetName(), Cert: c}, err
	case s.GetValidationContext() != nil:
		b, err := bundles(s.GetValidationContext(), path+".validation_context")
		return &Secret{Name: s.GetName(), Bundles: b}, err
	}
	return nil, fmt.Errorf("%s: neither tls_certificate nor validation_context is set", path)
}

func certificate(tc *tlsv3.TlsCertificate, path string) (*tls.Certificate, error) {
	if err := fields.Only(tc, path, "certificate_chain", "private_key"); err != nil {
		return nil, err
	}
	chain, err := inline(tc.GetCertificateChain(), path+".certificate_chain")
	if err != nil {
		return nil, err
	}
	key, err := inline(tc.GetPrivateKey(), path+".private_key")
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

func bundles(vc *tlsv3.CertificateValidationContext, path string) (*x509bundle.Set, error) {
	if err := fields.Only(vc, path, "custom_validator_config"); err != nil {
		return nil, err
	}
	cv := vc.GetCustomValidatorConfig()
	if cv == nil {
		return nil, fmt.Errorf("%s.custom_validator_config: missing; this data plane validates peers only with %s", path, SPIFFEValidator)
	}
	path += ".custom_validator_config"
	if cv.GetName() != SPIFFEValidator {
		return nil, fmt.Errorf("%s.name: %q is not supported, only %s", path, cv.GetName(), SPIFFEValidator)
	}
	var cfg tlsv3.SPIFFECertValidatorConfig
	if err := cv.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
		return nil, fmt.Errorf("%s.typed_config: not a SPIFFECertValidatorConfig: %w", path, err)
	}
	path += ".typed_config"
	if err := fields.Only(&cfg, path, "trust_domains"); err != nil {
		return nil, err
	}
	set := x509bundle.NewSet()
	for i, td := range cfg.GetTrustDomains() {
		tp := fmt.Sprintf("%s.trust_domains[%d]", path, i)
		if err := fields.Only(td, tp, "name", "trust_bundle"); err != nil {
			return nil, err
		}
		name, err := spiffeid.TrustDomainFromString(td.GetName())
		if err != nil {
			return nil, fmt.Errorf("%s.name: %w", tp, err)
		}
		if set.Has(name) {
			return nil, fmt.Errorf("%s.name: trust domain %q is listed twice", tp, name)
		}
		pemBytes, err := inline(td.GetTrustBundle(), tp+".trust_bundle")
		if err != nil {
			return nil, err
		}
		b, err := x509bundle.Parse(name, pemBytes)
		if err != nil {
			return nil, fmt.Errorf("%s.trust_bundle: %w", tp, err)
		}
		set.Add(b)
	}
	if set.Len() == 0 {
		return nil, fmt.Errorf("%s.trust_domains: empty; no peer could be validated", path)
	}
	return set, nil
}

func inline(ds *corev3.DataSource, path string) ([]byte, error) {
	if ds == nil {
		return nil, fmt.Errorf("%s: missing", path)
	}
	if err := fields.Only(ds, path, "inline_bytes", "inline_string"); err != nil {
		return nil, err
	}
	if b := ds.GetInlineBytes(); len(b) > 0 {
		return b, nil
	}
	if s := ds.GetInlineString(); s != "" {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("%s: empty", path)
}

// Store holds the current secrets by name. Writers replace whole values,
// so a handshake keeps what it read.
type Store struct {
	mu sync.RWMutex
	m  map[string]*Secret
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{m: map[string]*Secret{}} }

// Apply puts every secret and drops the removed names, all at once.
func (s *Store) Apply(put []*Secret, removed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sec := range put {
		s.m[sec.Name] = sec
	}
	for _, n := range removed {
		delete(s.m, n)
	}
}

// Certificate returns the tls_certificate secret name.
func (s *Store) Certificate(name string) (*tls.Certificate, error) {
	s.mu.RLock()
	sec := s.m[name]
	s.mu.RUnlock()
	if sec == nil || sec.Cert == nil {
		return nil, fmt.Errorf("tls_certificate secret %q: %w", name, ErrMissing)
	}
	return sec.Cert, nil
}

// HasBundle says whether validation context secret name holds a bundle
// for trust domain td.
func (s *Store) HasBundle(name string, td spiffeid.TrustDomain) bool {
	s.mu.RLock()
	sec := s.m[name]
	s.mu.RUnlock()
	return sec != nil && sec.Bundles != nil && sec.Bundles.Has(td)
}

// VerifyPeer validates a peer's chain the way Envoy's SPIFFE validator
// does, against the validation context secret name: the leaf carries
// exactly one URI SAN, a SPIFFE ID of a configured trust domain; it is not
// a CA; it is within its validity; and the chain verifies to that trust
// domain's bundle alone. It returns the peer's ID.
func (s *Store) VerifyPeer(name string, raw [][]byte) (spiffeid.ID, error) {
	s.mu.RLock()
	sec := s.m[name]
	s.mu.RUnlock()
	if sec == nil || sec.Bundles == nil {
		return spiffeid.ID{}, fmt.Errorf("validation context secret %q: %w", name, ErrMissing)
	}
	if len(raw) == 0 {
		return spiffeid.ID{}, errors.New("peer presented no certificate")
	}
	chain := make([]*x509.Certificate, 0, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return spiffeid.ID{}, fmt.Errorf("peer certificate %d: %w", i, err)
		}
		chain = append(chain, c)
	}
	id, _, err := x509svid.Verify(chain, sec.Bundles)
	if err != nil {
		return spiffeid.ID{}, fmt.Errorf("peer SVID: %w", err)
	}
	return id, nil
}
