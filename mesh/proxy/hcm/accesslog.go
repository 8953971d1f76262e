package hcm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
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
	// fields are Keys in the order encoding/json writes a map's keys
	// (sorted), each with its key already rendered.
	fields []field
}

type field struct {
	// key is the quoted key and its colon.
	key []byte
	op  operator
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

// operator appends a command operator's value for a record to a line.
type operator func(b []byte, r Record) []byte

// operators are the command operators the data plane implements, each
// with how it reads a record. Numbers are JSON numbers, as Envoy's
// json_format writes them; an empty string is null.
var operators = map[string]operator{
	"%DOWNSTREAM_PEER_URI_SAN%":               func(b []byte, r Record) []byte { return appendStr(b, r.PeerURI) },
	"%FILTER_STATE(" + MapperKey + ":PLAIN)%": func(b []byte, r Record) []byte { return appendStr(b, r.SourceIdentity) },
	"%UPSTREAM_CLUSTER%":                      func(b []byte, r Record) []byte { return appendStr(b, r.Cluster) },
	"%REQ(:AUTHORITY)%":                       func(b []byte, r Record) []byte { return appendStr(b, r.Authority) },
	"%PROTOCOL%":                              func(b []byte, r Record) []byte { return appendStr(b, r.Protocol) },
	"%RESPONSE_CODE%":                         func(b []byte, r Record) []byte { return strconv.AppendInt(b, int64(r.Status), 10) },
	"%RESPONSE_FLAGS%":                        func(b []byte, r Record) []byte { return appendStr(b, orDash(r.Flags)) },
	"%DURATION%":                              func(b []byte, r Record) []byte { return strconv.AppendInt(b, r.Duration.Milliseconds(), 10) },
	"%BYTES_RECEIVED%":                        func(b []byte, r Record) []byte { return strconv.AppendInt(b, r.BytesReceived, 10) },
	"%BYTES_SENT%":                            func(b []byte, r Record) []byte { return strconv.AppendInt(b, r.BytesSent, 10) },
}

// MapperKey is the filter state object the outbound listener stamps.
const MapperKey = xdsnames.CertMapperFilterStateKey

// appendStr appends s as a JSON string, or null when it is empty.
// Strings that need no escaping (the IDs, names and authorities a
// record holds) are copied; any other goes through encoding/json, so
// the line is byte for byte what json.Marshal writes.
func appendStr(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// orDash is Envoy's %RESPONSE_FLAGS% when no flag is set.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// AppendLine appends r as the log's JSON object, without a newline. It
// allocates nothing: the log is written for every request.
func (a *AccessLog) AppendLine(b []byte, r Record) []byte {
	b = append(b, '{')
	for i, f := range a.fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.key...)
		b = f.op(b, r)
	}
	return append(b, '}')
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
	for _, k := range slices.Sorted(maps.Keys(al.Keys)) {
		key, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("%s.log_format.json_format[%q]: %w", lp, k, err)
		}
		al.fields = append(al.fields, field{key: append(key, ':'), op: operators[al.Keys[k]]})
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
