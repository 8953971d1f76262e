package mtls

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"golang.org/x/net/http2"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

var (
	dstAuthority = xdsnames.Authority("dst", namespace, meshDomain)
	dstSNI       = xdsnames.SNI(8080, "dst", namespace, meshDomain)
)

func spiffeID(sa string) string { return "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/" + sa }

func (r *rig) svid(sa string, ttl time.Duration, at time.Time) (*x509svid.SVID, error) {
	return r.ca.Issue(identity.Request{Account: identity.Account{Namespace: namespace, ServiceAccount: sa}, TTL: ttl, IssuedAt: at})
}

// podDialer dials from inside pod, as the pod's app would: its capture
// rules see the connection.
func podDialer(c cluster.Cluster, p cluster.Pod) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return nil, err
		}
		return c.DialTCP(ctx, p, ap)
	}
}

// meshClient is a pod app's HTTP/1.1 client for the 18081 spelling: it
// dials the ClusterIP on 18081, which the capture diverts to the pod's
// outbound listener.
func meshClient(c cluster.Cluster, p cluster.Pod) *http.Client {
	dial := podDialer(c, p)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) },
	}}
}

// h2cClient is the same over prior-knowledge HTTP/2 (the benchmark's app).
func h2cClient(c cluster.Cluster, p cluster.Pod) *http.Client {
	dial := podDialer(c, p)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, _, addr string, _ *tls.Config) (net.Conn, error) { return dial(ctx, addr) },
	}}
}

// tlsClient dials a TLS peer from pod's netns presenting svid (none when
// nil) with sni, over h2; the server is verified as any member of the
// trust domain by the caller's check, not here.
func tlsClient(c cluster.Cluster, p cluster.Pod, svid *x509svid.SVID, sni string) (*http.Client, error) {
	cfg := &tls.Config{ServerName: sni, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13,
		InsecureSkipVerify: true, SessionTicketsDisabled: true}
	if svid != nil {
		chain, key, err := svid.Marshal()
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(chain, key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	dial := podDialer(c, p)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http2.Transport{TLSClientConfig: cfg,
		DialTLSContext: func(ctx context.Context, _, addr string, cfg *tls.Config) (net.Conn, error) {
			conn, err := dial(ctx, addr)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(conn, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			return tc, nil
		},
	}}, nil
}

// get sends one request with authority host to url and returns its status
// and body.
func get(ctx context.Context, c *http.Client, url, host string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func meshURL(c cluster.Cluster, path string) (string, error) {
	vip, err := c.ServiceVIP(namespace, "dst")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("http://%s%s", netip.AddrPortFrom(vip, constants.HTTPOutboundPort), path), nil
}

// sendFrom sends n requests from each source pod at once, tagged
// /<tag>/<pod>/<i>, and returns how many answered 200 per pod.
func sendFrom(ctx context.Context, c cluster.Cluster, tag string, n int, pods ...string) (map[string]int, error) {
	var (
		mu    sync.Mutex
		ok    = map[string]int{}
		first error
		wg    sync.WaitGroup
	)
	for _, name := range pods {
		p, err := cluster.PodNamed(c, namespace, name)
		if err != nil {
			return nil, err
		}
		client := meshClient(c, p)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				url, err := meshURL(c, fmt.Sprintf("/%s/%s/%d", tag, name, i))
				code := 0
				if err == nil {
					code, _, err = get(ctx, client, url, dstAuthority)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil && first == nil {
					first = fmt.Errorf("request %d from %s: %w", i, name, err)
				}
				if code == http.StatusOK {
					ok[name]++
				}
			}()
		}
	}
	wg.Wait()
	return ok, first
}

// arrivals reads the destination app's record: for each request tagged
// tag, the sending pod (from its path) and the peer URI in its XFCC.
func arrivals(ctx context.Context, c cluster.Cluster, tag string) (map[string]map[string]int, error) {
	recs, err := records(ctx, c, "dst-0")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int{}
	prefix := dstAuthority + "/" + tag + "/"
	for _, rec := range recs {
		if rec.Event != "http" || !strings.HasPrefix(rec.Payload, prefix) {
			continue
		}
		from, _, _ := strings.Cut(strings.TrimPrefix(rec.Payload, prefix), "/")
		if out[from] == nil {
			out[from] = map[string]int{}
		}
		out[from][cluster.PeerURI(rec.XFCC)]++
	}
	return out, nil
}

// proxyMetric sums a counter on nodeName's proxy over samples with labels.
func proxyMetric(ctx context.Context, c cluster.Cluster, nodeName, family string, labels map[string]string) (float64, error) {
	body, err := c.Metrics(ctx, nodeName, cluster.Proxy)
	if err != nil {
		return 0, err
	}
	v, _ := node.Metric(body, family, labels)
	return v, nil
}

// settledMetric reads a counter until it reaches want or 5 s pass, and
// returns what it read last.
func settledMetric(ctx context.Context, c cluster.Cluster, nodeName, family string, labels map[string]string, want float64) (float64, error) {
	var v float64
	_, err := wait.Until(ctx, 5*time.Second, 20*time.Millisecond, func() (done bool, err error) {
		v, err = proxyMetric(ctx, c, nodeName, family, labels)
		return v >= want, err
	})
	return v, err
}

const (
	mRefused       = "aether_proxy_http_tls_refused_total"
	mUpstreamConns = "aether_proxy_http_upstream_connections_total"
)

// waitHTTPListeners waits until both proxies serve the mTLS listeners and
// one request from each source gets through (their secrets have arrived).
func waitHTTPListeners(ctx context.Context, c cluster.Cluster) error {
	want := map[string]string{
		"node-b": xdsnames.InboundListener(namespace, "dst-0"),
		"node-a": xdsnames.OutboundListener(namespace, "src-a-0"),
	}
	var last error
	// A failed read or request is what the path not being up yet looks
	// like: it is kept as the reason, and the wait goes on.
	up, err := wait.Until(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		last = nil
		for nodeName, l := range want {
			body, err := c.Metrics(ctx, nodeName, cluster.Proxy)
			if err == nil && !strings.Contains(body, `listener="`+l+`"`) {
				err = fmt.Errorf("no listener %s on %s's proxy yet", l, nodeName)
			}
			if err != nil {
				last = err
			}
		}
		if last != nil {
			return false, nil
		}
		// src-a-0 first: where the pool ignores the identity, the
		// connection is then A's (the unhashed-identity control).
		ok, err := sendFrom(ctx, c, "warmup", 1, "src-a-0")
		if err == nil && ok["src-a-0"] == 1 {
			ok, err = sendFrom(ctx, c, "warmup", 1, "src-b-0")
		}
		if err == nil && ok["src-b-0"] == 1 {
			return true, nil
		}
		last = fmt.Errorf("warm-up requests: %v answered 200 (%v)", ok, err)
		return false, nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("waiting for the mTLS path (last seen: %v): %w", last, err)
	case !up:
		return fmt.Errorf("the mTLS path did not come up in 60 s: %w", last)
	}
	return nil
}

// records is the pod's app's own record, read through the cluster.
func records(ctx context.Context, c cluster.Cluster, pod string) ([]cluster.Record, error) {
	p, err := cluster.PodNamed(c, namespace, pod)
	if err != nil {
		return nil, err
	}
	return c.Records(ctx, p)
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
