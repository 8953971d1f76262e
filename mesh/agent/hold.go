package agent

import (
	"context"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// holdCache keeps every watch waiting until the first publish. The
// per-type caches answer a first wildcard request at once, even when they
// are empty, and a proxy that connects before the agent has read the
// registry would take that as "no listeners": it is given nothing until
// there is a configuration to give.
type holdCache struct {
	inner cache.Cache

	mu   sync.Mutex
	open bool
	held map[*heldWatch]struct{}
}

// heldWatch is a watch made before the first publish. Its mutex orders
// its creation in inner against its cancellation: once the server has
// cancelled a watch it closes the response channel, which the inner cache
// must then never send on.
type heldWatch struct {
	mu        sync.Mutex
	create    func() (func(), error)
	cancel    func()
	cancelled bool
}

var _ cache.Cache = (*holdCache)(nil)

func newHoldCache(inner cache.Cache) *holdCache {
	return &holdCache{inner: inner, held: map[*heldWatch]struct{}{}}
}

func (h *holdCache) CreateWatch(req *cache.Request, sub cache.Subscription, value chan cache.Response) (func(), error) {
	return h.watch(func() (func(), error) { return h.inner.CreateWatch(req, sub, value) })
}

func (h *holdCache) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, value chan cache.DeltaResponse) (func(), error) {
	return h.watch(func() (func(), error) { return h.inner.CreateDeltaWatch(req, sub, value) })
}

func (h *holdCache) Fetch(ctx context.Context, req *cache.Request) (cache.Response, error) {
	return h.inner.Fetch(ctx, req)
}

func (h *holdCache) watch(create func() (func(), error)) (func(), error) {
	h.mu.Lock()
	if h.open {
		h.mu.Unlock()
		return create()
	}
	w := &heldWatch{create: create}
	h.held[w] = struct{}{}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.held, w)
		h.mu.Unlock()
		w.mu.Lock()
		w.cancelled = true
		cancel := w.cancel
		w.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}, nil
}

// release passes every held watch to the inner cache, which now has a
// configuration; later watches go straight to it. It returns the first
// error of a watch the inner cache refused (that stream gets no answer).
func (h *holdCache) release() error {
	h.mu.Lock()
	if h.open {
		h.mu.Unlock()
		return nil
	}
	h.open = true
	held := h.held
	h.held = nil
	h.mu.Unlock()
	var first error
	for w := range held {
		w.mu.Lock()
		if !w.cancelled {
			cancel, err := w.create()
			if err != nil && first == nil {
				first = err
			}
			w.cancel = cancel
		}
		w.mu.Unlock()
	}
	return first
}
