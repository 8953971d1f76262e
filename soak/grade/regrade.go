package grade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/manifest"
)

// Regrade re-runs the grader on the manifest and the evidence a grade says
// it was graded from, and returns the re-grade with every way the grade
// disagrees with it. Each problem begins with gradePath and names the file
// (the manifest, an evidence file) or the gate it concerns. A grade is a
// claim; its evidence decides. The re-grade is nil when there is nothing
// to re-grade from: the grade binds no evidence, or its manifest or an
// evidence file is missing or no longer what was graded.
//
// The grade's build stamp is not compared: it names the grader, not the
// soak, and the release gate holds it to the gated build apart.
func Regrade(gradePath string, g *Grade) (*Grade, []string) {
	say := func(format string, a ...any) string { return gradePath + ": " + fmt.Sprintf(format, a...) }
	if g.Manifest == "" {
		return nil, []string{say("names no manifest it was graded from, so nothing can re-grade it")}
	}
	if g.ManifestSHA256 == "" {
		return nil, []string{say("binds no sha256 of its manifest %s or its evidence, so nothing shows it was graded from them; grade the soak again (aether-soak grade)", g.Manifest)}
	}
	m, err := manifest.Load(g.Manifest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, []string{say("manifest %s, which it was graded from, is missing", g.Manifest)}
	case err != nil:
		return nil, []string{say("manifest %s, which it was graded from, cannot be read: %v", g.Manifest, err)}
	case m.SHA256 != g.ManifestSHA256:
		return nil, []string{say("manifest %s has sha256 %s, not the %s it was graded from: it was altered since", g.Manifest, m.SHA256, g.ManifestSHA256)}
	}
	var problems []string
	for _, f := range g.Evidence {
		p := m.Resolve(f.Path)
		sum, err := results.FileSHA256(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, say("evidence file %s (read by %s) is missing", p, gateList(f.Gates)))
		case err != nil:
			problems = append(problems, say("evidence file %s (read by %s) cannot be read: %v", p, gateList(f.Gates), err))
		case sum != f.SHA256:
			problems = append(problems, say("evidence file %s (read by %s) has sha256 %s, not the %s it was graded from: it was altered since", p, gateList(f.Gates), sum, f.SHA256))
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	re, err := Run(m)
	if err != nil {
		return nil, []string{say("re-grading soak %s from manifest %s failed: %v", g.Soak, g.Manifest, err)}
	}
	return re, diff(say, g, re)
}

func gateList(gates []string) string {
	if len(gates) == 0 {
		return "no gate"
	}
	q := make([]string, len(gates))
	for i, n := range gates {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return "gate " + q[0]
	}
	return "gates " + strings.Join(q, ", ")
}

// diffLimit is how many differences one gate or field reports before it
// says how many more there are: a timeline re-graded to other figures
// differs in every point, and the first few say what happened.
const diffLimit = 3

// diff compares the grade with its re-grade field by field, as their JSON
// reads, and gates by name, so a gate deleted, added or re-graded is named.
func diff(say func(string, ...any) string, g, re *Grade) []string {
	given, want := tree(g), tree(re)
	delete(given, "build")
	delete(want, "build")
	givenGates, _ := given["gates"].([]any)
	wantGates, _ := want["gates"].([]any)
	delete(given, "gates")
	delete(want, "gates")

	var out []string
	for _, k := range keys(given, want) {
		var d []string
		walk(k, given[k], want[k], &d)
		out = append(out, capped(d, func(s string) string { return say("%s", s) }, k)...)
	}

	byName := func(gates []any) (map[string]any, []string) {
		m := map[string]any{}
		var order []string
		for _, gt := range gates {
			name, _ := gt.(map[string]any)["name"].(string)
			if _, dup := m[name]; dup {
				out = append(out, say("gate %q appears more than once", name))
				continue
			}
			m[name] = gt
			order = append(order, name)
		}
		return m, order
	}
	gm, gOrder := byName(givenGates)
	wm, wOrder := byName(wantGates)
	regraded := map[string]Gate{}
	for _, gt := range re.Gates {
		regraded[gt.Name] = gt
	}
	for _, name := range wOrder {
		if _, ok := gm[name]; !ok {
			gt := regraded[name]
			out = append(out, say("gate %q is missing from the grade; its evidence grades it %s (%s)", name, gt.Verdict, gt.Figure))
			continue
		}
		var d []string
		walk("", gm[name], wm[name], &d)
		out = append(out, capped(d, func(s string) string { return say("gate %q: %s", name, s) }, "gate "+name)...)
	}
	for _, name := range gOrder {
		if _, ok := wm[name]; !ok {
			out = append(out, say("gate %q is not one its manifest %s grades: its evidence grades no such gate", name, g.Manifest))
		}
	}
	return out
}

func capped(d []string, f func(string) string, what string) []string {
	var out []string
	for i, s := range d {
		if i == diffLimit {
			out = append(out, f(fmt.Sprintf("and %d more difference(s) under %s", len(d)-diffLimit, what)))
			break
		}
		out = append(out, f(s))
	}
	return out
}

// tree is g as its JSON reads, numbers kept as their text.
func tree(g *Grade) map[string]any {
	b, err := json.Marshal(g)
	if err != nil {
		// A Grade holds only encodable types.
		panic(fmt.Sprintf("grade %s does not encode: %v", g.Soak, err))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var t map[string]any
	if err := dec.Decode(&t); err != nil {
		panic(fmt.Sprintf("grade %s does not decode: %v", g.Soak, err))
	}
	return t
}

func keys(a, b map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// walk appends a line for every leaf where the grade (a) and the re-grade
// (b) differ, each naming its path.
func walk(path string, a, b any, out *[]string) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			for _, k := range keys(av, bv) {
				walk(join(k), av[k], bv[k], out)
			}
			return
		}
	case []any:
		bv, ok := b.([]any)
		if ok && len(av) == len(bv) {
			for i := range av {
				walk(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out)
			}
			return
		}
		if ok {
			*out = append(*out, fmt.Sprintf("%s has %d entries in the grade, but its evidence grades %d", path, len(av), len(bv)))
			return
		}
	default:
		if fmt.Sprint(a) == fmt.Sprint(b) && sameKind(a, b) {
			return
		}
	}
	*out = append(*out, fmt.Sprintf("%s is %s in the grade, but its evidence grades it %s", path, showValue(a), showValue(b)))
}

func sameKind(a, b any) bool { return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) }

func showValue(v any) string {
	if v == nil {
		return "absent"
	}
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
