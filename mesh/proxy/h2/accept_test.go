package h2_test

import (
	"net"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/internal/accept"
	"github.com/aether-mesh/aether/mesh/proxy/internal/accept/accepttest"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
)

// A failing accept on an HTTP listener (EMFILE under fd exhaustion) backs
// off, 5ms doubling to 1s, instead of retrying at a fixed pace; every
// failure is counted in aether_proxy_http_accept_errors_total and the log
// holds one line per 10s, not one per failure. Time is the synctest
// bubble's: the gaps between accepts are the listener's waits.
func TestAcceptBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const failures = 20
		var steps []accepttest.Step[net.Conn]
		for range failures {
			steps = append(steps, accepttest.Fail[net.Conn](syscall.EMFILE))
		}
		ln := accepttest.New(steps...)
		var log accepttest.Log
		m := metrics.New()
		const name = "http-outbound~demo~src-0"
		l := h2.Serve(&listener.Spec{Name: name, HTTP: &listener.HTTP{}}, ln, nil, h2.Options{Log: log.Logger(), Metrics: m})
		<-ln.Spent()
		_ = l.Close()

		ms := time.Millisecond
		want := []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms}
		for len(want) < failures {
			want = append(want, time.Second)
		}
		if gaps := ln.Gaps(); !slices.Equal(gaps, want) {
			t.Errorf("waits between accepts %v, want %v", gaps, want)
		}
		v, err := m.Value("aether_proxy_http_accept_errors_total", map[string]string{"listener": name})
		if err != nil {
			t.Fatal(err)
		}
		if v != failures {
			t.Errorf("accept errors counted %v, want %d", v, failures)
		}
		// Failure i comes at 1275ms+(i-8)s for i >= 8: lines at failure 0
		// and at failure 17 (10.275s), which says it held 16 back.
		suppressed := log.Suppressed()
		if want := []int64{0, 16}; !slices.Equal(suppressed, want) {
			t.Errorf("%d log lines for %d failures, holding back %v before each; want %v: one line per %s", len(suppressed), failures, suppressed, want, accept.LogEvery)
		}
	})
}
