package hcm

import (
	"fmt"
	"slices"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// FileAccessLogger is the one access logger the data plane runs.
const FileAccessLogger = xdsnames.FileAccessLogger

// AccessLog is a compiled file access log with a JSON line format.
type AccessLog struct {
	Path string
	// Keys maps each JSON key to its command operator.
	Keys map[string]string
}

// Record is one request as the access log sees it.
type Record struct {
	PeerURI, SourceIdentity string
	Cluster, Authority      string
	Protocol                string
	Status                  int
	Flags                   string
	Duration                time.Duration
	BytesReceived           int64
	BytesSent               int64
}

// operators are the command operators the data plane implements, each
// with how it reads a record. Numbers are JSON numbers, as Envoy's
// json_format writes them; an empty string is null.
var operators = map[string]func(Record) any{
	"%DOWNSTREAM_PEER_URI_SAN%":               func(r Record) any { return str(r.PeerURI) },
	"%FILTER_STATE(" + MapperKey + ":PLAIN)%": func(r Record) any { return str(r.SourceIdentity) },
	"%UPSTREAM_CLUSTER%":                      func(r Record) any { return str(r.Cluster) },
	"%REQ(:AUTHORITY)%":                       func(r Record) any { return str(r.Authority) },
	"%PROTOCOL%":                              func(r Record) any { return str(r.Protocol) },
	"%RESPONSE_CODE%":                         func(r Record) any { return r.Status },
	"%RESPONSE_FLAGS%":                        func(r Record) any { return orDash(r.Flags) },
	"%DURATION%":                              func(r Record) any { return r.Duration.Milliseconds() },
	"%BYTES_RECEIVED%":                        func(r Record) any { return r.BytesReceived },
	"%BYTES_SENT%":                            func(r Record) any { return r.BytesSent },
}

// MapperKey is the filter state object the outbound listener stamps.
const MapperKey = xdsnames.CertMapperFilterStateKey

func str(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// orDash is Envoy's %RESPONSE_FLAGS% when no flag is set.
func orDash(s string) any {
	if s == "" {
		return "-"
	}
	return s
}

// Line renders r as the log's JSON object.
func (a *AccessLog) Line(r Record) map[string]any {
	out := make(map[string]any, len(a.Keys))
	for k, op := range a.Keys {
		out[k] = operators[op](r)
	}
	return out
}

func accessLog(ls []*accesslogv3.AccessLog, path string) (*AccessLog, error) {
	switch len(ls) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("%s: %d loggers, want at most one %s", path, len(ls), FileAccessLogger)
	}
	lp := path + "[0]"
	if err := fields.Only(ls[0], lp, "name", "typed_config"); err != nil {
		return nil, err
	}
	var f filev3.FileAccessLog
	if ls[0].GetName() != FileAccessLogger || ls[0].GetTypedConfig().UnmarshalTo(&f) != nil {
		return nil, fmt.Errorf("%s (%q): not an %s FileAccessLog", lp, ls[0].GetName(), FileAccessLogger)
	}
	lp += ".typed_config"
	if err := fields.Only(&f, lp, "path", "log_format"); err != nil {
		return nil, err
	}
	lf := f.GetLogFormat()
	if err := fields.Only(lf, lp+".log_format", "json_format"); err != nil {
		return nil, err
	}
	if lf.GetJsonFormat() == nil {
		return nil, fmt.Errorf("%s.log_format.json_format: missing; only JSON lines are supported", lp)
	}
	al := &AccessLog{Path: f.GetPath(), Keys: map[string]string{}}
	for k, v := range lf.GetJsonFormat().GetFields() {
		sv, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, fmt.Errorf("%s.log_format.json_format[%q]: not a string command operator", lp, k)
		}
		if operators[sv.StringValue] == nil {
			return nil, fmt.Errorf("%s.log_format.json_format[%q]: command operator %q is not supported (supported: %v)", lp, k, sv.StringValue, supported())
		}
		al.Keys[k] = sv.StringValue
	}
	return al, nil
}

func supported() []string {
	var out []string
	for op := range operators {
		out = append(out, op)
	}
	slices.Sort(out)
	return out
}
