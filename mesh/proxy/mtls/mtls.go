// Package mtls compiles the TLS transport sockets of the mTLS path
// (DownstreamTlsContext on the inbound listener, UpstreamTlsContext on h2
// clusters) and turns them into Go TLS configs that read their secrets from
// a secret.Store at every handshake (ARCHITECTURE.md, "The mTLS HTTP/2 path").
//
// Peers are validated as Envoy's SPIFFE validator does (secret.VerifyPeer),
// then against match_typed_subject_alt_names. Session tickets are off on
// both sides: Go's TLS server skips VerifyPeerCertificate on a resumed
// session (R4 of the QUIC path), and a revoked SVID must not come
// back through a ticket.
package mtls

import (
	"crypto/tls"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	fsomapperv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/cert_mappers/filter_state_override/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/cert_selectors/on_demand_secret/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
	"github.com/aether-mesh/aether/mesh/proxy/secret"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Names Envoy registers (mesh/xdsnames).
const (
	TransportSocket = xdsnames.TLSTransportSocket
	// OnDemandSelector and FilterStateMapper are the upstream certificate
	// selector and mapper that choose the certificate per connection.
	OnDemandSelector  = xdsnames.OnDemandSecretSelector
	FilterStateMapper = xdsnames.FilterStateCertMapper
	// MapperKey is the filter state object the mapper reads.
	MapperKey = xdsnames.CertMapperFilterStateKey
)

// Common is a compiled CommonTlsContext.
type Common struct {
	MinVersion uint16
	ALPN       []string
	// CertSecret is the static certificate's secret; empty when Selector
	// is set.
	CertSecret string
	// Selector is set when the certificate is chosen per connection.
	Selector *Selector
	// ValidationSecret is the validation context's SDS name.
	ValidationSecret string
	// SANs, when any, must match one of the peer's URI SANs.
	SANs []SANMatcher
}

// Selector is Envoy's on-demand selector with the filter_state_override
// mapper: the secret the downstream's MapperKey object names, or Default.
type Selector struct {
	Default string
}

// SANMatcher is one match_typed_subject_alt_names entry (URI only).
type SANMatcher struct {
	Exact, Prefix string
}

func (m SANMatcher) match(uri string) bool {
	if m.Exact != "" {
		return uri == m.Exact
	}
	return strings.HasPrefix(uri, m.Prefix)
}

// Downstream is a compiled DownstreamTlsContext.
type Downstream struct {
	Common
	RequireClientCert bool
}

// Upstream is a compiled UpstreamTlsContext.
type Upstream struct {
	Common
	SNI string
}

// DownstreamFromProto compiles a listener filter chain's transport socket.
func DownstreamFromProto(ts *corev3.TransportSocket, path string) (*Downstream, error) {
	var d tlsv3.DownstreamTlsContext
	if err := unwrap(ts, &d, path); err != nil {
		return nil, err
	}
	path += ".typed_config"
	if err := fields.Only(&d, path, "require_client_certificate", "common_tls_context"); err != nil {
		return nil, err
	}
	c, err := common(d.GetCommonTlsContext(), path+".common_tls_context", false)
	if err != nil {
		return nil, err
	}
	return &Downstream{Common: *c, RequireClientCert: d.GetRequireClientCertificate().GetValue()}, nil
}

// UpstreamFromProto compiles a cluster's transport socket.
func UpstreamFromProto(ts *corev3.TransportSocket, path string) (*Upstream, error) {
	var u tlsv3.UpstreamTlsContext
	if err := unwrap(ts, &u, path); err != nil {
		return nil, err
	}
	path += ".typed_config"
	if err := fields.Only(&u, path, "sni", "common_tls_context"); err != nil {
		return nil, err
	}
	c, err := common(u.GetCommonTlsContext(), path+".common_tls_context", true)
	if err != nil {
		return nil, err
	}
	return &Upstream{Common: *c, SNI: u.GetSni()}, nil
}

// message is a generated Envoy message: proto plus its PGV validation.
type message interface {
	proto.Message
	ValidateAll() error
}

func unwrap(ts *corev3.TransportSocket, into message, path string) error {
	if err := fields.Only(ts, path, "name", "typed_config"); err != nil {
		return err
	}
	if ts.GetName() != TransportSocket {
		return fmt.Errorf("%s.name: %q is not supported, only %s", path, ts.GetName(), TransportSocket)
	}
	if err := ts.GetTypedConfig().UnmarshalTo(into); err != nil {
		return fmt.Errorf("%s.typed_config: not a %s: %w", path, into.ProtoReflect().Descriptor().FullName(), err)
	}
	if err := into.ValidateAll(); err != nil {
		return fmt.Errorf("%s.typed_config: %w", path, err)
	}
	return nil
}

var tlsVersions = map[tlsv3.TlsParameters_TlsProtocol]uint16{
	tlsv3.TlsParameters_TLSv1_2: tls.VersionTLS12,
	tlsv3.TlsParameters_TLSv1_3: tls.VersionTLS13,
}

func common(c *tlsv3.CommonTlsContext, path string, upstream bool) (*Common, error) {
	if c == nil {
		return nil, fmt.Errorf("%s: missing", path)
	}
	allowed := []string{"tls_params", "alpn_protocols", "tls_certificate_sds_secret_configs", "combined_validation_context"}
	if upstream {
		allowed = append(allowed, "custom_tls_certificate_selector")
	}
	if err := fields.Only(c, path, allowed...); err != nil {
		return nil, err
	}
	out := &Common{MinVersion: tls.VersionTLS12, ALPN: c.GetAlpnProtocols()}
	if p := c.GetTlsParams(); p != nil {
		if err := fields.Only(p, path+".tls_params", "tls_minimum_protocol_version"); err != nil {
			return nil, err
		}
		v, ok := tlsVersions[p.GetTlsMinimumProtocolVersion()]
		if !ok {
			return nil, fmt.Errorf("%s.tls_params.tls_minimum_protocol_version: %s is not supported, only TLSv1_2 and TLSv1_3", path, p.GetTlsMinimumProtocolVersion())
		}
		out.MinVersion = v
	}
	if err := certSource(c, out, path); err != nil {
		return nil, err
	}
	if err := validation(c.GetCombinedValidationContext(), out, path+".combined_validation_context"); err != nil {
		return nil, err
	}
	return out, nil
}

func certSource(c *tlsv3.CommonTlsContext, out *Common, path string) error {
	scs := c.GetTlsCertificateSdsSecretConfigs()
	sel := c.GetCustomTlsCertificateSelector()
	switch {
	case sel != nil && len(scs) > 0:
		return fmt.Errorf("%s.custom_tls_certificate_selector: set beside tls_certificate_sds_secret_configs", path)
	case sel != nil:
		s, err := selector(sel, path+".custom_tls_certificate_selector")
		out.Selector = s
		return err
	case len(scs) != 1:
		return fmt.Errorf("%s.tls_certificate_sds_secret_configs: %d entries, want exactly one", path, len(scs))
	}
	name, err := sdsName(scs[0], path+".tls_certificate_sds_secret_configs[0]")
	out.CertSecret = name
	return err
}

func sdsName(s *tlsv3.SdsSecretConfig, path string) (string, error) {
	if err := fields.Only(s, path, "name", "sds_config"); err != nil {
		return "", err
	}
	if err := adsOnly(s.GetSdsConfig(), path+".sds_config"); err != nil {
		return "", err
	}
	return s.GetName(), nil
}

func adsOnly(cs *corev3.ConfigSource, path string) error {
	if cs.GetAds() == nil {
		return fmt.Errorf("%s: only ads{} is supported", path)
	}
	if err := fields.Only(cs, path, "ads", "resource_api_version"); err != nil {
		return err
	}
	if cs.GetResourceApiVersion() != corev3.ApiVersion_V3 {
		return fmt.Errorf("%s.resource_api_version: %s, want V3", path, cs.GetResourceApiVersion())
	}
	return nil
}

func selector(tc *corev3.TypedExtensionConfig, path string) (*Selector, error) {
	if tc.GetName() != OnDemandSelector {
		return nil, fmt.Errorf("%s.name: %q is not supported, only %s", path, tc.GetName(), OnDemandSelector)
	}
	var od ondemandv3.Config
	if err := tc.GetTypedConfig().UnmarshalTo(&od); err != nil {
		return nil, fmt.Errorf("%s.typed_config: not an on_demand_secret Config: %w", path, err)
	}
	path += ".typed_config"
	if err := od.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := fields.Only(&od, path, "config_source", "certificate_mapper"); err != nil {
		return nil, err
	}
	if err := adsOnly(od.GetConfigSource(), path+".config_source"); err != nil {
		return nil, err
	}
	m := od.GetCertificateMapper()
	if m.GetName() != FilterStateMapper {
		return nil, fmt.Errorf("%s.certificate_mapper.name: %q is not supported, only %s", path, m.GetName(), FilterStateMapper)
	}
	var fso fsomapperv3.Config
	if err := m.GetTypedConfig().UnmarshalTo(&fso); err != nil {
		return nil, fmt.Errorf("%s.certificate_mapper.typed_config: not a filter_state_override Config: %w", path, err)
	}
	if err := fso.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s.certificate_mapper.typed_config: %w", path, err)
	}
	return &Selector{Default: fso.GetDefaultValue()}, nil
}

