package importorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/aether-mesh/aether"

// TestRepositoryKeepsTheOrder loads every package of the module, tests'
// imports included, and fails naming each import against the order.
func TestRepositoryKeepsTheOrder(t *testing.T) {
	pkgs := list(t)
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages; the module has far more: the listing is broken", len(pkgs))
	}
	v, err := Check(mod, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range v {
		t.Errorf("%s", x)
	}
}

// TestCheckCatchesEachKind keeps Check able to fail: each import below goes
// against the order in its own way.
func TestCheckCatchesEachKind(t *testing.T) {
	p := func(s string) string { return mod + "/" + s }
	pkgs := []Package{
		{ImportPath: p("rigs/node"), Imports: []string{p("reports/results"), p("mesh/agent")}},
		{ImportPath: p("soak/run"), Imports: []string{p("suites/cluster")}},
		{ImportPath: p("mesh/proxy"), TestImports: []string{p("rigs/node"), p("rigs/netns")}},
		{ImportPath: p("mesh/agent"), Imports: []string{p("rigs/netns"), p("mesh/proxy/internal/proxytest")}},
		{ImportPath: p("rigs/redgreen"), Deps: []string{p("mesh/constants")}},
		{ImportPath: p("mesh/cni"), Imports: []string{p("rigs/proxytest")}, TestImports: []string{p("rigs/proxytest")}},
		{ImportPath: p("reports/render"), Imports: []string{p("soak/grade"), p("elsewhere/x")}},
	}
	v, err := Check(mod, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range v {
		got = append(got, strings.ReplaceAll(x.String(), mod+"/", ""))
	}
	want := []string{
		"mesh/agent imports mesh/proxy/internal/proxytest: a mesh test rig is for tests only; the product must not link it",
		"mesh/agent imports rigs/netns: rigs/ sits above mesh/ in the order",
		"mesh/cni imports rigs/proxytest: rigs/ sits above mesh/ in the order",
		"mesh/proxy imports in its tests rigs/node: rigs/ sits above mesh/ in the order",
		"reports/render imports elsewhere/x: top folder \"elsewhere\" has no place in the order",
		"rigs/node imports reports/results: reports/ sits above rigs/ in the order",
		"rigs/redgreen imports mesh/constants: a kit package mesh's tests use must not depend on mesh",
		"soak/run imports suites/cluster: suites/ sits beside soak/ in the order",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := Check(mod, []Package{{ImportPath: p("docs/x")}}); err == nil || !strings.Contains(err.Error(), `"docs"`) {
		t.Errorf("a package in an unranked top folder: got %v, want an error naming the folder", err)
	}
}

// list runs `go list -json` over the module from its root.
func list(t *testing.T) []Package {
	t.Helper()
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Fatalf("the test must run from reports/importorder, two folders below go.mod: %v", err)
	}
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Deps,Error", mod+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Package
			Error *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: package %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p.Package)
	}
	return pkgs
}
