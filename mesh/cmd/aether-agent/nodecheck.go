package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/aether-mesh/aether/mesh/registry"
)

// warnUnknownNode is src with a warning whenever the registry stops
// listing node (or never did): an agent whose --node is misspelt would
// otherwise publish a snapshot without listeners and say nothing more.
// It warns once per change of that condition, not on every update.
func warnUnknownNode(src registry.Source, node string, log *slog.Logger) registry.Source {
	return &nodeCheck{src: src, node: node, log: log}
}

type nodeCheck struct {
	src  registry.Source
	node string
	log  *slog.Logger
}

func (s *nodeCheck) Watch(ctx context.Context) <-chan registry.Update {
	in := s.src.Watch(ctx)
	out := make(chan registry.Update, 1)
	go func() {
		defer close(out)
		listed := true // until a State says otherwise
		for u := range in {
			if u.State != nil {
				listed = s.check(u.State, listed)
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

// check logs when whether st lists the node differs from wasListed, and
// returns whether it does.
func (s *nodeCheck) check(st *registry.State, wasListed bool) bool {
	var names []string
	for _, n := range st.Nodes {
		names = append(names, n.Name)
	}
	listed := slices.Contains(names, s.node)
	switch {
	case !listed && wasListed:
		s.log.Warn("the registry does not list this node: its proxy gets no capture listeners until it does (is --node misspelt?)",
			"node", s.node, "registry_nodes", strings.Join(names, ","))
	case listed && !wasListed:
		s.log.Info("the registry lists this node again", "node", s.node)
	}
	return listed
}
