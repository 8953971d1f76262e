package h2

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/hcm"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
)

// Envoy's response flags the data plane sets.
const (
	FlagNoRoute         = "NR"
	FlagNoCluster       = "NC"
	FlagNoHealthy       = "UH"
	FlagUpstreamFailure = "UF"
	// FlagStreamIdleTimeout: the connection manager's
	// stream_idle_timeout ended the stream (streamidle.go).
	FlagStreamIdleTimeout = "SI"
	// FlagDownstreamTermination: the downstream's request body ended
	// before its length; the stream is reset, as Envoy resets it.
	FlagDownstreamTermination = "DC"
)

// XFCC is the header Envoy's forward_client_cert_details governs.
const XFCC = "X-Forwarded-Client-Cert"

// downstream is one accepted connection: its chain and, over TLS, the
// verified peer's ID and the ID the listener presented. What its requests
// derive from those alone is derived once, in newDownstream: every request
// paid for it before (fmt formatting the XFCC and the pool key was 4% of
// the CPU of a request through both hops in process).
type downstream struct {
	chain     *listener.HTTPChain
	peer, own string
	// source is the connection's mapper filter state value: the identity
	// the outbound listener stamped.
	source string
	// xfcc is the XFCC value the chain sets, when it sets one.
	xfcc string
	// up is the filter state's part of the upstream pool key.
	up upstreamKey
}

func newDownstream(chain *listener.HTTPChain, peer, own string) *downstream {
	d := &downstream{chain: chain, peer: peer, own: own}
	if chain == nil {
		return d
	}
	d.up = upstreamKeyOf(chain.FilterState)
	for _, f := range chain.FilterState {
		if f.Key == hcm.MapperKey {
			d.source = f.Value
			break
		}
	}
	if chain.HCM.SetXFCC && peer != "" {
		if own != "" {
			d.xfcc = "By=" + own + ";"
		}
		d.xfcc += "URI=" + peer
	}
	return d
}

