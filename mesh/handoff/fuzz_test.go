package handoff

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// fuzzMethods are the methods a fuzzed request picks from: the API's own
// and one it does not serve.
var fuzzMethods = []string{http.MethodPost, http.MethodDelete, http.MethodGet, http.MethodPut}

// refusal is how the agent words a bad request: what was refused, then
// the field at fault or what is wrong with the body as a whole.
var refusal = regexp.MustCompile(`^invalid (pod|attachment): (field (".*"|[\w.\[\]]+): |request body |not JSON |truncated JSON: |trailing data )`)

func fuzzServer() *Server {
	held := Pod{
		Ref:       Ref{ContainerID: "c-held", IfName: "eth0"},
		Namespace: "demo", Name: "held", Netns: "/proc/self/ns/net",
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.9")},
	}
	return &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), pods: map[Ref]Pod{held.Ref: held}, changed: make(chan struct{})}
}

// Whatever the plugin, or anything else that can reach the socket, sends,
// the agent never panics and never answers 5xx: a call it serves changes
// the pods as asked, a bad one is refused with 400 naming the field (or
// what is wrong with the body) and changes nothing.
func FuzzHandoffRequest(f *testing.F) {
	good, err := json.Marshal(fuzzServer().pods[Ref{ContainerID: "c-held", IfName: "eth0"}])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), pathPods, good)
	f.Add(uint8(0), pathPods, []byte(`{"containerID":"c1","ifname":"eth0","namespace":"demo","name":"a","uid":"u","netns":"/run/netns/a","ips":["10.244.1.2","fd00:244:1::2"],"netnsInode":42,"network":"n"}`))
	f.Add(uint8(0), pathPods, []byte(`{"containerID":"c1","ifname":"eth0","namespace":"demo","name":"a","netns":"/run/netns/a","ips":["10.244.1.2"]} {}`))
	f.Add(uint8(0), pathPods, []byte(`{"containerID":"c1","ifname":"eth0","namespace":"demo","name":"a","netns":"relative","ips":["fe80::1%eth0"]}`))
	f.Add(uint8(0), pathPods, []byte(`{"containerID":"-x","ifname":"eth0/1"}`))
	f.Add(uint8(0), pathPods, []byte(`{"containerID":"c1","ifname":"eth0","namespace":"demo","name":"a","netns":"/n","ips":[1]}`))
	f.Add(uint8(0), pathPods, []byte(`{"containerID":"c1","extra":true}`))
	f.Add(uint8(0), pathPods, []byte(`{"containerID":"c1"`))
	f.Add(uint8(0), pathPods, []byte(``))
	f.Add(uint8(0), pathPods, []byte(`[]`))
	f.Add(uint8(1), pathPods+"/c-held/eth0", []byte(nil))
	f.Add(uint8(1), pathPods+"/c-held/..", []byte(nil))
	f.Add(uint8(1), pathPods+"/%2e%2e/eth0", []byte(nil))
	f.Add(uint8(2), pathPods, []byte(nil))
	f.Add(uint8(3), pathPods, good)
	f.Fuzz(func(t *testing.T, m uint8, path string, body []byte) {
		s := fuzzServer()
		before := maps.Clone(s.pods)
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		req, err := http.NewRequest(method, baseURL+path, bytes.NewReader(body))
		if err != nil {
			return // no client can send it: not a request
		}
		rec := httptest.NewRecorder()
		s.handler().ServeHTTP(rec, req)
		msg := strings.TrimSpace(rec.Body.String())
		switch code := rec.Code; {
		case code >= 500:
			t.Fatalf("%s %q: %d %q, want a served call or a refusal", method, path, code, msg)
		case code == http.StatusBadRequest:
			if !refusal.MatchString(msg) {
				t.Fatalf("%s %q: refusal %q does not name the field or what is wrong", method, path, msg)
			}
			if !maps.EqualFunc(before, s.pods, func(a, b Pod) bool { return reflect.DeepEqual(a, b) }) {
				t.Fatalf("%s %q: a refused call changed the pods: %v, was %v", method, path, s.pods, before)
			}
		case code == http.StatusNoContent && method == http.MethodPost:
			checkAccepted(t, body, s.pods)
		case code == http.StatusNoContent && method == http.MethodDelete:
			if len(s.pods) > len(before) {
				t.Fatalf("DELETE %q added pods: %v", path, s.pods)
			}
		}
	})
}

// checkAccepted: an accepted pod is held, valid, and reads back as itself
// from its own encoding (what the plugin's record on disk holds).
func checkAccepted(t *testing.T, body []byte, pods map[Ref]Pod) {
	t.Helper()
	p, err := DecodePod(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the agent accepted a pod DecodePod refuses: %v", err)
	}
	held, ok := pods[p.Ref]
	if !ok || !reflect.DeepEqual(held, p) {
		t.Fatalf("accepted pod %+v is held as %+v (%v)", p, held, ok)
	}
	if err := held.Validate(); err != nil {
		t.Fatalf("the agent holds an invalid pod: %v", err)
	}
	enc, err := json.Marshal(held)
	if err != nil {
		t.Fatalf("an accepted pod does not encode: %v", err)
	}
	again, err := DecodePod(bytes.NewReader(enc))
	if err != nil || !reflect.DeepEqual(again, held) {
		t.Fatalf("an accepted pod %+v reads back from %s as %+v (%v)", held, enc, again, err)
	}
}

// A refused pod's error says which field is at fault, or what is wrong
// with the body as a whole, in words the plugin's operator can act on.
func TestDecodePodNamesTheFault(t *testing.T) {
	for body, want := range map[string]string{
		`{"containerID":"c1","ifname":"eth0","namespace":"demo","name":"a","netns":"/n","ips":[1]}`: "field ips: a JSON number, want string",
		`{"containerID":"c1","netnsInode":"x"}`:                                                     "field netnsInode: a JSON string, want uint64",
		`{"containerID":"c1","extra":true}`:                                                         `field "extra": not a field of a pod`,
		`{"containerID":"c1"`:                                                                       "truncated JSON",
		``:                                                                                          "request body is empty",
		`[]`:                                                                                        "request body is a JSON array",
		`{"containerID":"c1",}`:                                                                     "not JSON at byte 21",
		`{"containerID":"c1","ifname":"eth0","namespace":"demo","name":"a","netns":"/n","ips":["10.0.0.1"]} {}`: "trailing data after the pod",
		`{"containerID":"c1","ifname":"eth0","namespace":"demo","name":"a","netns":"/n","ips":["10.0.0.300"]}`:  "field ips[0]: ",
	} {
		_, err := DecodePod(strings.NewReader(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodePod(%s): %v, want an error with %q", body, err, want)
		}
	}
}
