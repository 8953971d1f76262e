package registry

import (
	"context"
	"slices"

	"github.com/aether-mesh/aether/mesh/handoff"
)

// HandedOver is what the node agent holds of the pods the CNI handed over
// (a *handoff.Server): the pods, and a channel closed at the next change.
type HandedOver interface {
	Pods() ([]handoff.Pod, <-chan struct{})
}

// WithHandoff is src with every pod's NetnsPath taken from the handoff and
// from nowhere else: a pod the CNI has not handed over has none, whatever
// src said, and so gets no capture listener. A change of the handoff
// delivers the last State of src again with the new paths, also while src
// is failing: a pod that starts then gets its listener without waiting for
// the registry to recover.
func WithHandoff(src Source, h HandedOver) Source { return &handoffSource{src: src, h: h} }

type handoffSource struct {
	src Source
	h   HandedOver
}

func (s *handoffSource) Watch(ctx context.Context) <-chan Update {
	out := make(chan Update, 1)
	go func() {
		defer close(out)
		in := s.src.Watch(ctx)
		var last *State
		_, changed := s.h.Pods()
		for {
			var u Update
			var ok bool
			select {
			case <-ctx.Done():
				return
			case u, ok = <-in:
				if !ok {
					return
				}
				if u.Err == nil {
					last = u.State
				}
			case <-changed:
				if last == nil {
					_, changed = s.h.Pods()
					continue
				}
				u = Update{State: last}
			}
			var pods []handoff.Pod
			pods, changed = s.h.Pods()
			if u.State != nil {
				u.State = withNetns(u.State, pods)
			}
			select {
			case out <- u:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// withNetns returns a copy of st whose pods carry the handed-over netns
// paths. Only Pods is copied; the rest of st is shared, and read only.
func withNetns(st *State, handed []handoff.Pod) *State {
	out := *st
	out.Pods = slices.Clone(st.Pods)
	for i := range out.Pods {
		out.Pods[i].NetnsPath = netnsFor(&out.Pods[i], handed)
	}
	return &out
}

// netnsFor picks the handed-over attachment that is p. Namespace and name
// are not enough: a StatefulSet's next pod has its predecessor's name, and
// its predecessor's sandbox may still be handed over. So a record of
// another UID is never p; a record is p when it holds p's IP, or when
// both carry the same UID (p's IP can lag its new sandbox's).
func netnsFor(p *Pod, handed []handoff.Pod) string {
	byUID := ""
	for i := range handed {
		h := &handed[i]
		if h.Namespace != p.Namespace || h.Name != p.Name {
			continue
		}
		sameUID := p.UID != "" && h.UID == p.UID
		if p.UID != "" && h.UID != "" && !sameUID {
			continue
		}
		if p.IP.IsValid() && slices.Contains(h.IPs, p.IP) {
			return h.Netns
		}
		if sameUID && byUID == "" {
			byUID = h.Netns
		}
	}
	return byUID
}
