package validate

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strings"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// A node's 50 pod listeners carry the same udp_proxy filter and the same
// thousands of TCP filter chains; walking and decoding them once per
// listener made the gates cost O(pods x services). Within one Check every
// gate therefore memoizes what it finds under each distinct piece of
// content: a typed_config by its packed bytes (type URL and value, compared
// in full on a hash hit), a filter chain, listener filter or list of filter
// chains by identity (the builder shares them between listeners). What a
// gate finds under a subtree depends only on the subtree and on the
// snapshot's name sets, which are fixed for the Check, so the memo is exact.

// found is one finding under a memo root; path is relative to it.
type found struct {
	path   string
	detail string
	// decodeErr marks a typed_config that does not unpack, as opposed to
	// what the gate looked for.
	decodeErr bool
}

// visitFn inspects one message and returns its own findings (not its
// children's); path is relative to the current memo root, "" at the root.
type visitFn func(path string, m protoreflect.Message) []found

type anyEntry struct {
	typeURL string
	value   []byte
	found   []found
}

type chainsKey struct {
	first **listener.FilterChain
	n     int
}

type memo struct {
	seed   maphash.Seed
	anys   map[uint64][]anyEntry
	shared map[proto.Message][]found
	chains map[chainsKey][]found
}

func newMemo() *memo {
	return &memo{seed: maphash.MakeSeed(), anys: map[uint64][]anyEntry{}, shared: map[proto.Message][]found{}, chains: map[chainsKey][]found{}}
}

// scan walks m (a resource) for one gate and returns every finding with
// its full path.
func (mo *memo) scan(m protoreflect.Message, visit visitFn) []found {
	var out []found
	mo.walk(m, "", visit, &out)
	return out
}

// isShared reports whether m is a memo root shared by identity.
func isShared(m protoreflect.Message) bool {
	switch m.Interface().(type) {
	case *listener.FilterChain, *listener.ListenerFilter:
		return true
	}
	return false
}

func (mo *memo) walk(m protoreflect.Message, path string, visit visitFn, out *[]found) {
	*out = append(*out, visit(path, m)...)
	if a, ok := m.Interface().(*anypb.Any); ok {
		name := a.GetTypeUrl()[strings.LastIndex(a.GetTypeUrl(), "/")+1:]
		prefix(out, path+"<"+name+">", mo.anyFindings(a, visit))
		return
	}
	if l, ok := m.Interface().(*listener.Listener); ok && len(l.GetFilterChains()) > 0 {
		fcs := l.GetFilterChains()
		k := chainsKey{&fcs[0], len(fcs)}
		fs, hit := mo.chains[k]
		if !hit {
			for i, fc := range fcs {
				prefix(&fs, fmt.Sprintf("filter_chains[%d]", i), mo.sharedFindings(fc.ProtoReflect(), visit))
			}
			mo.chains[k] = fs
		}
		prefix(out, joinPath(path, ""), fs)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		if fd.FullName() == "envoy.config.listener.v3.Listener.filter_chains" {
			return true // above, as one list
		}
		p := joinPath(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				return true
			}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				mo.child(mv.Message(), fmt.Sprintf("%s[%s]", p, k.String()), visit, out)
				return true
			})
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				mo.child(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), visit, out)
			}
		default:
			mo.child(v.Message(), p, visit, out)
		}
		return true
	})
}

func (mo *memo) child(m protoreflect.Message, path string, visit visitFn, out *[]found) {
	if isShared(m) {
		prefix(out, path, mo.sharedFindings(m, visit))
		return
	}
	mo.walk(m, path, visit, out)
}

func joinPath(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	}
	return path + "." + field
}

// prefix appends fs to out with p put before each relative path.
func prefix(out *[]found, p string, fs []found) {
	for _, f := range fs {
		f.path = joinPath(p, f.path)
		*out = append(*out, f)
	}
}

func (mo *memo) sharedFindings(m protoreflect.Message, visit visitFn) []found {
	key := m.Interface()
	if fs, ok := mo.shared[key]; ok {
		return fs
	}
	var fs []found
	mo.walk(m, "", visit, &fs)
	mo.shared[key] = fs
	return fs
}

// anyFindings unpacks a typed_config once per distinct content and walks
// the payload as its own root.
func (mo *memo) anyFindings(a *anypb.Any, visit visitFn) []found {
	return mo.anyCached(a, func() []found {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return []found{{detail: fmt.Sprintf("cannot decode %s: %v", a.GetTypeUrl(), err), decodeErr: true}}
		}
		var fs []found
		mo.walk(inner.ProtoReflect(), "", visit, &fs)
		return fs
	})
}

// anyCached returns compute's findings for a's content, computing them on
// the first sight of that content only.
func (mo *memo) anyCached(a *anypb.Any, compute func() []found) []found {
	h := maphash.Bytes(mo.seed, a.GetValue()) ^ maphash.String(mo.seed, a.GetTypeUrl())
	for _, e := range mo.anys[h] {
		if e.typeURL == a.GetTypeUrl() && bytes.Equal(e.value, a.GetValue()) {
			return e.found
		}
	}
	fs := compute()
	mo.anys[h] = append(mo.anys[h], anyEntry{typeURL: a.GetTypeUrl(), value: a.GetValue(), found: fs})
	return fs
}

// validateShallow runs m's protoc-gen-validate rules without descending
// into the memo roots under it (filter chains, listener filters), which the
// walk validates once each as roots of their own. Generated ValidateAll
// stops at an Any, so payloads are roots of their own too.
func validateShallow(m protoreflect.Message) error {
	v, ok := m.Interface().(allValidator)
	if !ok {
		return nil
	}
	split := false
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if splitField(fd) {
			split = true
			return false
		}
		return true
	})
	if !split {
		return v.ValidateAll()
	}
	cp := m.New()
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		if !splitField(fd) {
			cp.Set(fd, val)
		}
		return true
	})
	return cp.Interface().(allValidator).ValidateAll()
}

func splitField(fd protoreflect.FieldDescriptor) bool {
	if fd.Kind() != protoreflect.MessageKind || fd.IsMap() {
		return false
	}
	switch fd.Message().FullName() {
	case "envoy.config.listener.v3.FilterChain", "envoy.config.listener.v3.ListenerFilter":
		return true
	}
	return false
}
