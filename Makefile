# aether proving ground. `make gate` and `make test` are the two set-up-free
# entry points; everything else is listed by `make help`.

GO        ?= go
REPORTS   ?= reports/latest
# Packages whose tests are red-then-green suites on the embedded netns
# cluster; `make gate` runs them and collects their results.
SUITES    ?= ./rigs/phase0/... ./mesh/cni/... ./suites/...
# The suites each of which must have written a result for the gate to pass.
GATE_SUITES ?= phase0,cni-capture,udproute,mtls,eastwest,mtlspool,lifecycle,multicluster
TEST_TIMEOUT ?= 25m
# The suites `make suites` runs, each of which must write a result.
SUITES_ONLY ?= udproute,mtls,eastwest,mtlspool,lifecycle,multicluster
# The suites `make e2e` runs on kind (packages under suites/ whose TestMain
# is suites/provider.Main; those on provider.EmbeddedMain need the embedded
# netns cluster), each of which must write a result.
E2E_SUITES ?= udproute,mtls,eastwest
# The local soak (aether-soak run): its length, the smoke's, and extra
# agent flags (a test-only control soaks a build broken on purpose, e.g.
# SOAK_AGENT_FLAGS=--test-only-twin-shares-base-eds).
SOAK_DURATION ?= 10m
SOAK_SMOKE_DURATION ?= 2m
SOAK_AGENT_FLAGS ?=
SOAK_RUN_ARGS = $(foreach f,$(SOAK_AGENT_FLAGS),-agent-flag=$(f))
# The long soak (make soak-long): an hour on the four-node scenario, at
# least a million liveness probes (SOAK_LONG_PROBE_RATE over its four
# prober pods), a network fault in every gap, an ABBA pair every
# SOAK_LONG_PAIR_EVERY, and the leak gates. SOAK_LONG_DURATION=10m is a
# trial of the same design.
SOAK_LONG_DURATION ?= 60m
SOAK_LONG_PROBE_RATE ?= 300
SOAK_LONG_PAIR_EVERY ?= 5m
SOAK_LONG_ARGS = -scenario fixtures/scenarios/soak-long.yaml -duration $(SOAK_LONG_DURATION) \
	-probe-rate $(SOAK_LONG_PROBE_RATE) -pair-every $(SOAK_LONG_PAIR_EVERY) -network-every 1 -leaks $(SOAK_RUN_ARGS)

# The build every result records. `go test` binaries carry no VCS stamp, so
# make passes the checkout's revision and whether it had uncommitted changes.
# Outside a git checkout both are empty, every result says it has no build,
# and the gate refuses them.
BUILD_REVISION := $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DIRTY := $(if $(BUILD_REVISION),$(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true))
export AETHER_BUILD_REVISION := $(BUILD_REVISION)
export AETHER_BUILD_DIRTY := $(BUILD_DIRTY)
# aether-gate's build flags: the checkout's revision, and dirty results
# accepted only when the checkout itself is dirty (the verdict line then
# says the build is not releasable).
GATE_BUILD = $(if $(BUILD_REVISION),-build $(BUILD_REVISION)) $(if $(filter true,$(BUILD_DIRTY)),-allow-dirty)

.PHONY: help test gate rigs suites e2e kind-check kind-image soak soak-run soak-smoke soak-long bench report build vet clean

