package h3

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Downstream is a compiled QuicDownstreamTransport: the TLS context the
// TCP inbound also uses, and the R4 fields with Envoy's defaults applied.
type Downstream struct {
	TLS                               *tlsv3.DownstreamTlsContext
	EnableResumption, EnableEarlyData bool
}

// DownstreamFromProto compiles a listener's QUIC transport socket. path
// is its location in the listener, for errors.
func DownstreamFromProto(ts *corev3.TransportSocket, path string) (*Downstream, error) {
	q := &quicv3.QuicDownstreamTransport{}
	if err := unwrap(ts, q, path); err != nil {
		return nil, err
	}
	path += ".typed_config"
	if err := fields.Only(q, path, "downstream_tls_context", "enable_early_data", "enable_resumption"); err != nil {
		return nil, err
	}
	if q.GetDownstreamTlsContext() == nil {
		return nil, fmt.Errorf("%s.downstream_tls_context: required", path)
	}
	// Envoy's defaults: both on, unless the context validates client
	// certificates, where a resumed session would skip the check.
	def := q.GetDownstreamTlsContext().GetCommonTlsContext().GetValidationContextType() == nil
	d := &Downstream{TLS: q.GetDownstreamTlsContext(), EnableResumption: def, EnableEarlyData: def}
	if v := q.GetEnableResumption(); v != nil {
		d.EnableResumption = v.GetValue()
	}
	if v := q.GetEnableEarlyData(); v != nil {
		d.EnableEarlyData = v.GetValue()
	}
	if d.EnableEarlyData && !d.EnableResumption {
		return nil, fmt.Errorf("%s.enable_early_data: early data requires enable_resumption", path)
	}
	return d, nil
}

// UpstreamFromProto compiles a cluster's QUIC transport socket into its
// TLS context. Like Envoy, it refuses a certificate selector: a QUIC
// upstream presents one certificate for the whole cluster (Q2a).
func UpstreamFromProto(ts *corev3.TransportSocket, path string) (*tlsv3.UpstreamTlsContext, error) {
	q := &quicv3.QuicUpstreamTransport{}
	if err := unwrap(ts, q, path); err != nil {
		return nil, err
	}
	path += ".typed_config"
	if err := fields.Only(q, path, "upstream_tls_context"); err != nil {
		return nil, err
	}
	u := q.GetUpstreamTlsContext()
	if u == nil {
		return nil, fmt.Errorf("%s.upstream_tls_context: required", path)
	}
	if u.GetCommonTlsContext().GetCustomTlsCertificateSelector() != nil {
		return nil, fmt.Errorf("%s.upstream_tls_context.common_tls_context.custom_tls_certificate_selector: not supported on a QUIC upstream, which presents one certificate per cluster", path)
	}
	return u, nil
}

func unwrap(ts *corev3.TransportSocket, into proto.Message, path string) error {
	if ts == nil {
		return errors.New(path + ": required")
	}
	if ts.GetName() != xdsnames.QUICTransportSocket {
		return fmt.Errorf("%s.name: %q, want %q", path, ts.GetName(), xdsnames.QUICTransportSocket)
	}
	if err := ts.GetTypedConfig().UnmarshalTo(into); err != nil {
		return fmt.Errorf("%s.typed_config: not a %s: %w", path, into.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}