func validation(cv *tlsv3.CommonTlsContext_CombinedCertificateValidationContext, out *Common, path string) error {
	if cv == nil {
		return fmt.Errorf("%s: missing; a mesh TLS context always validates its peer", path)
	}
	if err := fields.Only(cv, path, "default_validation_context", "validation_context_sds_secret_config"); err != nil {
		return err
	}
	name, err := sdsName(cv.GetValidationContextSdsSecretConfig(), path+".validation_context_sds_secret_config")
	if err != nil {
		return err
	}
	out.ValidationSecret = name
	dp := path + ".default_validation_context"
	if err := fields.Only(cv.GetDefaultValidationContext(), dp, "match_typed_subject_alt_names"); err != nil {
		return err
	}
	for i, m := range cv.GetDefaultValidationContext().GetMatchTypedSubjectAltNames() {
		mp := fmt.Sprintf("%s.match_typed_subject_alt_names[%d]", dp, i)
		if m.GetSanType() != tlsv3.SubjectAltNameMatcher_URI {
			return fmt.Errorf("%s.san_type: %s is not supported, only URI", mp, m.GetSanType())
		}
		if err := fields.Only(m, mp, "san_type", "matcher"); err != nil {
			return err
		}
		if err := fields.Only(m.GetMatcher(), mp+".matcher", "exact", "prefix"); err != nil {
			return err
		}
		sm := SANMatcher{Exact: m.GetMatcher().GetExact(), Prefix: m.GetMatcher().GetPrefix()}
		if sm.Exact == "" && sm.Prefix == "" {
			return fmt.Errorf("%s.matcher: empty", mp)
		}
		out.SANs = append(out.SANs, sm)
	}
	return nil
}

