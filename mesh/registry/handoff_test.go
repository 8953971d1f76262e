package registry

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/handoff"
)

// fakeHandoff is a HandedOver the test changes by hand.
type fakeHandoff struct {
	mu      sync.Mutex
	pods    []handoff.Pod
	changed chan struct{}
}

func newFakeHandoff(pods ...handoff.Pod) *fakeHandoff {
	return &fakeHandoff{pods: pods, changed: make(chan struct{})}
}

func (f *fakeHandoff) Pods() ([]handoff.Pod, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]handoff.Pod(nil), f.pods...), f.changed
}

func (f *fakeHandoff) set(pods ...handoff.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = pods
	close(f.changed)
	f.changed = make(chan struct{})
}

// chanSource delivers what the test sends it.
type chanSource chan Update

func (c chanSource) Watch(context.Context) <-chan Update { return c }

func handed(name, uid, ip, netns string) handoff.Pod {
	return handoff.Pod{Ref: handoff.Ref{ContainerID: "c-" + name + "-" + uid, IfName: "eth0"}, Namespace: "demo", Name: name,
		UID: uid, Netns: netns, IPs: []netip.Addr{netip.MustParseAddr(ip)}}
}

func regPod(name, uid, ip, netns string) Pod {
	return Pod{Namespace: "demo", Name: name, UID: uid, IP: netip.MustParseAddr(ip), NetnsPath: netns, Node: "n1"}
}

func TestNetnsComesOnlyFromTheHandoff(t *testing.T) {
	for _, c := range []struct {
		name   string
		pod    Pod
		handed []handoff.Pod
		want   string
	}{
		{"same UID and IP", regPod("web-0", "u1", "10.244.1.2", ""), []handoff.Pod{handed("web-0", "u1", "10.244.1.2", "/run/netns/a")}, "/run/netns/a"},
		{"a scenario pod (no UID) by name and IP", regPod("web-0", "", "10.244.1.2", ""), []handoff.Pod{handed("web-0", "u1", "10.244.1.2", "/run/netns/a")}, "/run/netns/a"},
		{"a record without UID by name and IP", regPod("web-0", "u1", "10.244.1.2", ""), []handoff.Pod{handed("web-0", "", "10.244.1.2", "/run/netns/a")}, "/run/netns/a"},
		{"same UID while the pod's IP lags its new sandbox", regPod("web-0", "u1", "10.244.1.2", ""), []handoff.Pod{handed("web-0", "u1", "10.244.1.9", "/run/netns/b")}, "/run/netns/b"},
		{"the predecessor of the same name (another UID)", regPod("web-0", "u2", "10.244.1.2", ""), []handoff.Pod{handed("web-0", "u1", "10.244.1.2", "/run/netns/a")}, ""},
		{"a record without UID and another IP", regPod("web-0", "u1", "10.244.1.2", ""), []handoff.Pod{handed("web-0", "", "10.244.1.9", "/run/netns/a")}, ""},
		{"the predecessor and the pod both handed over", regPod("web-0", "u2", "10.244.1.2", ""),
			[]handoff.Pod{handed("web-0", "u1", "10.244.1.2", "/run/netns/a"), handed("web-0", "u2", "10.244.1.3", "/run/netns/b")}, "/run/netns/b"},
		{"another pod's record", regPod("web-0", "u1", "10.244.1.2", ""), []handoff.Pod{handed("web-1", "u1", "10.244.1.2", "/run/netns/a")}, ""},
		{"not handed over: the source's own path is dropped", regPod("web-0", "u1", "10.244.1.2", "/run/netns/from-the-scenario"), nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &State{Pods: []Pod{c.pod}}
			got := withNetns(st, c.handed)
			if got.Pods[0].NetnsPath != c.want {
				t.Fatalf("netns = %q, want %q", got.Pods[0].NetnsPath, c.want)
			}
			if st.Pods[0].NetnsPath != c.pod.NetnsPath {
				t.Fatalf("the source's State was changed: %q", st.Pods[0].NetnsPath)
			}
		})
	}
}

func TestWithHandoffFollowsBothSides(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src := make(chanSource, 1)
	h := newFakeHandoff()
	ch := WithHandoff(src, h).Watch(ctx)
	next := func() Update {
		t.Helper()
		select {
		case u := <-ch:
			return u
		case <-ctx.Done():
			t.Fatal("no update")
		}
		return Update{}
	}
	netnsOf := func(u Update) []string {
		t.Helper()
		if u.Err != nil {
			t.Fatalf("unexpected error %v", u.Err)
		}
		var out []string
		for _, p := range u.State.Pods {
			out = append(out, p.Name+"="+p.NetnsPath)
		}
		return out
	}
	eq := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
	}

	// A handoff change before the registry's first State sends nothing.
	h.set(handed("a", "ua", "10.244.1.2", "/run/netns/a"))
	select {
	case u := <-ch:
		t.Fatalf("an update before the source's first State: %+v", u)
	case <-time.After(50 * time.Millisecond):
	}
	src <- Update{State: &State{Pods: []Pod{regPod("a", "ua", "10.244.1.2", ""), regPod("b", "ub", "10.244.1.3", "")}}}
	eq(netnsOf(next()), "a=/run/netns/a", "b=")

	h.set(handed("a", "ua", "10.244.1.2", "/run/netns/a"), handed("b", "ub", "10.244.1.3", "/run/netns/b"))
	eq(netnsOf(next()), "a=/run/netns/a", "b=/run/netns/b")

	// The registry fails: the error passes through; a pod handed over
	// meanwhile still arrives, on the last good State.
	src <- Update{Err: errors.New("apiserver away")}
	if u := next(); u.Err == nil || u.State != nil {
		t.Fatalf("the source's error became %+v", u)
	}
	h.set(handed("b", "ub", "10.244.1.3", "/run/netns/b"))
	eq(netnsOf(next()), "a=", "b=/run/netns/b")

	close(src)
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("an update after the source closed")
		}
	case <-ctx.Done():
		t.Fatal("the channel stayed open after the source closed")
	}
}
