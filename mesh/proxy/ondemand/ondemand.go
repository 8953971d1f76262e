// Package ondemand is the proxy's on_demand HTTP filter with on-demand CDS
// (ODCDS), as Envoy runs it (ARCHITECTURE.md, "On-demand twins"): a
// request whose cluster is missing pauses while the proxy subscribes to
// that name on its delta CDS stream, and resumes when the cluster
// arrives; a name the server answers in removed_resources, or one that
// does not arrive within the timeout, fails the request, which the router
// answers 503 with response flag NC.
//
// Envoy keeps an on-demand subscription per name for the life of the
// process: a later request for a name already subscribed sends nothing
// and waits, so a refused name costs every later request the whole
// timeout. The agent's pair logic counts on that, and so does this
// package.
package ondemand

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultTimeout is the mesh's on_demand timeout; Envoy's own default is
// 5 s.
const DefaultTimeout = 2 * time.Second

// ErrMissing is a name the server answered absent (removed_resources).
var ErrMissing = errors.New("cluster answered absent by on-demand CDS")

// ErrTimeout is a name that did not arrive within the timeout.
var ErrTimeout = errors.New("on-demand CDS timed out")

// Discovery is one proxy's on-demand CDS state. Its zero value is not
// usable: set Subscribe.
type Discovery struct {
	// Subscribe adds name to the CDS stream's subscription (delta
	// resource_names_subscribe). It is called once per name, for the life
	// of the Discovery, outside any lock.
	Subscribe func(name string) error
	// Timeout bounds each paused request; zero means DefaultTimeout.
	Timeout time.Duration

	mu         sync.Mutex
	present    map[string]bool
	subscribed map[string]bool
	// waiting holds, per name, what its paused requests wait on.
	waiting map[string]*wait
	stats   Stats
}

// wait is one name's answer: done is closed once err is set.
type wait struct {
	done chan struct{}
	err  error
}

// Stats counts what the filter did.
type Stats struct {
	// Subscribed is the names sent to the server; Skipped the requests
	// that found their name already subscribed and sent nothing.
	Subscribed, Skipped uint64
	// Found, Missing and TimedOut are paused requests by outcome.
	Found, Missing, TimedOut uint64
}

func (d *Discovery) init() {
	if d.present == nil {
		d.present, d.subscribed = map[string]bool{}, map[string]bool{}
		d.waiting = map[string]*wait{}
	}
}

// Stats returns the counts so far.
func (d *Discovery) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Names returns every name ever subscribed on demand, which a fresh CDS
// stream subscribes to again beside the wildcard.
func (d *Discovery) Names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.subscribed))
	for n := range d.subscribed {
		out = append(out, n)
	}
	return out
}

// Await pauses until cluster name is present. It returns nil once it is
// (at once if it already is), ErrMissing when the server answers it
// absent, ErrTimeout after the timeout, or ctx's error.
func (d *Discovery) Await(ctx context.Context, name string) error {
	return d.AwaitWithin(ctx, name, d.Timeout)
}

// AwaitWithin is Await with the on_demand filter's own timeout (zero:
// DefaultTimeout).
func (d *Discovery) AwaitWithin(ctx context.Context, name string, timeout time.Duration) error {
	d.mu.Lock()
	d.init()
	if d.present[name] {
		d.mu.Unlock()
		return nil
	}
	w, ok := d.waiting[name]
	if !ok {
		w = &wait{done: make(chan struct{})}
		d.waiting[name] = w
	}
	first := !d.subscribed[name]
	if first {
		d.subscribed[name] = true
		d.stats.Subscribed++
	} else {
		d.stats.Skipped++
	}
	d.mu.Unlock()
	if first {
		if err := d.Subscribe(name); err != nil {
			// The name stays subscribed: the client re-sends it on its
			// next stream, as Envoy's does.
			return fmt.Errorf("failed to subscribe to cluster %q on demand: %w", name, err)
		}
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-w.done:
		d.mu.Lock()
		d.count(w.err)
		d.mu.Unlock()
		return w.err
	case <-timer.C:
		d.mu.Lock()
		d.stats.TimedOut++
		d.mu.Unlock()
		return fmt.Errorf("cluster %q: %w after %s", name, ErrTimeout, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Discovery) count(err error) {
	if err == nil {
		d.stats.Found++
	} else {
		d.stats.Missing++
	}
}

// Update is told every CDS response the proxy applied: added clusters are
// present and release their paused requests; removed ones are absent, and
// their paused requests fail with ErrMissing. Call it after the clusters
// are usable, so a released request finds its cluster.
func (d *Discovery) Update(added, removed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.init()
	for _, n := range added {
		d.present[n] = true
		d.release(n, nil)
	}
	for _, n := range removed {
		delete(d.present, n)
		d.release(n, fmt.Errorf("cluster %q: %w", n, ErrMissing))
	}
}

func (d *Discovery) release(name string, err error) {
	w, ok := d.waiting[name]
	if !ok {
		return
	}
	delete(d.waiting, name)
	w.err = err
	close(w.done)
}