// verify checks the peer with the validation secret, then the SANs, and
// returns its ID.
func (c *Common) verify(store *secret.Store, cs tls.ConnectionState) (spiffeid.ID, error) {
	raw := make([][]byte, len(cs.PeerCertificates))
	for i, pc := range cs.PeerCertificates {
		raw[i] = pc.Raw
	}
	id, err := store.VerifyPeer(c.ValidationSecret, raw)
	if err != nil {
		return id, err
	}
	if len(c.SANs) == 0 {
		return id, nil
	}
	for _, m := range c.SANs {
		if m.match(id.String()) {
			return id, nil
		}
	}
	return id, fmt.Errorf("peer %s matches none of the %d subject alt name matchers", id, len(c.SANs))
}

// ServerConfig is the chain's server side: its certificate read at every
// handshake, a client certificate required and validated when asked.
func (d *Downstream) ServerConfig(store *secret.Store) *tls.Config {
	cfg := &tls.Config{
		MinVersion:             d.MinVersion,
		NextProtos:             d.ALPN,
		SessionTicketsDisabled: true,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return store.Certificate(d.CertSecret)
		},
		ClientAuth: tls.RequestClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 && !d.RequireClientCert {
				return nil
			}
			_, err := d.verify(store, cs)
			return err
		},
	}
	if d.RequireClientCert {
		cfg.ClientAuth = tls.RequireAnyClientCert
	}
	return cfg
}

// ClientConfig is the cluster's client side for one source: it presents
// the secret the mapper derives from source (Envoy's filter_state_override
// reads the downstream's shared object; absent, its default_value), or the
// static secret, and validates the server.
func (u *Upstream) ClientConfig(store *secret.Store, source string) *tls.Config {
	name := u.CertSecret
	if u.Selector != nil {
		name = source
		if name == "" {
			name = u.Selector.Default
		}
	}
	return &tls.Config{
		MinVersion:             u.MinVersion,
		NextProtos:             u.ALPN,
		ServerName:             u.SNI,
		SessionTicketsDisabled: true,
		// The chain is verified by VerifyConnection against the SPIFFE
		// bundle; a SPIFFE SVID carries no DNS name to check.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return store.Certificate(name)
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := u.verify(store, cs)
			return err
		},
	}
}

// PeerID is the verified peer's SPIFFE ID of a finished handshake.
func PeerID(cs tls.ConnectionState) (spiffeid.ID, bool) {
	if len(cs.PeerCertificates) == 0 {
		return spiffeid.ID{}, false
	}
	for _, u := range cs.PeerCertificates[0].URIs {
		if id, err := spiffeid.FromURI(u); err == nil {
			return id, true
		}
	}
	return spiffeid.ID{}, false
}
