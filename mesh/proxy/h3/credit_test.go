package h3

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// maxStreamsCounter is a client trace that counts the MAX_STREAMS frames
// its connections receive, and how many connections it traced.
type maxStreamsCounter struct {
	frames, conns atomic.Int64
}

func (c *maxStreamsCounter) tracer(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	c.conns.Add(1)
	return c
}

func (c *maxStreamsCounter) AddProducer() qlogwriter.Recorder { return c }
func (c *maxStreamsCounter) Close() error                     { return nil }

func (c *maxStreamsCounter) RecordEvent(e qlogwriter.Event) {
	p, ok := e.(qlog.PacketReceived)
	if !ok {
		return
	}
	for _, f := range p.Frames {
		if _, ok := f.Frame.(*qlog.MaxStreamsFrame); ok {
			c.frames.Add(1)
		}
	}
}

// TestStreamCreditIsGrantedInBatches runs 200 requests one after another
// over one connection to an inbound made as the proxy makes it, and
// counts the MAX_STREAMS frames the client receives. quic-go as
// published grants one stream's credit per completed stream, each in a
// frame (and, with nothing else to send, a packet) of its own: about 200
// here. The patched copy (third_party/quic-go) grants credit once the
// client has used half of it: about 4. The 200 requests themselves are
// the positive witness: past the 100-stream limit they complete only if
// credit arrived.
func TestStreamCreditIsGrantedInBatches(t *testing.T) {
	p := newPKI(t)
	addr := serveOK(t, p)

	var count maxStreamsCounter
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: p.roots, ServerName: "backend.demo.mesh.local", Certificates: []tls.Certificate{tlsCert(p.client)}},
		QUICConfig:      &quic.Config{Tracer: count.tracer},
	}
	defer tr.Close()
	const requests = 200
	for i := range requests {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			cancel()
			t.Fatalf("request %d of %d: %v", i+1, requests, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("request %d of %d: body: %v", i+1, requests, err)
		}
	}
	if n := count.conns.Load(); n != 1 {
		t.Fatalf("broken rig: %d connections traced, want the one all %d requests rode", n, requests)
	}
	got := count.frames.Load()
	t.Logf("%d MAX_STREAMS frames for %d requests", got, requests)
	if got < 1 {
		t.Fatalf("broken rig: no MAX_STREAMS frame seen, yet %d streams passed a 100-stream limit", requests)
	}
	if got > 10 {
		t.Errorf("%d MAX_STREAMS frames for %d sequential requests, want at most 10: stream credit is granted per stream (the third_party/quic-go patch is gone?)", got, requests)
	}
}