// hopHeaders are connection-specific and never forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (l *Listener) handler(d *downstream) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := hcm.Record{PeerURI: d.peer, SourceIdentity: d.source, Authority: r.Host, Protocol: r.Proto}
		cw := &countingWriter{ResponseWriter: w}
		hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
		body := &countingReader{r: r.Body}
		r.Body = body
		var idle *idleBody
		if t := d.chain.HCM.StreamIdleTimeout; t > 0 && hasBody {
			idle = watchBody(body, w, t, func() { l.stats.ProtocolError(metrics.ProtocolStreamIdleTimeout) })
			r.Body = idle
		}
		l.serve(d, cw, r, &rec)
		// The body's watch ends before the handler does: the response
		// writer is not the watch's to use after.
		cut := idle != nil && idle.finish()
		rec.Duration = time.Since(start)
		rec.BytesReceived, rec.BytesSent = body.n, cw.n
		if cut && rec.Flags != FlagStreamIdleTimeout {
			// The body stalled after the response began: Envoy resets the
			// stream rather than end a response the upstream cut short.
			rec.Flags = FlagStreamIdleTimeout
		}
		l.stats.Request(rec.Cluster, rec.Status, orDash(rec.Flags))
		if al := d.chain.HCM.AccessLog; al != nil {
			l.opts.Logs.Write(al, rec)
		}
		if (cut && rec.Status != http.StatusRequestTimeout) || rec.Flags == FlagDownstreamTermination {
			panic(http.ErrAbortHandler)
		}
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// serve routes one request and proxies it, filling rec.
func (l *Listener) serve(d *downstream, w http.ResponseWriter, r *http.Request, rec *hcm.Record) {
	vh, ok := d.chain.HCM.Route(r.Host)
	if !ok {
		// Envoy answers a request no virtual host takes with a bare 404.
		rec.Status, rec.Flags = http.StatusNotFound, FlagNoRoute
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if vh.Direct != nil {
		rec.Status = vh.Direct.Status
		if vh.Direct.Body != "" {
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(vh.Direct.Status)
		_, _ = io.WriteString(w, vh.Direct.Body)
		return
	}
	rec.Cluster = vh.Cluster
	if vh.Selector != nil {
		src := d.source
		rec.Cluster = vh.Selector.Cluster(src, src != "")
	}
	c := l.clusters.Active(rec.Cluster)
	if c == nil && d.chain.HCM.OnDemand > 0 && l.opts.OnDemand != nil {
		// The on_demand filter: the request pauses while the cluster is
		// fetched; a refusal or the timeout leaves it missing.
		if err := l.opts.OnDemand.AwaitWithin(r.Context(), rec.Cluster, d.chain.HCM.OnDemand); err != nil {
			l.opts.Log.Info("on-demand cluster missing", "listener", l.name, "cluster", rec.Cluster, "err", err)
		}
		c = l.clusters.Active(rec.Cluster)
	}
	if c == nil {
		l.fail(w, rec, FlagNoCluster, "cluster not found")
		return
	}
	ep, err := c.PickEndpoint()
	if err != nil {
		l.fail(w, rec, FlagNoHealthy, "no healthy upstream")
		return
	}
	// The pool's dial and a twin's downstream ride the clone's context:
	// adding them after would copy the request once more each.
	ctx := r.Context()
	if c.Spec.PerDownstreamPool {
		ctx = context.WithValue(ctx, downstreamKey{}, d)
	}
	if !c.Spec.QUIC {
		ctx = context.WithValue(ctx, dialKey{}, dial{endpoint: ep, source: d.up.source})
	}
	out := l.upstreamRequest(ctx, d, r, c, ep)
	if err := inlineBody(out); err != nil {
		if timedOut(r) {
			l.streamTimeout(w, r, rec)
			return
		}
		l.opts.Log.Info("downstream request body cut", "listener", l.name, "cluster", c.Spec.Name, "err", err)
		rec.Flags = FlagDownstreamTermination
		return
	}
	resp, err := l.opts.Pool.roundTrip(c, ep, d.up, out)
	if err != nil && timedOut(r) {
		l.streamTimeout(w, r, rec)
		return
	}
	if err != nil {
		l.opts.Log.Info("http upstream failed", "listener", l.name, "cluster", c.Spec.Name, "host", ep.Addr, "err", err)
		l.fail(w, rec, FlagUpstreamFailure, "upstream connect error or disconnect/reset before headers. reset reason: connection failure")
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	rec.Status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)
	// The counting writer hides the response writer's ReadFrom, so
	// io.Copy would allocate 32 KiB for every response: the buffer is
	// pooled instead.
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	if _, err := io.CopyBuffer(w, resp.Body, *buf); err != nil && !errors.Is(err, io.EOF) {
		l.opts.Log.Info("http upstream body cut", "listener", l.name, "cluster", c.Spec.Name, "err", err)
	}
}

// copyBufs holds the buffers response bodies are copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// upstreamRequest is r as it leaves for ep: the authority kept, hop-by-hop
// headers dropped, and XFCC sanitized, then set when the chain says so.
func (l *Listener) upstreamRequest(ctx context.Context, d *downstream, r *http.Request, c *cluster.Cluster, ep cluster.Endpoint) *http.Request {
	out := r.Clone(ctx)
	out.RequestURI = ""
	// Connection is hop-by-hop: a client's "Connection: close" ends its
	// own connection to this listener, not the pool's to ep. Clone keeps
	// r.Close, and Go's transport would close the pooled connection after
	// the request, so every such request paid a new handshake.
	out.Close = false
	out.URL.Scheme = "http"
	if c.Spec.TLS != nil {
		out.URL.Scheme = "https"
	}
	out.URL.Host = ep.Addr.String()
	out.Host = r.Host
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Del(XFCC)
	if d.xfcc != "" {
		out.Header[XFCC] = []string{d.xfcc}
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	return out
}

// inlineBodyMax is the largest request body read whole before its
// upstream request starts: one HTTP/2 frame at the default size.
const inlineBodyMax = 16 << 10

// inlineBody reads a small request body of known length whole, so that it
// leaves with its headers. net/http's HTTP/1.1 transport flushes the
// headers to the socket before a body it cannot see is in memory, so a
// streamed body cost the app's connection a second write (and the app a
// second read) for every request; and a body in memory can be sent again
// when a pooled connection turns out closed before the request reached
// it. The stream idle timeout still watches the read: the body is read
// through the request's own reader.
func inlineBody(out *http.Request) error {
	if out.Body == nil || out.ContentLength <= 0 || out.ContentLength > inlineBodyMax {
		return nil
	}
	buf := make([]byte, out.ContentLength)
	// Bytes past the length are not forwarded, as the transport did not
	// forward them; the server that read the request closes its body.
	if _, err := io.ReadFull(out.Body, buf); err != nil {
		return err
	}
	out.Body = io.NopCloser(bytes.NewReader(buf))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	return nil
}

// timedOut says whether r's body was cut by the stream idle timeout.
func timedOut(r *http.Request) bool {
	b, ok := r.Body.(*idleBody)
	return ok && b.timedOut()
}

// streamTimeout answers a request whose body the stream idle timeout cut,
// as Envoy does before the response begins: 408, "stream timeout", and
// over HTTP/1.1 the connection closed, its request unfinished.
func (l *Listener) streamTimeout(w http.ResponseWriter, r *http.Request, rec *hcm.Record) {
	rec.Status, rec.Flags = http.StatusRequestTimeout, FlagStreamIdleTimeout
	w.Header().Set("Content-Type", "text/plain")
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(http.StatusRequestTimeout)
	_, _ = io.WriteString(w, "stream timeout")
}

// fail answers a local 503 as Envoy's router does, with its flag.
func (l *Listener) fail(w http.ResponseWriter, rec *hcm.Record, flag, body string) {
	rec.Status, rec.Flags = http.StatusServiceUnavailable, flag
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, body)
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type countingReader struct {
	r io.ReadCloser
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }
