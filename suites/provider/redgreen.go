package provider

import (
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

// RedGreen declares, inside a suite's Ordered Describe, the steps every
// suite shares: bring the rig up through Suite.Setup (a suite that cannot
// start tells the gate why), run its cases red then green, print and write
// the result; tear the rig down (with the leak check on netns); and require
// every row matched. The returned accessors give the suite's own specs
// (its broken-rig test, a benchmark) the rig and the result.
func RedGreen[R Rig](suite redgreen.Suite, newRig func() (R, error), cases func(R) []redgreen.Case) (rig func() R, result func() redgreen.Result) {
	var (
		r   R
		up  bool
		res redgreen.Result
	)
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
		// The gate prints each row as it is recorded.
		res = redgreen.Run(redgreen.Announcing(ctx), suite)
		GinkgoWriter.Println(res.Table())
		Expect(res.Write("")).To(Succeed())
	}, NodeTimeout(10*time.Minute))

	AfterAll(func() {
		if !up {
			return
		}
		Expect(r.Close()).To(Succeed())
		if r.Provider().Name() == cluster.Netns {
			Expect(netns.LeakCheck()).To(Succeed())
		}
	})

	It("shows the control's signature and every subject green", func() {
		Expect(res.Cases).NotTo(BeEmpty())
		for _, row := range res.Cases {
			By(fmt.Sprintf("%s (%s): %s", row.Name, row.Role, row.Observed))
			Expect(row.Matched).To(BeTrue(), "%s %s: expected %s, observed %s: %s", row.Role, row.Name, row.Expected, row.Observed, row.Reason)
		}
		Expect(res.Err()).NotTo(HaveOccurred())
	})
	return func() R { return r }, func() redgreen.Result { return res }
}
