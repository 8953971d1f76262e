package provider

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
)

// Rig is a suite's rig as the shared steps need it: the provider it runs
// on, and how it tears down every cluster it brought up.
type Rig interface {
	Provider() cluster.Provider
	Close() error
}

// RedGreen declares, inside a suite's Ordered, ContinueOnFailure
// Describe, the steps every suite shares: bring the rig up through
// Suite.Setup (a suite that cannot start tells the gate why); then each
// case as its own spec, named "<case> (<role>)", controls first, so that
// one case can be focused (go test ./suites/udproute/ -ginkgo.focus
// selection-tproxy) or rerun; write the result (its table printed) as the
// last case ends; tear the rig down (with the leak check on netns) and
// require the suite's verdict. A case's spec fails when its row is not as
// expected; the subjects after a control that did not show its signature
// still run (ContinueOnFailure) and report, and the suite is BROKEN_RIG.
// A run that skipped a case (focused) writes its result marked partial,
// which the gate refuses, and requires only the rows it ran. The returned
// accessors give the suite's own specs (its broken-rig test, a benchmark)
// the rig and the result (the rows recorded so far until it is written).
//
// The specs are declared before the rig exists, so the case names and
// roles are read from cases given the zero R: cases must only capture the
// rig in its cases' Run, never use it while it builds them.
func RedGreen[R Rig](suite redgreen.Suite, newRig func() (R, error), cases func(R) []redgreen.Case) (rig func() R, result func() redgreen.Result) {
	var (
		r       R
		up      bool
		run     *redgreen.Runner
		res     redgreen.Result
		written bool
	)
	var zero R
	plan := redgreen.Suite{Cases: cases(zero)}.Ordered()

	finish := func() {
		res = run.Finish(context.Background())
		written = true
		GinkgoWriter.Println(res.Table())
		Expect(res.Write("")).To(Succeed())
	}

	BeforeAll(func(ctx SpecContext) {
		err := suite.Setup(func() (err error) {
			r, err = newRig()
			up = err == nil
			if err != nil {
				return err
			}
			// The stamp names the mesh binaries the clusters run, hashed
			// before any case runs.
			suite.Binaries, err = r.Provider().Binaries()
			return err
		})
		if !up || r.Provider().Name() == cluster.Netns {
			privileged.Require(GinkgoT())
		}
		Expect(err).NotTo(HaveOccurred())

		suite.Cases = cases(r)
		Expect(names(suite.Ordered())).To(Equal(names(plan)), "the cases the rig built are not the ones the specs were declared for")
		// The gate prints each row as it is recorded.
		run = redgreen.Start(redgreen.Announcing(ctx), suite)
	}, NodeTimeout(10*time.Minute))

	for _, c := range plan {
		It(fmt.Sprintf("%s (%s)", c.Name, c.Role), func(ctx SpecContext) {
			row, err := run.Case(ctx, c.Name)
			if err != nil {
				Skip(err.Error())
			}
			if run.Done() {
				finish()
			}
			By(fmt.Sprintf("%s (%s): %s", row.Name, row.Role, row.Observed))
			what := "subject"
			if row.Role == redgreen.Control {
				what = "control (the suite is BROKEN_RIG)"
			}
			Expect(row.Matched).To(BeTrue(), "%s %s: expected %s, observed %s: %s", what, row.Name, row.Expected, row.Observed, row.Reason)
		}, NodeTimeout(10*time.Minute))
	}

	AfterAll(func() {
		if !up {
			return
		}
		// A run that skipped a case (focused, or cut short) is written
		// here, marked partial or interrupted.
		if run != nil && !written {
			finish()
		}
		Expect(r.Close()).To(Succeed())
		if r.Provider().Name() == cluster.Netns {
			Expect(netns.LeakCheck()).To(Succeed())
		}
		// A BeforeAll that failed after the rig came up ran no case; its
		// failure is already the spec's.
		if run != nil && res.Partial == "" {
			Expect(res.Err()).NotTo(HaveOccurred())
		}
	})

	return func() R { return r }, func() redgreen.Result {
		if written || run == nil {
			return res
		}
		return run.Rows()
	}
}

func names(cs []redgreen.Case) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s (%s)", c.Name, c.Role))
	}
	return out
}
