package handoff

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// selfNetns is a namespace path every test process can read: its own.
const selfNetns = "/proc/self/ns/net"

func pod(t *testing.T, name string) Pod {
	t.Helper()
	ino, err := NetnsInode(selfNetns)
	if err != nil {
		t.Fatal(err)
	}
	return Pod{
		Ref:       Ref{ContainerID: "c-" + name, IfName: "eth0"},
		Network:   "aether-test",
		Namespace: "demo", Name: name, UID: "uid-" + name,
		Netns: selfNetns, NetnsInode: ino,
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("fd00:244:1::2")},
	}
}

type agent struct {
	*Server
	stop func()
}

// start listens on socket and serves until the test ends or stop is called.
func start(t *testing.T, socket string) *agent {
	t.Helper()
	s, err := Listen(socket, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	a := &agent{Server: s}
	a.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		a.stop = func() {}
	}
	t.Cleanup(func() { a.stop() })
	return a
}

func names(pods []Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

func TestRoundTrip(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "cni.sock")
	a := start(t, socket)
	c := NewClient(socket)
	ctx := context.Background()

	pods, changed := a.Pods()
	if len(pods) != 0 {
		t.Fatalf("a fresh agent holds %v", names(pods))
	}
	want := pod(t, "web-0")
	if err := c.Add(ctx, want); err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Fatal("no change notified after ADD")
	}
	pods, changed = a.Pods()
	if len(pods) != 1 || !reflect.DeepEqual(pods[0], want) {
		t.Fatalf("agent holds %+v, want exactly %+v", pods, want)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(socket), "pods", "c-web-0:eth0.json")); err != nil {
		t.Fatalf("the record is not beside the socket: %v", err)
	}

	// The same ADD again (a runtime retry) changes nothing.
	if err := c.Add(ctx, want); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
		t.Fatal("a repeated ADD notified a change")
	default:
	}

	if err := c.Del(ctx, want.Ref); err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Fatal("no change notified after DEL")
	}
	if pods, _ := a.Pods(); len(pods) != 0 {
		t.Fatalf("agent still holds %v after DEL", names(pods))
	}
	if _, err := os.Stat(string(StateDir(socket).path(want.Ref))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the record outlived DEL: %v", err)
	}
	// DEL is idempotent.
	if err := c.Del(ctx, want.Ref); err != nil {
		t.Fatalf("a second DEL: %v", err)
	}
}

