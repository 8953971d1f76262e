package proxy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
)

// The agent's golden xDS snapshots are what the data plane must accept: each
// one is compiled here exactly as an update would be, and every cluster a
// listener names must be among the snapshot's clusters. A generator change
// the proxy cannot honour fails here, before any rig runs.
func TestAgentGoldenSnapshotsCompile(t *testing.T) {
	files, err := filepath.Glob("../../fixtures/xds/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden snapshots found (%v)", err)
	}
	listenersSeen := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var g struct {
				Resources map[string][]json.RawMessage `json:"resources"`
			}
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			clusters := map[string]bool{}
			for _, raw := range g.Resources["type.googleapis.com/envoy.config.cluster.v3.Cluster"] {
				var c clusterv3.Cluster
				if err := protojson.Unmarshal(raw, &c); err != nil {
					t.Fatalf("decode cluster: %v", err)
				}
				if _, err := cluster.FromProto(&c); err != nil {
					t.Errorf("proxy rejects cluster %s: %v", c.GetName(), err)
				}
				clusters[c.GetName()] = true
			}
			for _, raw := range g.Resources["type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"] {
				var la endpointv3.ClusterLoadAssignment
				if err := protojson.Unmarshal(raw, &la); err != nil {
					t.Fatalf("decode load assignment: %v", err)
				}
				if _, err := cluster.AssignmentFromProto(&la); err != nil {
					t.Errorf("proxy rejects load assignment %s: %v", la.GetClusterName(), err)
				}
			}
			for _, raw := range g.Resources["type.googleapis.com/envoy.config.listener.v3.Listener"] {
				var l listenerv3.Listener
				if err := protojson.Unmarshal(raw, &l); err != nil {
					t.Fatalf("decode listener: %v", err)
				}
				spec, err := listener.FromProto(&l)
				if err != nil {
					t.Errorf("proxy rejects listener %s: %v", l.GetName(), err)
					continue
				}
				listenersSeen++
				for _, c := range spec.Clusters() {
					if !clusters[c] {
						t.Errorf("listener %s names cluster %q, absent from the snapshot", l.GetName(), c)
					}
				}
			}
		})
	}
	if listenersSeen == 0 {
		t.Fatal("no golden snapshot carried a listener: nothing about the capture path was checked")
	}
}
