// Package xdsext holds the project's own xDS extensions: the configuration
// of what Envoy has no resource for, carried in an xds.type.v3.TypedStruct
// (a type URL of the project's naming over a google.protobuf.Struct), so
// no proto of ours has to be compiled or registered for a resource to
// decode. The agent encodes them, the config gates and the proxy decode
// them strictly: an unknown field, a wrong type or an out-of-range value
// is an error naming its path.
package xdsext

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// QUICPassthrough is the typed_config of the QUIC passthrough listener
// filter (xdsnames.QUICPassthroughFilter) on the gateway's UDP 18009
// listener: the forwarder's bounds. Which server name goes to which
// cluster is not here: it is the listener's filter chains, the same as
// the TCP listener's (server_names → tcp_proxy's cluster).
//
// In the Struct each field is spelled as proto3 JSON would spell it:
// numbers for the counts, "60s" strings for the durations. A zero field
// here is absent there, which the proxy reads as the forwarder's default
// and the config gates refuse.
type QUICPassthrough struct {
	StatPrefix string
	// MaxFlows caps the routed flows: udp_proxy's max_connections
	// circuit breaker, per listener.
	MaxFlows uint32
	// MaxPendingFlows caps the flows still waiting for their whole
	// ClientHello.
	MaxPendingFlows uint32
	// MaxPendingBytesPerFlow caps the datagrams one waiting flow holds.
	MaxPendingBytesPerFlow uint32
	// IdleTimeout ends a routed flow with no datagram either way
	// (udp_proxy's idle_timeout).
	IdleTimeout time.Duration
	// ClientHelloTimeout drops a flow whose ClientHello is not whole in
	// time (listener_filters_timeout's role on TCP).
	ClientHelloTimeout time.Duration
}

// The Struct's field names.
const (
	fieldStatPrefix         = "stat_prefix"
	fieldMaxFlows           = "max_flows"
	fieldMaxPendingFlows    = "max_pending_flows"
	fieldMaxPendingBytes    = "max_pending_bytes_per_flow"
	fieldIdleTimeout        = "idle_timeout"
	fieldClientHelloTimeout = "client_hello_timeout"
)

// TypedConfig is q as a listener filter's typed_config.
func (q QUICPassthrough) TypedConfig() (*anypb.Any, error) {
	f := map[string]*structpb.Value{}
	if q.StatPrefix != "" {
		f[fieldStatPrefix] = structpb.NewStringValue(q.StatPrefix)
	}
	for k, v := range map[string]uint32{fieldMaxFlows: q.MaxFlows, fieldMaxPendingFlows: q.MaxPendingFlows, fieldMaxPendingBytes: q.MaxPendingBytesPerFlow} {
		if v != 0 {
			f[k] = structpb.NewNumberValue(float64(v))
		}
	}
	for k, v := range map[string]time.Duration{fieldIdleTimeout: q.IdleTimeout, fieldClientHelloTimeout: q.ClientHelloTimeout} {
		if v != 0 {
			// protojson's spelling of a Duration.
			b, err := durationJSON(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			f[k] = structpb.NewStringValue(b)
		}
	}
	// Deterministic: a Struct is a map, whose wire order would otherwise
	// differ between two encodings and move the resource's version.
	a := &anypb.Any{}
	err := anypb.MarshalFrom(a, &xdstypev3.TypedStruct{TypeUrl: xdsnames.QUICPassthroughTypeURL, Value: &structpb.Struct{Fields: f}}, proto.MarshalOptions{Deterministic: true})
	return a, err
}

func durationJSON(d time.Duration) (string, error) {
	if d < 0 {
		return "", fmt.Errorf("%s is negative", d)
	}
	b, err := protojson.Marshal(durationpb.New(d))
	if err != nil {
		return "", err
	}
	return string(b[1 : len(b)-1]), nil
}

// ErrNotQUICPassthrough is returned for a typed_config that is not the
// QUIC passthrough's TypedStruct.
var ErrNotQUICPassthrough = errors.New("not a " + xdsnames.QUICPassthroughTypeURL + " TypedStruct")

// QUICPassthroughFrom decodes a typed_config; path names it in errors.
func QUICPassthroughFrom(a *anypb.Any, path string) (QUICPassthrough, error) {
	var q QUICPassthrough
	var ts xdstypev3.TypedStruct
	if a == nil || a.UnmarshalTo(&ts) != nil {
		return q, fmt.Errorf("%s (%s): %w", path, a.GetTypeUrl(), ErrNotQUICPassthrough)
	}
	if ts.GetTypeUrl() != xdsnames.QUICPassthroughTypeURL {
		return q, fmt.Errorf("%s.type_url: %q: %w", path, ts.GetTypeUrl(), ErrNotQUICPassthrough)
	}
	path += ".value"
	fields := ts.GetValue().GetFields()
	known := []string{fieldStatPrefix, fieldMaxFlows, fieldMaxPendingFlows, fieldMaxPendingBytes, fieldIdleTimeout, fieldClientHelloTimeout}
	for _, k := range sortedKeys(fields) {
		if !slices.Contains(known, k) {
			return q, fmt.Errorf("%s.%s: unknown field (known: %v)", path, k, known)
		}
	}
	var err error
	if v, ok := fields[fieldStatPrefix]; ok {
		s, isStr := v.GetKind().(*structpb.Value_StringValue)
		if !isStr {
			return q, fmt.Errorf("%s.%s: want a string", path, fieldStatPrefix)
		}
		q.StatPrefix = s.StringValue
	}
	for k, dst := range map[string]*uint32{fieldMaxFlows: &q.MaxFlows, fieldMaxPendingFlows: &q.MaxPendingFlows, fieldMaxPendingBytes: &q.MaxPendingBytesPerFlow} {
		if v, ok := fields[k]; ok {
			if *dst, err = count(v, path+"."+k); err != nil {
				return q, err
			}
		}
	}
	for k, dst := range map[string]*time.Duration{fieldIdleTimeout: &q.IdleTimeout, fieldClientHelloTimeout: &q.ClientHelloTimeout} {
		if v, ok := fields[k]; ok {
			if *dst, err = duration(v, path+"."+k); err != nil {
				return q, err
			}
		}
	}
	return q, nil
}

func count(v *structpb.Value, path string) (uint32, error) {
	n, ok := v.GetKind().(*structpb.Value_NumberValue)
	if !ok {
		return 0, fmt.Errorf("%s: want a number", path)
	}
	f := n.NumberValue
	if f != math.Trunc(f) || f < 1 || f > math.MaxUint32 {
		return 0, fmt.Errorf("%s: %v, want a whole number from 1 to %d", path, f, uint32(math.MaxUint32))
	}
	return uint32(f), nil
}

func duration(v *structpb.Value, path string) (time.Duration, error) {
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok {
		return 0, fmt.Errorf("%s: want a duration string such as \"60s\"", path)
	}
	var d durationpb.Duration
	if err := protojson.Unmarshal([]byte(strconv.Quote(s.StringValue)), &d); err != nil {
		return 0, fmt.Errorf("%s: %q: %w", path, s.StringValue, err)
	}
	if err := d.CheckValid(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if d.AsDuration() <= 0 {
		return 0, fmt.Errorf("%s: %s, want a positive duration", path, d.AsDuration())
	}
	return d.AsDuration(), nil
}

func sortedKeys(m map[string]*structpb.Value) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
