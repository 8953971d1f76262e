// Command aether-gate reads the latest suite results and says whether a build
// may ship: it prints every suite with its verdict and exits 0 only when each
// one passed.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

func main() {
	dir := flag.String("dir", "reports/latest", "report directory written by `make gate`")
	flag.Parse()
	os.Exit(run(*dir))
}

func run(dir string) int {
	files, err := filepath.Glob(filepath.Join(dir, "suites", "*.json"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "aether-gate: %v\n", err)
		return 2
	}
	sort.Strings(files)
	if len(files) == 0 {
		fmt.Fprintf(os.Stderr, "aether-gate: FAIL: no suite results under %s/suites: nothing was proven\n", dir)
		return 1
	}
	failed := 0
	for _, f := range files {
		r, err := redgreen.Load(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "aether-gate: %v\n", err)
			failed++
			continue
		}
		fmt.Println(r.Table())
		if r.Verdict != redgreen.Pass {
			failed++
		}
	}
	if failed > 0 {
		fmt.Printf("aether-gate: FAIL: %d of %d suite(s) did not pass\n", failed, len(files))
		return 1
	}
	fmt.Printf("aether-gate: PASS: %d suite(s) passed\n", len(files))
	return 0
}
