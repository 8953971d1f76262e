package registry

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const multicluster = "../../fixtures/scenarios/multicluster.yaml"

// The fixture's two clusters export what their gateways expose, with the
// pods' SPIFFE IDs in each cluster's own trust domain; a service not
// exposed (internal) stays inside its cluster.
func TestFederatedStatesOfTheFixture(t *testing.T) {
	cs, err := LoadClustersFile(multicluster)
	if err != nil {
		t.Fatal(err)
	}
	states, err := FederatedStates(multicluster, cs)
	if err != nil {
		t.Fatal(err)
	}
	got := func(st *State) []string {
		var out []string
		for _, r := range st.Remote {
			out = append(out, r.Cluster+" "+r.Key().String()+" "+r.Gateway.String()+" "+r.MeshDomain+" "+strings.Join(r.Accounts, ","))
		}
		return out
	}
	want1 := []string{
		"cluster-2 demo/dst-a 172.30.0.20:18009 two.mesh.test spiffe://cluster-2.aether.test/ns/demo/sa/dst-a",
		"cluster-2 demo/dst-b 172.30.0.20:18009 two.mesh.test spiffe://cluster-2.aether.test/ns/demo/sa/dst-b",
	}
	want2 := []string{"cluster-1 demo/back 172.30.0.10:18009 one.mesh.test spiffe://cluster-1.aether.test/ns/demo/sa/back"}
	if g := got(states[0]); strings.Join(g, "\n") != strings.Join(want1, "\n") {
		t.Errorf("cluster-1's remotes:\n%s\nwant\n%s", strings.Join(g, "\n"), strings.Join(want1, "\n"))
	}
	if g := got(states[1]); strings.Join(g, "\n") != strings.Join(want2, "\n") {
		t.Errorf("cluster-2's remotes:\n%s\nwant\n%s", strings.Join(g, "\n"), strings.Join(want2, "\n"))
	}
}

