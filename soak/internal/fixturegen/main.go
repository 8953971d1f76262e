// Command fixturegen writes the recorded-soak fixtures under
// fixtures/soaks: the proposal 038 soaks, reconstructed from the figures the
// proposal publishes, in the shapes the real tools write (Prometheus
// query_range JSON, k6 summaries and --out json lines, pprof CPU profiles).
//
// The output is deterministic (fixed seeds, no wall clock), so
// `go run ./soak/internal/fixturegen -out fixtures/soaks` reproduces the
// committed files byte for byte and a test holds it to that.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/aether-mesh/aether/soak/internal/fixturegen/gen"
)

func main() {
	out := flag.String("out", "fixtures/soaks", "directory to write the soak fixtures into")
	flag.Parse()
	if err := gen.WriteAll(*out); err != nil {
		fmt.Fprintf(os.Stderr, "fixturegen: %v\n", err)
		os.Exit(1)
	}
}
