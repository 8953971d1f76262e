package registry

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const base = `
nodes: [{name: n1}]
serviceAccounts: [{name: app, namespace: ns}]
pods:
  - {name: p, namespace: ns, node: n1, ip: 10.244.0.1, serviceAccount: app, labels: {app: a}}
  - {name: q, namespace: ns, node: n1, ip: 10.244.0.2, labels: {app: a}, ready: false}
services:
  - {name: s, namespace: ns, clusterIP: 10.96.0.1, selector: {app: a}, ports: [{name: d, port: 53, targetPort: 5353, protocol: UDP}]}
`

func TestScenarioErrorsNameFileObjectField(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		wants []string
	}{
		{"bad protocol", strings.Replace(base, "protocol: UDP", "protocol: SCTP", 1),
			[]string{"bad.yaml", `service "ns/s"`, "field ports[0].protocol", `"SCTP"`}},
		{"appProtocol on UDP", strings.Replace(base, "protocol: UDP", "protocol: UDP, appProtocol: http", 1),
			[]string{`service "ns/s"`, "field ports[0].appProtocol", "needs protocol TCP"}},
		{"unknown appProtocol", strings.Replace(base, "protocol: UDP", "appProtocol: grpc", 1),
			[]string{`service "ns/s"`, "field ports[0].appProtocol", `"grpc"`}},
		{"bad clusterIP", strings.Replace(base, "clusterIP: 10.96.0.1", "clusterIP: 10.96.0.999", 1),
			[]string{"bad.yaml", `service "ns/s"`, "field clusterIP"}},
		{"unknown node", strings.Replace(base, "node: n1, ip: 10.244.0.1", "node: n9, ip: 10.244.0.1", 1),
			[]string{"bad.yaml", `pod "ns/p"`, "field node", `"n9"`}},
		{"unknown service account", strings.Replace(base, "serviceAccount: app", "serviceAccount: nobody", 1),
			[]string{`pod "ns/p"`, "field serviceAccount"}},
		{"port out of range", strings.Replace(base, "targetPort: 5353", "targetPort: 70000", 1),
			[]string{`service "ns/s"`, "field ports[0].targetPort", "70000"}},
		{"duplicate pod ip", strings.Replace(base, "ip: 10.244.0.2", "ip: 10.244.0.1", 1),
			[]string{`pod "ns/q"`, "field ip", "ns/p"}},
		{"clusterIP that is a pod's ip", strings.Replace(base, "clusterIP: 10.96.0.1", "clusterIP: 10.244.0.2", 1),
			[]string{`bad.yaml: service "ns/s": field clusterIP: 10.244.0.2 is the IP of pod ns/q`}},
		{"route weight", base + `
udpRoutes:
  - metadata: {name: r, namespace: ns}
    spec: {parentRefs: [{kind: Service, name: s}], rules: [{backendRefs: [{name: s, weight: -1}]}]}
`, []string{`udpRoute "ns/r"`, "field spec.rules[0].backendRefs[0].weight"}},
		{"endpoint weight", base + `
endpoints: [{service: s, namespace: ns, addresses: [{ip: 10.244.0.9, weight: 0}]}]
`, []string{`endpoints "ns/s"`, "field addresses[0].weight"}},
		{"unknown field", base + "  - {name: t, namespace: ns, clusterIP: 10.96.0.2, prots: []}\n",
			[]string{`bad.yaml: service "ns/t": field prots: unknown field`}},
		{"unknown nested field", strings.Replace(base, "protocol: UDP", "protocl: UDP", 1),
			[]string{`bad.yaml: service "ns/s": field ports[0].protocl: unknown field`}},
		{"field in the wrong case", strings.Replace(base, "protocol: UDP", "Protocol: UDP", 1),
			[]string{`bad.yaml: service "ns/s": field ports[0].Protocol: unknown field (did you mean protocol?)`}},
		{"unknown field deep in a route", base + `
udpRoutes:
  - metadata: {name: r, namespace: ns}
    spec: {parentRefs: [{kind: Service, name: s}], rules: [{backendRefs: [{name: s, wieght: 1}]}]}
`, []string{`bad.yaml: udpRoute "ns/r": field spec.rules[0].backendRefs[0].wieght: unknown field`}},
		{"unknown field of an endpoint", base + `
endpoints: [{service: s, namespace: ns, addresses: [{ip: 10.244.0.9, wait: 2}]}]
`, []string{`bad.yaml: endpoints "ns/s": field addresses[0].wait: unknown field`}},
		{"unknown field of a node and of a pod without a namespace", strings.Replace(
			strings.Replace(base, "nodes: [{name: n1}]", "nodes: [{name: n1, zone: a}]", 1),
			"pods:\n", "pods:\n  - {name: r, node: n1, ip: 10.244.0.3, lables: {}}\n", 1),
			[]string{`bad.yaml: node "n1": field zone: unknown field`, `bad.yaml: pod "default/r": field lables: unknown field`}},
		{"unknown field of an unnamed object", base + "  - {clusterIP: 10.96.0.2, prots: []}\n",
			[]string{`bad.yaml: service "services[1]": field prots: unknown field`}},
		{"unknown top-level key", base + "servics: []\n",
			[]string{`bad.yaml: field servics: unknown field`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := ParseScenario("bad.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatalf("broken scenario accepted: %+v", st)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Control: the unbroken base parses, so each case failed on its edit.
	if _, err := ParseScenario("base.yaml", []byte(base)); err != nil {
		t.Fatalf("control scenario rejected: %v", err)
	}
}

func TestScenarioHTTPPort(t *testing.T) {
	st, err := ParseScenario("http.yaml", []byte(strings.Replace(base, "{name: d, port: 53, targetPort: 5353, protocol: UDP}",
		"{name: d, port: 53, targetPort: 5353, protocol: UDP}, {name: raw, port: 9000}, {name: web, port: 8080, targetPort: 7080, appProtocol: http}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	sp, ok := st.Services[0].HTTPPort()
	if !ok || sp.Name != "web" || sp.TargetPort != 7080 {
		t.Errorf("HTTPPort = %+v, %v; want web 8080→7080", sp, ok)
	}
}

func TestScenarioDerivesEndpointsAndDependencies(t *testing.T) {
	st, err := ParseScenario("base.yaml", []byte(base+`
  - {name: t, namespace: ns, clusterIP: 10.96.0.2, ports: [{port: 80}]}
endpoints: [{service: t, namespace: ns, addresses: [{pod: x, ip: 10.244.0.9, node: n1, weight: 4}]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	s := Key{"ns", "s"}
	eps := st.Endpoints[s]
	if len(eps) != 2 || len(st.ReadyEndpoints(s)) != 1 || st.ReadyEndpoints(s)[0].Pod != "p" {
		t.Fatalf("selector endpoints = %+v, want p ready and q not ready", eps)
	}
	if e := st.Endpoints[Key{"ns", "t"}]; len(e) != 1 || e[0].Weight != 4 {
		t.Fatalf("explicit endpoints = %+v, want one with weight 4", e)
	}
	if sp, _ := st.Services[0].FirstPort(ProtocolUDP); sp.TargetPort != 5353 {
		t.Fatalf("UDP targetPort = %d, want 5353", sp.TargetPort)
	}
	if d := st.DependencySet("n1"); len(d) != 2 {
		t.Fatalf("dependency set without dependsOn = %v, want every service", d)
	}

	st2, err := ParseScenario("deps.yaml", []byte(strings.Replace(base, "labels: {app: a}, ready: false", "labels: {app: a}, ready: false, dependsOn: [s.ns]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	// p declares nothing, so it still needs everything; the union wins.
	if d := st2.DependencySet("n1"); !d[s] {
		t.Fatalf("dependency set = %v, want s", d)
	}
	if d := st2.DependencySet("n2"); len(d) != 0 {
		t.Fatalf("a node without pods depends on nothing, got %v", d)
	}
}

func TestFileSourceWatchesAndReportsBrokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(path, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch := (&FileSource{Path: path, Interval: 10 * time.Millisecond}).Watch(ctx)
	next := func() Update {
		t.Helper()
		select {
		case u := <-ch:
			return u
		case <-ctx.Done():
			t.Fatal("no update from the file source")
		}
		return Update{}
	}
	if u := next(); u.Err != nil || len(u.State.Services) != 1 {
		t.Fatalf("first update = %+v, want one service", u)
	}

	if err := os.WriteFile(path, []byte(strings.Replace(base, "protocol: UDP", "protocol: QUIC", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	u := next()
	if u.Err == nil || !strings.Contains(u.Err.Error(), path) || !strings.Contains(u.Err.Error(), "ports[0].protocol") {
		t.Fatalf("broken file update = %+v, want an error naming %s and the field", u, path)
	}

	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(base+"  - {name: t, namespace: ns, clusterIP: 10.96.0.2, ports: [{port: 80}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // the rigs' atomic replace
		t.Fatal(err)
	}
	if u := next(); u.Err != nil || len(u.State.Services) != 2 {
		t.Fatalf("update after fix = %+v, want two services", u)
	}
}

// TestScenarioFixturesLoad keeps the strict decoding honest against the
// files that ship: every scenario under fixtures/scenarios loads.
func TestScenarioFixturesLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "fixtures", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenario fixtures found")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if IsClustersFile(data) {
			if _, err := DecodeClusters(f, data); err != nil {
				t.Errorf("fixture rejected: %v", err)
			}
			if _, err := ParseScenario(f, data); err == nil || !strings.Contains(err.Error(), "is a clusters file") {
				t.Errorf("a clusters file read as a scenario gave %v, want it named a clusters file", err)
			}
			continue
		}
		if _, err := LoadScenarioFile(f); err != nil {
			t.Errorf("fixture rejected: %v", err)
		}
	}
}

// TestWaypointed: a service's waypoint label covers its endpoints, a
// pod's own label wins over it, and "none" opts out.
func TestWaypointed(t *testing.T) {
	const scenario = `
nodes: [{name: n}]
pods:
  - {name: a-0, namespace: demo, node: n, ip: 10.244.0.10, labels: {app: a}}
  - {name: b-0, namespace: demo, node: n, ip: 10.244.0.11, labels: {app: b, istio.io/use-waypoint: wp}}
  - {name: c-0, namespace: demo, node: n, ip: 10.244.0.12, labels: {app: c, istio.io/use-waypoint: none}}
services:
  - {name: a, namespace: demo, clusterIP: 10.96.0.10, selector: {app: a}, labels: {istio.io/use-waypoint: wp}, ports: [{port: 80}]}
  - {name: b, namespace: demo, clusterIP: 10.96.0.11, selector: {app: b}, ports: [{port: 80}]}
  - {name: c, namespace: demo, clusterIP: 10.96.0.12, selector: {app: c}, labels: {istio.io/use-waypoint: wp}, ports: [{port: 80}]}
  - {name: d, namespace: demo, clusterIP: 10.96.0.13, selector: {app: a}, labels: {istio.io/use-waypoint: none}, ports: [{port: 80}]}
`
	st, err := ParseScenario("waypoints.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	for svc, want := range map[string]bool{"a": true, "b": true, "c": false, "d": false} {
		if got := st.Waypointed(Key{Namespace: "demo", Name: svc}); got != want {
			t.Errorf("Waypointed(%s) = %v, want %v", svc, got, want)
		}
	}
}
