package cni

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
)

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkAddDel measures, side by side in one run and on the same pod,
// the rig's own ptp-style setup (veth, addresses, default routes, dual
// stack) and the plugin's ADD and DEL in tproxy mode. It reports medians,
// the ADD/ptp ratio (target: at most 3), the kernel round trips per ADD as
// the installer counts them, and the nftables transactions per ADD as the
// kernel's ruleset generation counts them (target: exactly 1).
func BenchmarkAddDel(b *testing.B) {
	privileged.Require(b)
	node, err := netns.Create("bench-node")
	if err != nil {
		b.Fatal(err)
	}
	pod, err := netns.Create("bench-pod")
	if err != nil {
		_ = node.Delete()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = pod.Delete()
		_ = node.Delete()
		if err := netns.LeakCheck(); err != nil {
			b.Error(err)
		}
	})
	const id = 250
	p := &podNet{pod: pod, node: node}
	var ptp, adds, dels []time.Duration
	var roundTrips, nftTx, kernelTx int
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := p.wire(id, true); err != nil {
			b.Fatal(err)
		}
		ptp = append(ptp, time.Since(t0))

		args := cmdArgs(pod.Path, netConf("1.1.0", prevResult(pod.Path, p.addrs), nil))
		gen0, err := nftGeneration(pod)
		if err != nil {
			b.Fatal(err)
		}
		stats := &Stats{}
		t1 := time.Now()
		if _, err := add(args, stats); err != nil {
			b.Fatal(err)
		}
		adds = append(adds, time.Since(t1))
		gen1, err := nftGeneration(pod)
		if err != nil {
			b.Fatal(err)
		}
		roundTrips += stats.RoundTrips()
		nftTx += stats.NFTTransactions
		kernelTx += int(gen1 - gen0)

		t2 := time.Now()
		if err := del(args, nil); err != nil {
			b.Fatal(err)
		}
		dels = append(dels, time.Since(t2))

		// Untimed: drop the veth (its peer, addresses and routes go with
		// it) so the next iteration wires the pod afresh.
		h, err := node.Handle()
		if err != nil {
			b.Fatal(err)
		}
		l, err := h.LinkByName(fmt.Sprintf("vp%d", id))
		if err == nil {
			err = h.LinkDel(l)
		}
		h.Close()
		if err != nil {
			b.Fatalf("failed to delete the bench veth: %v", err)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	ratio := float64(median(adds)) / float64(median(ptp))
	b.ReportMetric(float64(median(ptp).Microseconds()), "ptp-µs")
	b.ReportMetric(float64(median(adds).Microseconds()), "add-µs")
	b.ReportMetric(float64(median(dels).Microseconds()), "del-µs")
	b.ReportMetric(ratio, "add/ptp")
	b.ReportMetric(float64(roundTrips)/n, "roundtrips/add")
	b.ReportMetric(float64(nftTx)/n, "nft-tx/add")
	b.ReportMetric(float64(kernelTx)/n, "kernel-nft-gen/add")
	if kernelTx != b.N {
		b.Errorf("the kernel counted %d nftables transactions over %d ADDs, want exactly one each", kernelTx, b.N)
	}
}