// rawCall sends a request to the agent as any client could, bypassing the
// client's own validation.
func rawCall(t *testing.T, socket, method, path, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, err := http.NewRequest(method, baseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestBadInputNamesTheField(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "cni.sock")
	a := start(t, socket)
	good := `"containerID":"c1","ifname":"eth0","namespace":"demo","name":"web-0","netns":"/run/netns/x","ips":["10.244.1.2"]`
	for _, c := range []struct {
		name, method, path, body, want string
	}{
		{"malformed JSON", "POST", pathPods, `{"containerID":`, "invalid pod: truncated JSON: unexpected EOF"},
		{"unknown field", "POST", pathPods, `{` + good + `,"netnsPath":"/x"}`, `invalid pod: field "netnsPath": not a field of a pod`},
		{"no name", "POST", pathPods, `{` + strings.Replace(good, `"web-0"`, `""`, 1) + `}`, "field name: empty"},
		{"no namespace", "POST", pathPods, `{` + strings.Replace(good, `"demo"`, `""`, 1) + `}`, "field namespace: empty"},
		{"relative netns", "POST", pathPods, `{` + strings.Replace(good, `"/run/netns/x"`, `"netns/x"`, 1) + `}`, `field netns: "netns/x" is not an absolute path`},
		{"no IPs", "POST", pathPods, `{` + strings.Replace(good, `["10.244.1.2"]`, `[]`, 1) + `}`, "field ips: empty"},
		{"bad IP", "POST", pathPods, `{` + strings.Replace(good, `10.244.1.2`, `10.244.1.300`, 1) + `}`, `field ips[0]: ParseAddr("10.244.1.300")`},
		{"container ID with a colon", "POST", pathPods, `{` + strings.Replace(good, `"c1"`, `"c:1"`, 1) + `}`, `field containerID: "c:1"`},
		{"interface name too long", "POST", pathPods, `{` + strings.Replace(good, `"eth0"`, `"eth0123456789012"`, 1) + `}`, `field ifname: "eth0123456789012"`},
		{"DEL of a bad container ID", "DELETE", pathPods + "/-c1/eth0", "", `field containerID: "-c1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := rawCall(t, socket, c.method, c.path, c.body)
			if code != http.StatusBadRequest || !strings.Contains(body, c.want) {
				t.Fatalf("%s %s answered %d %q, want 400 containing %q", c.method, c.path, code, body, c.want)
			}
		})
	}
	if pods, _ := a.Pods(); len(pods) != 0 {
		t.Fatalf("bad input left pods %v", names(pods))
	}
	// The client refuses a bad pod before it records or calls anything.
	p := pod(t, "web-0")
	p.Netns = "relative"
	err := NewClient(socket).Add(context.Background(), p)
	var ae *AgentError
	if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), "field netns") {
		t.Fatalf("client Add of a bad pod = %v, want a refusal naming field netns", err)
	}
	if recs, _, _ := StateDir(socket).Read(); len(recs) != 0 {
		t.Fatalf("a refused pod was recorded: %v", names(recs))
	}
}

// TestRestartRelearns stops the agent while pods exist, changes the node
// behind its back (an ADD and a DEL it cannot hear, a pod whose netns went,
// a path that now names another namespace, a damaged record), and starts a
// new agent on the same socket.
func TestRestartRelearns(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "cni.sock")
	ctx := context.Background()
	c := NewClient(socket)
	first := start(t, socket)
	for _, n := range []string{"a-0", "b-0"} {
		if err := c.Add(ctx, pod(t, n)); err != nil {
			t.Fatal(err)
		}
	}
	first.stop()

	var ae *AgentError
	if err := c.Add(ctx, pod(t, "c-0")); !errors.As(err, &ae) {
		t.Fatalf("ADD with the agent away = %v, want an *AgentError", err)
	}
	if err := c.Del(ctx, pod(t, "a-0").Ref); !errors.As(err, &ae) {
		t.Fatalf("DEL with the agent away = %v, want an *AgentError", err)
	}
	gone := pod(t, "gone-0")
	gone.Netns = filepath.Join(t.TempDir(), "no-such-netns")
	other := pod(t, "moved-0")
	other.NetnsInode++
	dir := StateDir(socket)
	for _, p := range []Pod{gone, other} {
		if err := dir.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	junk := filepath.Join(string(dir), "junk:eth0.json")
	if err := os.WriteFile(junk, []byte(`{"containerID":`), 0o600); err != nil {
		t.Fatal(err)
	}

	second := start(t, socket)
	pods, changed := second.Pods()
	if got := strings.Join(names(pods), ","); got != "b-0,c-0" {
		t.Fatalf("the restarted agent re-learned %q, want b-0 (before the restart) and c-0 (added while it was away)", got)
	}
	for _, p := range []Pod{gone, other} {
		if _, err := os.Stat(dir.path(p.Ref)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the stale record of %s was kept: %v", p.Name, err)
		}
	}
	if _, err := os.Stat(junk); err != nil {
		t.Errorf("a record the agent cannot read was deleted: %v", err)
	}
	if err := c.Add(ctx, pod(t, "d-0")); err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Fatal("no change notified by the restarted agent")
	}
	if pods, _ := second.Pods(); strings.Join(names(pods), ",") != "b-0,c-0,d-0" {
		t.Fatalf("after a live ADD: %v", names(pods))
	}
}
