package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"sigs.k8s.io/yaml"
)

// Clusters is the file form of a mesh of several clusters: each its own
// scenario (this package's format), with the name and trust domain that set
// it apart. Each cluster's agents watch their own scenario only, and learn
// the others from their exports (export.go), as separate clusters do.
//
//	clusters:
//	  - name: cluster-1                    # a DNS label
//	    trustDomain: cluster-1.aether.test # its own CA signs for it
//	    meshDomain: mesh.test              # default mesh.local
//	    scenario:                          # a scenario: nodes, pods, services, ...
//	      nodes: [...]
//	  - name: cluster-2
//	    ...
type Clusters struct {
	Clusters []ScenarioCluster `json:"clusters"`
}

// ScenarioCluster is one cluster of a Clusters file.
type ScenarioCluster struct {
	Name        string `json:"name"`
	TrustDomain string `json:"trustDomain"`
	MeshDomain  string `json:"meshDomain,omitempty"`
	// Scenario is the cluster's own scenario, decoded by DecodeScenario
	// so an unknown field in it is named by its object and path.
	Scenario *Scenario       `json:"-"`
	Raw      json.RawMessage `json:"scenario"`
}

// DefaultMeshDomain is a cluster's mesh domain when its entry names none,
// the agent's own default.
const DefaultMeshDomain = "mesh.local"

var clusterName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// IsClustersFile reports whether data is a Clusters file rather than a
// single cluster's scenario: its top level holds "clusters".
func IsClustersFile(data []byte) bool {
	var top map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &top); err != nil {
		return false
	}
	_, ok := top["clusters"]
	return ok
}

// LoadClustersFile reads and decodes a Clusters file, checking each
// cluster's entry and scenario; every problem is reported at once, named
// by its cluster and field.
func LoadClustersFile(path string) ([]ScenarioCluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read clusters file %q: %w", path, err)
	}
	return DecodeClusters(path, data)
}

// DecodeClusters decodes a Clusters file; name labels every error.
func DecodeClusters(name string, data []byte) ([]ScenarioCluster, error) {
	var doc Clusters
	if err := yaml.UnmarshalStrict(data, &doc); err != nil {
		return nil, fmt.Errorf("failed to parse clusters file %q: %w", name, err)
	}
	if len(doc.Clusters) < 2 {
		return nil, &FieldError{File: name, Field: "clusters", Err: fmt.Errorf("must list at least two clusters, got %d (one cluster is a plain scenario file)", len(doc.Clusters))}
	}
	var errs []error
	bad := func(obj, field string, err error) {
		errs = append(errs, &FieldError{File: name, Kind: "cluster", Object: obj, Field: field, Err: err})
	}
	names, domains := map[string]bool{}, map[string]bool{}
	for i := range doc.Clusters {
		c := &doc.Clusters[i]
		obj := c.Name
		if obj == "" {
			obj = fmt.Sprintf("clusters[%d]", i)
		}
		switch {
		case !clusterName.MatchString(c.Name):
			bad(obj, "name", fmt.Errorf("want a DNS label such as cluster-1, got %q", c.Name))
		case names[c.Name]:
			bad(obj, "name", errors.New("two clusters have this name"))
		}
		names[c.Name] = true
		if td, err := spiffeid.TrustDomainFromString(c.TrustDomain); err != nil {
			bad(obj, "trustDomain", err)
		} else if domains[td.Name()] {
			bad(obj, "trustDomain", fmt.Errorf("%q is another cluster's too: each cluster keeps its own trust domain", td.Name()))
		} else {
			domains[td.Name()] = true
		}
		if c.MeshDomain == "" {
			c.MeshDomain = DefaultMeshDomain
		}
		if len(c.Raw) == 0 || string(c.Raw) == "null" {
			bad(obj, "scenario", errors.New("is required"))
			continue
		}
		sc, err := DecodeScenario(fmt.Sprintf("%s: cluster %q: scenario", name, obj), c.Raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := sc.State(fmt.Sprintf("%s: cluster %q: scenario", name, obj)); err != nil {
			errs = append(errs, err)
			continue
		}
		c.Scenario = sc
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return doc.Clusters, nil
}

// State is the cluster's own checked State, endpoints derived; file
// labels every error.
func (c *ScenarioCluster) State(file string) (*State, error) {
	st, err := c.Scenario.State(fmt.Sprintf("%s: cluster %q: scenario", file, c.Name))
	if err != nil {
		return nil, err
	}
	st.DeriveEndpoints()
	return st, nil
}

// Export is the cluster's export (ExportOf), as its gateway offers it.
func (c *ScenarioCluster) Export(st *State) (*Export, error) {
	return ExportOf(st, c.Name, c.TrustDomain, c.MeshDomain)
}

// FederatedStates is each cluster's State, in file order, with the remote
// services every other cluster exports set on it: what each cluster's
// agents see once the exports are exchanged. A cluster without a gateway
// exports nothing.
func FederatedStates(file string, cs []ScenarioCluster) ([]*State, error) {
	states := make([]*State, len(cs))
	exports := make([][]RemoteService, len(cs))
	for i := range cs {
		st, err := cs[i].State(file)
		if err != nil {
			return nil, err
		}
		states[i] = st
		if st.gateway() == nil {
			continue
		}
		ex, err := cs[i].Export(st)
		if err != nil {
			return nil, err
		}
		data, err := yaml.Marshal(ex)
		if err != nil {
			return nil, err
		}
		if exports[i], _, err = ParseExport(fmt.Sprintf("%s: cluster %q: export", file, cs[i].Name), data); err != nil {
			return nil, err
		}
	}
	for i, st := range states {
		var others [][]RemoteService
		for j := range exports {
			if j != i {
				others = append(others, exports[j])
			}
		}
		if err := st.WithRemotes(others...); err != nil {
			return nil, fmt.Errorf("%s: cluster %q: %w", file, cs[i].Name, err)
		}
	}
	return states, nil
}