help:
	@echo "make gate    run every local red-then-green suite and the soak smoke, write $(REPORTS)/, print the verdict"
	@echo "make test    all tests (unit, privileged rigs, suites); as root nothing skips"
	@echo "make rigs    run the Phase 0 rig and print its table"
	@echo "make suites  run the ginkgo suites on the embedded netns cluster and print their tables"
	@echo "make e2e     the suites on kind (needs a container engine; kind itself is a Go module)"
	@echo "make kind-check  can this machine's container engine host kind's nodes? (root; builds a probe image once, ~3 min)"
	@echo "make kind-image  build the kind node image offline (root; ~25 min the first time, then cached); make e2e builds it too"
	@echo "make soak    grade the recorded soaks in fixtures/soaks"
	@echo "make soak-run    run a local soak on the embedded netns cluster ($(SOAK_DURATION); SOAK_DURATION=…), grade it into reports/runs/<run>/, update reports/index.html"
	@echo "make soak-smoke  the same for $(SOAK_SMOKE_DURATION) (make gate runs it and requires its grade)"
	@echo "make soak-long   $(SOAK_LONG_DURATION) on four nodes (34 pods, 16 services): $(SOAK_LONG_PROBE_RATE) probes/s, every chaos kind and network fault, the leak gates (SOAK_LONG_DURATION=…)"
	@echo "make bench   the side-by-side benchmark on the netns cluster: direct, the mesh (h2, h3, L4 TCP, UDP), HAProxy and nginx; writes reports/bench/<run>/ (root, ~7 min)"
	@echo "make report  render the reports (HTML, JSON, JUnit) and the nightly index"
	@echo "make build   build every binary into bin/"
	@echo "make vet     go vet every package (make test runs it first)"
	@echo "make clean   remove bin/ and what gate, suites, soak and report wrote under reports/"

build:
	$(GO) build -o bin/ ./mesh/cmd/... ./rigs/cmd/... ./reports/cmd/... ./suites/cmd/...

# aether-agent's test-only controls build only with -tags aethercontrols
# (as the rigs build it), so that file set is vetted too.
vet:
	$(GO) vet ./...
	$(GO) vet -tags aethercontrols ./mesh/cmd/aether-agent/

test: vet
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

# The gate and the grader are built, not `go run`: go run adds its own
# "exit status 1" to a failing verdict. A SOAK that names no file is refused
# before the suites run, not after. Each step runs under `aether-gate
# watch`: its output goes to its log, and the terminal gets a line per
# case and per suite as each is recorded, and the soak's figures while it
# runs; ginkgo is told not to colour the log. The soak smoke runs after the
# suites, not beside them, so its CPU windows do not measure the suites;
# its grade goes to $(REPORTS)/soaks, where the gate requires it. The
# suites step is -strict: its packages' exit (a leak check, a test outside
# the tables) fails the gate too. The gate's last lines say where the
# tables are ($(REPORTS)/gate.html, $(REPORTS)/gate.log) and the total time,
# counted from GATE_STARTED.
GATE_STARTED := $(shell date +%s)
GATE_WATCH = $(REPORTS)/bin/aether-gate watch -dir $(REPORTS) -started $(GATE_STARTED)
gate:
	@if [ -n "$(SOAK)" ] && [ ! -f "$(SOAK)" ]; then \
		echo "make gate: SOAK=$(SOAK): no such manifest; nothing was run"; exit 2; fi
	@rm -rf $(REPORTS) && mkdir -p $(REPORTS)/suites
	@echo "make gate: building the gate; then the suites, the $(SOAK_SMOKE_DURATION) soak smoke and the verdict, into $(REPORTS)/"
	@$(GO) build -o $(REPORTS)/bin/ ./reports/cmd/aether-gate ./reports/cmd/aether-soak
	@$(GATE_WATCH) -name suites -strict -log $(REPORTS)/suites.log -- \
		env GINKGO_NO_COLOR=TRUE AETHER_REPORT_DIR=$(CURDIR)/$(REPORTS)/suites $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(SUITES)
	@$(GATE_WATCH) -name "soak smoke" -log $(REPORTS)/soak-smoke.log -- \
		$(REPORTS)/bin/aether-soak run -duration $(SOAK_SMOKE_DURATION) -gate-out $(REPORTS)/soaks $(SOAK_RUN_ARGS)
	@if [ -n "$(SOAK)" ]; then $(REPORTS)/bin/aether-soak grade -suites $(REPORTS)/suites \
		-out $(REPORTS)/soaks $(SOAK) > /dev/null || true; fi
	@$(REPORTS)/bin/aether-gate -dir $(REPORTS) -require $(GATE_SUITES) -require-soak $(GATE_BUILD) -started $(GATE_STARTED)

