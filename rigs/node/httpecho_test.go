package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/wait"
)

// The HTTP echo answers with the XFCC it received and records it: the
// record, not the answer, is a suite's witness.
func TestHTTPEchoRecordsXFCC(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	record := filepath.Join(t.TempDir(), "record")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeBackend(ctx, BackendConfig{Name: "dst-0", Record: record, HTTP: []int{port}}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("backend: %v", err)
		}
	}()
	var resp *http.Response
	// The backend listens once its goroutine runs: ask until it answers.
	if _, werr := wait.Until(ctx, 5*time.Second, 20*time.Millisecond, func() (bool, error) {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/hello", port), nil)
		req.Header.Set(XFCCHeader, "URI=spiffe://aether.test/ns/demo/sa/a")
		resp, err = http.DefaultClient.Do(req)
		return err == nil, nil
	}); werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	var e Echo
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if e.Pod != "dst-0" || e.XFCC != "URI=spiffe://aether.test/ns/demo/sa/a" {
		t.Errorf("echo %+v, want pod dst-0 and the XFCC sent", e)
	}
	recs, err := ReadRecords(record)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Event != "ready" || recs[1].Event != "http" || recs[1].XFCC != e.XFCC || recs[1].Port != port {
		t.Errorf("records %+v, want ready then one http record with the XFCC on port %d", recs, port)
	}
}
