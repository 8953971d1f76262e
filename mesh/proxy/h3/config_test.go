package h3

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

func socket(t *testing.T, m proto.Message) *corev3.TransportSocket {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: xdsnames.QUICTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

// validating is a downstream context that validates client certificates.
func validating() *tlsv3.DownstreamTlsContext {
	return &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
			ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: "trust-bundle"}},
	}}
}

func TestDownstreamR4Fields(t *testing.T) {
	for _, c := range []struct {
		name              string
		q                 *quicv3.QuicDownstreamTransport
		resumption, early bool
		wantErr           string
	}{
		{"explicit falses", &quicv3.QuicDownstreamTransport{DownstreamTlsContext: validating(),
			EnableResumption: wrapperspb.Bool(false), EnableEarlyData: wrapperspb.Bool(false)}, false, false, ""},
		{"resumption on, as configured", &quicv3.QuicDownstreamTransport{DownstreamTlsContext: validating(),
			EnableResumption: wrapperspb.Bool(true), EnableEarlyData: wrapperspb.Bool(false)}, true, false, ""},
		{"defaults with client validation: off", &quicv3.QuicDownstreamTransport{DownstreamTlsContext: validating()}, false, false, ""},
		{"defaults without client validation: on", &quicv3.QuicDownstreamTransport{DownstreamTlsContext: &tlsv3.DownstreamTlsContext{}}, true, true, ""},
		{"early data without resumption", &quicv3.QuicDownstreamTransport{DownstreamTlsContext: validating(),
			EnableEarlyData: wrapperspb.Bool(true)}, false, false, "enable_early_data: early data requires enable_resumption"},
		{"no TLS context", &quicv3.QuicDownstreamTransport{}, false, false, "downstream_tls_context: required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := DownstreamFromProto(socket(t, c.q), `Listener "l".filter_chains[0].transport_socket`)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), `Listener "l"`) {
					t.Fatalf("err = %v, want one naming the listener and %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.EnableResumption != c.resumption || d.EnableEarlyData != c.early {
				t.Fatalf("resumption %v early %v, want %v %v", d.EnableResumption, d.EnableEarlyData, c.resumption, c.early)
			}
		})
	}
}

// TestUpstreamRefusesACertificateSelector: like Envoy, a QUIC upstream
// with a certificate selector is refused, naming the field; without one it
// compiles (the control).
func TestUpstreamRefusesACertificateSelector(t *testing.T) {
	q := &quicv3.QuicUpstreamTransport{UpstreamTlsContext: &tlsv3.UpstreamTlsContext{Sni: "18008.svc-b.demo.mesh.local",
		CommonTlsContext: &tlsv3.CommonTlsContext{}}}
	if _, err := UpstreamFromProto(socket(t, q), `Cluster "quic:x"`); err != nil {
		t.Fatalf("control: a plain QUIC upstream is refused: %v", err)
	}
	q.UpstreamTlsContext.CommonTlsContext.CustomTlsCertificateSelector = &corev3.TypedExtensionConfig{Name: "envoy.tls.certificate_selectors.on_demand_secret"}
	_, err := UpstreamFromProto(socket(t, q), `Cluster "quic:x".transport_socket`)
	want := `Cluster "quic:x".transport_socket.typed_config.upstream_tls_context.common_tls_context.custom_tls_certificate_selector`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one naming %s", err, want)
	}
}

func TestTransportSocketName(t *testing.T) {
	ts := socket(t, &quicv3.QuicUpstreamTransport{})
	ts.Name = "envoy.transport_sockets.tls"
	if _, err := UpstreamFromProto(ts, "c"); err == nil || !strings.Contains(err.Error(), "c.name") {
		t.Fatalf("err = %v, want the name refused", err)
	}
}