rigs:
	$(GO) run ./rigs/cmd/aether-phase0

# The suites' results go to their own directory, so a `make gate` run's
# reports stay as they were; the gate then prints their red-then-green tables.
suites:
	@rm -rf $(REPORTS)/suites-only && mkdir -p $(REPORTS)/suites-only/suites
	@$(GO) build -o $(REPORTS)/suites-only/bin/ ./reports/cmd/aether-gate
	@AETHER_REPORT_DIR=$(CURDIR)/$(REPORTS)/suites-only/suites $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./suites/... -v; \
		rc=$$?; $(REPORTS)/suites-only/bin/aether-gate -dir $(REPORTS)/suites-only -require $(SUITES_ONLY) $(GATE_BUILD) || rc=1; exit $$rc

# The suites on kind. aether-e2e imports nothing heavy, so without a
# container engine it is built and fails within seconds, naming what is
# missing; with one, each suite's TestMain creates a kind cluster (two
# workers), loads the images, installs the mesh, runs, exports the logs and
# deletes the cluster. The gate then prints the suites' tables; a suite
# that wrote no result fails both.
e2e:
	@rm -rf $(REPORTS)/e2e && mkdir -p $(REPORTS)/e2e
	@$(GO) build -o $(REPORTS)/e2e/bin/ ./suites/cmd/aether-e2e
	@$(REPORTS)/e2e/bin/aether-e2e -out $(REPORTS)/e2e -suites $(E2E_SUITES)
	@$(GO) build -o $(REPORTS)/e2e/bin/ ./reports/cmd/aether-gate
	@$(REPORTS)/e2e/bin/aether-gate -dir $(REPORTS)/e2e -require $(E2E_SUITES) $(GATE_BUILD)

# The environment check: a container with kind's node flags, and what a
# node needs inside it (systemd, /dev/kmsg, cgroups, nftables, a nested
# container). It exits 1 when kind's own flags cannot host a node.
kind-check:
	@$(GO) build -o bin/ ./rigs/cmd/aether-kind-check
	@bin/aether-kind-check

# The kind node image (rigs/kind/nodeimage): progress on stderr, the
# image's reference on stdout.
kind-image:
	@$(GO) build -o bin/ ./rigs/cmd/aether-kind-image
	@bin/aether-kind-image

soak:
	$(GO) run ./reports/cmd/aether-soak grade-all fixtures/soaks

# A local soak: built (a go run would add its own exit line), run, graded
# into reports/runs/<run>/ beside the index. It exits 1 when the soak did
# not pass, naming the gates.
soak-run soak-smoke:
	@$(GO) build -o bin/ ./reports/cmd/aether-soak
	bin/aether-soak run -duration $(if $(filter soak-smoke,$@),$(SOAK_SMOKE_DURATION),$(SOAK_DURATION)) $(SOAK_RUN_ARGS)

# The long soak: the same runner on the four-node scenario, graded into
# reports/runs/<run>/ with its leak gates; it exits 1 when it did not pass.
soak-long:
	@$(GO) build -o bin/ ./reports/cmd/aether-soak
	bin/aether-soak run $(SOAK_LONG_ARGS)

# The benchmark (soak/bench/README.md): built, not go run, so it exits with
# its own status; BENCH_ARGS passes flags (e.g. -v, -paced 30s).
BENCH_ARGS ?=
bench:
	@$(GO) build -o bin/ ./reports/cmd/aether-bench
	bin/aether-bench -out reports/bench $(BENCH_ARGS)

report:
	$(GO) run ./reports/cmd/aether-report -out reports

clean:
	rm -rf bin $(REPORTS) reports/runs reports/index.html