// Every problem of a clusters file is named by its cluster and field.
func TestClustersFileErrors(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"one cluster": {`clusters: [{name: a, trustDomain: a.test, scenario: {nodes: [{name: n}], pods: [], services: []}}]`, "at least two clusters"},
		"bad name": {`clusters:
  - {name: Cluster_1, trustDomain: a.test, scenario: {nodes: [{name: n}], pods: [], services: []}}
  - {name: b, trustDomain: b.test, scenario: {nodes: [{name: n}], pods: [], services: []}}`, `cluster "Cluster_1": field name: want a DNS label`},
		"shared trust domain": {`clusters:
  - {name: a, trustDomain: same.test, scenario: {nodes: [{name: n}], pods: [], services: []}}
  - {name: b, trustDomain: same.test, scenario: {nodes: [{name: n}], pods: [], services: []}}`, `cluster "b": field trustDomain: "same.test" is another cluster's too`},
		"typo in a scenario": {`clusters:
  - {name: a, trustDomain: a.test, scenario: {nodes: [{name: n}], pods: [], services: [{name: s, namespace: d, clusterIp: 10.96.0.1, ports: [{port: 80}]}]}}
  - {name: b, trustDomain: b.test, scenario: {nodes: [{name: n}], pods: [], services: []}}`, `cluster "a": scenario: service "d/s": field clusterIp: unknown field (did you mean clusterIP?)`},
		"no scenario": {`clusters:
  - {name: a, trustDomain: a.test}
  - {name: b, trustDomain: b.test, scenario: {nodes: [{name: n}], pods: [], services: []}}`, `cluster "a": field scenario: is required`},
		"unknown cluster field": {`clusters:
  - {name: a, trustDomian: a.test, scenario: {nodes: [{name: n}]}}
  - {name: b, trustDomain: b.test, scenario: {nodes: [{name: n}]}}`, `unknown field "trustDomian"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeClusters("m.yaml", []byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if !IsClustersFile([]byte("clusters: []")) || IsClustersFile([]byte("nodes: [{name: n}]")) {
		t.Error("IsClustersFile does not tell a clusters file from a scenario")
	}
}

// An export is refused field by field: a gateway off 18009, an account in
// another trust domain, a service without accounts.
func TestExportErrors(t *testing.T) {
	const good = `cluster: c2
trustDomain: c2.test
meshDomain: two.mesh
gateway: 172.30.0.20:18009
services:
  - {name: a, namespace: demo, port: 8080, accounts: [spiffe://c2.test/ns/demo/sa/a]}
`
	rs, _, err := ParseExport("x.yaml", []byte(good))
	if err != nil || len(rs) != 1 || rs[0].Gateway.String() != "172.30.0.20:18009" || rs[0].MeshDomain != "two.mesh" {
		t.Fatalf("good export: %+v, %v", rs, err)
	}
	for name, tc := range map[string]struct{ from, to, want string }{
		"gateway port":  {"172.30.0.20:18009", "172.30.0.20:443", "field gateway: port 443: the gateway listens on 18009"},
		"foreign id":    {"spiffe://c2.test/ns/demo/sa/a", "spiffe://c1.test/ns/demo/sa/a", "field services[0].accounts[0]: spiffe://c1.test/ns/demo/sa/a is not in the exporting cluster's trust domain"},
		"no accounts":   {"accounts: [spiffe://c2.test/ns/demo/sa/a]", "accounts: []", "field services[0].accounts: must list the SPIFFE IDs"},
		"no mesh":       {"meshDomain: two.mesh", "meshDomain: \"\"", "field meshDomain: must name"},
		"unknown field": {"port: 8080", "prot: 8080", `unknown field "prot"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := ParseExport("x.yaml", []byte(strings.Replace(good, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A remote service the cluster defines itself stays local; the same
// service exported by two clusters is an error naming both.
func TestWithRemotes(t *testing.T) {
	st, err := ParseScenario("s.yaml", []byte(`
nodes: [{name: n}]
pods: []
services:
  - {name: a, namespace: demo, clusterIP: 10.96.0.10, ports: [{port: 80, appProtocol: http}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := RemoteService{Name: "a", Namespace: "demo", Cluster: "c2"}
	b := RemoteService{Name: "b", Namespace: "demo", Cluster: "c2"}
	if err := st.WithRemotes([]RemoteService{b, a}); err != nil {
		t.Fatal(err)
	}
	if len(st.Remote) != 1 || st.Remote[0].Name != "b" {
		t.Fatalf("remotes %+v, want b alone (a is the cluster's own)", st.Remote)
	}
	b3 := b
	b3.Cluster = "c3"
	if err := st.WithRemotes([]RemoteService{b}, []RemoteService{b3}); err == nil || !strings.Contains(err.Error(), `both cluster "c2" and cluster "c3"`) {
		t.Fatalf("err = %v, want the double export named", err)
	}
}

type fixedSource struct{ st *State }

func (f fixedSource) Watch(ctx context.Context) <-chan Update {
	ch := make(chan Update, 1)
	ch <- Update{State: f.st}
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

// WithExports delivers the export's remotes, follows a change of the
// file, and keeps the last good content when the file breaks.
func TestWithExportsFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "export.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	export := func(svcs ...string) string {
		s := "cluster: c2\ntrustDomain: c2.test\nmeshDomain: two.mesh\ngateway: 172.30.0.20:18009\nservices:\n"
		for _, n := range svcs {
			s += "  - {name: " + n + ", namespace: demo, port: 8080, accounts: [spiffe://c2.test/ns/demo/sa/" + n + "]}\n"
		}
		return s
	}
	write(export("a"))
	st, err := ParseScenario("s.yaml", []byte("nodes: [{name: n}]\npods: []\nservices: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := WithExports(fixedSource{st}, []string{path}, 10*time.Millisecond).Watch(ctx)
	next := func() Update {
		t.Helper()
		select {
		case u := <-ch:
			return u
		case <-time.After(10 * time.Second):
			t.Fatal("no update within 10 s")
		}
		return Update{}
	}
	names := func(u Update) string {
		if u.State == nil {
			return "<no state>"
		}
		var out []string
		for _, r := range u.State.Remote {
			out = append(out, r.Name)
		}
		return strings.Join(out, ",")
	}
	if u := next(); u.Err != nil || names(u) != "a" {
		t.Fatalf("first update %q, %v; want remote a", names(u), u.Err)
	}
	write(export("a", "b"))
	if u := next(); u.Err != nil || names(u) != "a,b" {
		t.Fatalf("after the change %q, %v; want a,b", names(u), u.Err)
	}
	write("cluster: c2\ngateway: nonsense\n")
	if u := next(); u.Err == nil || !strings.Contains(u.Err.Error(), "last good content stays") {
		t.Fatalf("a broken export gave %q, %v; want its error", names(u), u.Err)
	}
	if u := next(); u.Err != nil || names(u) != "a,b" {
		t.Fatalf("after the broken export %q, %v; want the last good a,b kept", names(u), u.Err)
	}
	if st.Remote != nil {
		t.Errorf("the source's own State was changed: %+v", st.Remote)
	}
}
