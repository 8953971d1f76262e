package agent

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// The resource types the agent emits, as indexes into Builder.idx.
const (
	clusterIdx = iota
	endpointIdx
	listenerIdx
	secretIdx
	numTypes
)

var typeURLs = [numTypes]resource.Type{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.SecretType}

// typeIndex is one type's name index, the builder's own: touched records
// the names a build set or deleted, from which the build's Changes are
// drawn. Resource versions are the cache's, a hash of each resource's
// encoding, so a version moves exactly when its content does.
type typeIndex struct {
	items   map[string]types.Resource
	changed bool
	touched []string
}

func (t *typeIndex) set(name string, r types.Resource) {
	t.items[name] = r
	t.touched = append(t.touched, name)
	t.changed = true
}

func (t *typeIndex) del(name string) {
	if _, ok := t.items[name]; ok {
		delete(t.items, name)
		t.touched = append(t.touched, name)
		t.changed = true
	}
}

// changes is what the build touched, and starts the next build's record.
func (t *typeIndex) changes() Changes {
	c := Changes{Updated: make(map[string]types.Resource, len(t.touched))}
	for _, name := range t.touched {
		if r, ok := t.items[name]; ok {
			c.Updated[name] = r
		} else if !slices.Contains(c.Removed, name) {
			c.Removed = append(c.Removed, name)
		}
	}
	t.touched, t.changed = t.touched[:0], false
	return c
}

// hasher is the builder's fingerprint of a piece's inputs: per process
// (the seed is random), so it never outlives the code that computed it.
type hasher struct{ maphash.Hash }

func (b *Builder) hasher(tag string) (h hasher) {
	h.SetSeed(b.seed)
	h.WriteString(tag)
	h.WriteByte(0)
	return h
}

func (h *hasher) str(s string) *hasher { h.WriteString(s); h.WriteByte(0); return h }

func (h *hasher) addr(a netip.Addr) *hasher {
	b := a.As16()
	h.Write(b[:])
	return h
}

func (h *hasher) u64(v uint64) *hasher {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	h.Write(b[:])
	return h
}
