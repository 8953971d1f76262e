package run

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// scrape is one Prometheus text exposition: the samples of one metric,
// keyed by their label text ("code=\"200\",listener=\"…\"").
type scrape map[string]map[string]float64

// parseText reads the samples of the named metrics from a text exposition.
// A sample line that cannot be read is an error: a counter skipped in
// silence would read as one that did not grow.
func parseText(body string, names ...string) (scrape, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := scrape{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, rest, labels := text, "", ""
		if i := strings.IndexAny(text, "{ "); i >= 0 {
			name, rest = text[:i], text[i:]
		}
		if !want[name] {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return nil, fmt.Errorf("metrics line %d: %q: unterminated labels", line, text)
			}
			labels, rest = rest[1:end], rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("metrics line %d: %q: no value", line, text)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %q: %w", line, text, err)
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][labels] = v
	}
	return out, sc.Err()
}

// label returns the value of label k in a label text, or "".
func label(labels, k string) string {
	i := strings.Index(","+labels, ","+k+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(k)+2:]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// where keeps the samples whose labels satisfy keep.
func where(samples map[string]float64, keep func(labels string) bool) map[string]float64 {
	out := map[string]float64{}
	for l, v := range samples {
		if keep(l) {
			out[l] = v
		}
	}
	return out
}
