package lifecycle

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

// client is a pod app's HTTP/1.1 client for the 18081 spelling: it dials
// the ClusterIP on 18081, which the capture diverts to the pod's outbound
// listener. fresh opens a connection per request (a prober's: a listener
// that is gone shows at once); otherwise connections are kept, as apps do.
func client(c cluster.Cluster, podName string, fresh bool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: fresh,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			p, err := cluster.PodNamed(c, namespace, podName)
			if err != nil {
				return nil, err
			}
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return nil, err
			}
			return c.DialTCP(ctx, p, ap)
		},
	}}
}

// outcome is one request as its client saw it.
type outcome struct {
	At     time.Time
	Took   time.Duration
	Status int
	Err    string
}

func (o outcome) ok() bool { return o.Err == "" && o.Status == http.StatusOK }

// get sends one request from podName's client to svc, tagged
// /<tag>/<pod>/<i>.
func get(ctx context.Context, hc *http.Client, svc, tag, podName string, i int, vip netip.Addr) outcome {
	o := outcome{At: time.Now()}
	url := fmt.Sprintf("http://%s/%s/%s/%d", netip.AddrPortFrom(vip, constants.HTTPOutboundPort), tag, podName, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		o.Err = err.Error()
		return o
	}
	req.Host = xdsnames.Authority(svc, namespace, meshDomain)
	resp, err := hc.Do(req)
	if err != nil {
		o.Err = err.Error()
		return o
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	o.Status, o.Took = resp.StatusCode, time.Since(o.At)
	return o
}

// once sends one request from podName to svc and returns its outcome.
func once(ctx context.Context, c cluster.Cluster, podName, svc, tag string) (outcome, error) {
	vip, err := c.ServiceVIP(namespace, svc)
	if err != nil {
		return outcome{}, err
	}
	return get(ctx, client(c, podName, true), svc, tag, podName, 0, vip), nil
}

// stream sends requests from each pod to svc at a fixed interval until
// stopped, and keeps every outcome.
type stream struct {
	stop func()
	wg   sync.WaitGroup
	mu   sync.Mutex
	out  map[string][]outcome
}

// startStream starts one sender per pod. fresh: see client.
func startStream(ctx context.Context, c cluster.Cluster, svc, tag string, every time.Duration, fresh bool, pods ...string) (*stream, error) {
	vip, err := c.ServiceVIP(namespace, svc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{stop: cancel, out: map[string][]outcome{}}
	for _, p := range pods {
		hc := client(c, p, fresh)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := 0; ; i++ {
				// The stop ends the loop, not a request under way: every
				// request sent is an outcome, as the destination may
				// record it.
				o := get(context.WithoutCancel(ctx), hc, svc, tag, p, i, vip)
				s.mu.Lock()
				s.out[p] = append(s.out[p], o)
				s.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	return s, nil
}

// probeDeadline is how long a probe may take: one not answered 200 by
// then is lost, as a prober's SLI counts it. It is below the kernel's
// initial SYN retransmission timeout (1 s), so a probe whose connection
// found no listener and is waiting to retry counts lost.
const probeDeadline = 900 * time.Millisecond

// startProber sends a probe from podName to svc every interval, each on
// a new connection and in its own goroutine, so that a probe that hangs
// delays none after it.
func startProber(ctx context.Context, c cluster.Cluster, svc, tag string, every time.Duration, podName string) (*stream, error) {
	vip, err := c.ServiceVIP(namespace, svc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &stream{stop: cancel, out: map[string][]outcome{}}
	hc := client(c, podName, true)
	hc.Timeout = probeDeadline
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				o := get(context.WithoutCancel(ctx), hc, svc, tag, podName, i, vip)
				s.mu.Lock()
				s.out[podName] = append(s.out[podName], o)
				s.mu.Unlock()
			}()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s, nil
}

// finish stops the senders, waits for their last requests and returns
// every outcome, per pod.
func (s *stream) finish() map[string][]outcome {
	s.stop()
	s.wg.Wait()
	return s.out
}

// tally is a stream's outcomes as the table reads them.
type tally struct {
	Sent   int            `json:"sent"`
	OK     int            `json:"ok"`
	Failed map[string]int `json:"failed,omitempty"`
	// FirstFailure is the first failed request's time after from, ms.
	FirstFailureMS float64 `json:"first_failure_ms,omitempty"`
	// FailedAtMS is when each failed request was sent, ms after from (the
	// first 20).
	FailedAtMS []float64 `json:"failed_at_ms,omitempty"`
	// SlowestOKMS is the longest a request answered 200 took, ms: how
	// far the answered ones stayed from a prober's deadline.
	SlowestOKMS float64 `json:"slowest_ok_ms"`
}

func count(out map[string][]outcome, from time.Time) tally {
	t := tally{Failed: map[string]int{}}
	first := time.Time{}
	for _, outs := range out {
		for _, o := range outs {
			t.Sent++
			if o.ok() {
				t.OK++
				t.SlowestOKMS = max(t.SlowestOKMS, float64(o.Took.Microseconds())/1000)
				continue
			}
			why := o.Err
			if why == "" {
				why = fmt.Sprintf("HTTP %d", o.Status)
			}
			// Connection errors carry addresses and ports that differ
			// per request; their last clause says what happened.
			if i := strings.LastIndex(why, ": "); i >= 0 {
				why = why[i+2:]
			}
			t.Failed[why]++
			if len(t.FailedAtMS) < 20 {
				t.FailedAtMS = append(t.FailedAtMS, float64(o.At.Sub(from).Milliseconds()))
			}
			if first.IsZero() || o.At.Before(first) {
				first = o.At
			}
		}
	}
	if !first.IsZero() {
		t.FirstFailureMS = float64(first.Sub(from).Milliseconds())
	}
	return t
}

// warmUp waits for every source pod's outbound listener and for one
// request of web-0 and of batch-0 to api to answer 200: their pairs exist
// before any case, fetched on demand like any first request.
func warmUp(ctx context.Context, c cluster.Cluster) error {
	var last error
	// A request that fails is retried, not an error: the listeners and
	// twins are still coming up.
	ok, err := wait.Until(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		last = nil
		for _, pod := range []string{"web-0", "batch-0"} {
			o, err := once(ctx, c, pod, "api", "warmup")
			if err == nil && !o.ok() {
				err = fmt.Errorf("%s → api: %d %s", pod, o.Status, o.Err)
			}
			if err != nil {
				last = err
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("waiting for the twins web → api and batch → api: %w", err)
	case !ok:
		return fmt.Errorf("the twins web → api and batch → api did not answer in 60 s: %w", last)
	}
	return nil
}
