package hcm

import (
	"encoding/json"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// every operator under a key of its own; "<flags>" makes a key that
// encoding/json escapes.
var format = map[string]any{
	"peer": "%DOWNSTREAM_PEER_URI_SAN%", "source": "%FILTER_STATE(" + MapperKey + ":PLAIN)%",
	"cluster": "%UPSTREAM_CLUSTER%", "authority": "%REQ(:AUTHORITY)%", "protocol": "%PROTOCOL%",
	"code": "%RESPONSE_CODE%", "<flags>": "%RESPONSE_FLAGS%", "duration_ms": "%DURATION%",
	"rx": "%BYTES_RECEIVED%", "tx": "%BYTES_SENT%",
}

func compileLog(t testing.TB) *AccessLog {
	t.Helper()
	js, err := structpb.NewStruct(format)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := anypb.New(&filev3.FileAccessLog{Path: "/dev/null", AccessLogFormat: &filev3.FileAccessLog_LogFormat{
		LogFormat: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: js}}}})
	if err != nil {
		t.Fatal(err)
	}
	al, err := accessLog([]*accesslogv3.AccessLog{{Name: FileAccessLogger, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: tc}}}, "access_log")
	if err != nil {
		t.Fatal(err)
	}
	return al
}

// TestAccessLogLineIsJSON: a line is, byte for byte, what encoding/json
// writes for the record's values: an empty string is null, no flag is
// "-", the duration is whole milliseconds, and strings that need
// escaping (quotes, HTML, control characters, non-ASCII, invalid UTF-8)
// are escaped as json.Marshal escapes them.
func TestAccessLogLineIsJSON(t *testing.T) {
	al := compileLog(t)
	for _, r := range []Record{
		{PeerURI: "spiffe://aether.test/ns/demo/sa/web", SourceIdentity: "spiffe://aether.test/ns/demo/sa/web",
			Cluster: "outbound|8080||api.demo.svc", Authority: "api.demo.mesh.test", Protocol: "HTTP/3.0",
			Status: 200, Duration: 1500 * time.Microsecond, BytesReceived: 100, BytesSent: 2},
		{Status: 503, Flags: "NC"},
		{PeerURI: `a"b\c`, Cluster: "<script>&", Authority: "tab\there\nnl", Protocol: "é\u2028", SourceIdentity: "\xff\xfe", Status: 404, Flags: "NR"},
	} {
		str := func(s string) any {
			if s == "" {
				return nil
			}
			return s
		}
		flags := r.Flags
		if flags == "" {
			flags = "-"
		}
		want, err := json.Marshal(map[string]any{
			"peer": str(r.PeerURI), "source": str(r.SourceIdentity), "cluster": str(r.Cluster),
			"authority": str(r.Authority), "protocol": str(r.Protocol), "code": r.Status, "<flags>": flags,
			"duration_ms": r.Duration.Milliseconds(), "rx": r.BytesReceived, "tx": r.BytesSent,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := al.AppendLine(nil, r); string(got) != string(want) {
			t.Errorf("line\n got %s\nwant %s", got, want)
		}
	}
}

// TestAccessLogLineAllocatesNothing: rendering a line into a buffer that
// has room allocates nothing (json.Marshal of a map allocated 30 times
// per line, for every request of every HTTP listener).
func TestAccessLogLineAllocatesNothing(t *testing.T) {
	al := compileLog(t)
	r := Record{PeerURI: "spiffe://aether.test/ns/demo/sa/web", Cluster: "inbound|8080||", Authority: "api.demo.mesh.test",
		Protocol: "HTTP/3.0", Status: 200, Duration: time.Millisecond, BytesReceived: 100, BytesSent: 2}
	b := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { b = al.AppendLine(b[:0], r) }); n != 0 {
		t.Fatalf("%v allocations per line", n)
	}
}
