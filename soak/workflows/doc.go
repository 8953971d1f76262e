// Package workflows checks, offline, the GitHub Actions workflows beside
// .ci/run: privileged `make test` on every push, the nightly soak with its
// reports kept, and `make e2e` where there is a container engine. Each is
// decoded strictly, and every make target a step runs must be one the
// Makefile has.
package workflows
