package mtlspool

import (
	"context"
	"fmt"
	"github.com/aether-mesh/aether/suites/cluster"
	"sync"
	"time"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// unrotated calls api-0's inbound with an SVID of 3 s that nobody
// rotates, before and after it expires.
func unrotated(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "node-b's QUIC inbound (refusals by reason) and api-0's app record", Facts: map[string]any{}}
	c, err := r.cluster(ctx, shipped)
	if err != nil {
		return obs, err
	}
	p, err := r.newProbe(c, "batch-0", "api", true)
	if err != nil {
		return obs, err
	}
	if p.certs, err = r.issue("unrotated-probe", 3*time.Second, time.Time{}); err != nil {
		return obs, err
	}
	_, ferr := p.get(ctx, "/unrotated-first/0", false)
	if err := sleepUntil(ctx, p.certs[0].Leaf.NotAfter.Add(time.Second)); err != nil {
		return obs, err
	}
	before, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	as, aerr := p.get(ctx, "/unrotated-after/0", false)
	after, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	first, err := appXFCC(ctx, c, "api-0", "api", "unrotated-first")
	if err != nil {
		return obs, err
	}
	later, err := appXFCC(ctx, c, "api-0", "api", "unrotated-after")
	if err != nil {
		return obs, err
	}
	obs.Facts["first_err"], obs.Facts["after_err"], obs.Facts["refused"], obs.Facts["after_handshakes"] = errString(ferr), errString(aerr), after.since(before).Refused, as.dials
	obs.Facts["app_first"], obs.Facts["app_after"] = first, later
	obs.Summary = fmt.Sprintf("before expiry: %s, the app saw %s; after: %s, api-0's inbound refused %s, the app saw %s",
		orOK(ferr), toJSON(first), orOK(aerr), toJSON(after.since(before).Refused), toJSON(later))
	return obs, c.Check(ctx)
}

func checkUnrotated(o redgreen.Observation) error {
	ferr, ok1 := o.Facts["first_err"].(string)
	aerr, ok2 := o.Facts["after_err"].(string)
	refused, ok3 := o.Facts["refused"].(counters)
	first, ok4 := o.Facts["app_first"].(map[string]int)
	later, ok5 := o.Facts["app_after"].(map[string]int)
	dials, ok6 := o.Facts["after_handshakes"].(int)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return errNothing
	}
	if ferr != "" || first[spiffeID("unrotated-probe")] != 1 {
		return fmt.Errorf("the SVID was not served before it expired (%q, app %s): nothing to compare", ferr, toJSON(first))
	}
	if aerr == "" || len(later) != 0 {
		return fmt.Errorf("the expired SVID was served (app %s)", toJSON(later))
	}
	if dials < 1 || refused["expired"] != float64(dials) || len(refused) != 1 {
		return fmt.Errorf("api-0's inbound refused %s, want each of the expired SVID's %d handshakes as expired", toJSON(refused), dials)
	}
	return nil
}

// rotation keeps web-0 and batch-0 calling api while a fresh connection
// of the suite's client to api-0 every half second watches for a new
// server certificate; it stops a second after one is seen.
func rotation(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "api-0's app record (every request under its source's ID), node-b's QUIC inbound refusals, the certificate api-0 presents to new connections of the suite's client", Facts: map[string]any{}}
	c, err := r.cluster(ctx, shipped)
	if err != nil {
		return obs, err
	}
	p, err := r.newProbe(c, "batch-0", "api", true)
	if err != nil {
		return obs, err
	}
	if p.certs, err = r.issue("rotation-probe", time.Hour, time.Time{}); err != nil {
		return obs, err
	}
	s0, err := p.get(ctx, "/rotation-watch/0", false)
	if err != nil {
		return obs, err
	}
	before, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	stop := make(chan struct{})
	load := meshLoad(ctx, c, "api", "rotation", stop, "web-0", "batch-0")
	var (
		serials []string
		s1      = s0
		werr    error
	)
	deadline := time.Now().Add(svidTTL + 4*time.Second)
	for i := 1; time.Now().Before(deadline); i++ {
		time.Sleep(500 * time.Millisecond)
		s, err := p.get(ctx, fmt.Sprintf("/rotation-watch/%d", i), false)
		if err != nil {
			werr = err
			break
		}
		serials = append(serials, s.serial)
		if s.serial != s0.serial {
			s1 = s
			time.Sleep(time.Second)
			break
		}
	}
	close(stop)
	sent, codes := load()
	after, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	xfcc, err := appXFCC(ctx, c, "api-0", "api", "rotation")
	if err != nil {
		return obs, err
	}
	obs.Facts["sent"], obs.Facts["codes"], obs.Facts["app_xfcc"], obs.Facts["refused"] = sent, codes, xfcc, after.since(before).Refused
	obs.Facts["serial_before"], obs.Facts["serial_after"], obs.Facts["not_before_moved"], obs.Facts["watch_err"] = s0.serial, s1.serial, s1.notBefore.After(s0.notBefore), errString(werr)
	obs.Summary = fmt.Sprintf("sent %s, answered %v; the app saw %s; api-0's inbound refused %s; api-0's certificate serial %s (NotBefore %s) → %s (NotBefore %s) after %d new connections",
		toJSON(sent), codes, toJSON(xfcc), toJSON(after.since(before).Refused), s0.serial, s0.notBefore.Format(time.TimeOnly), s1.serial, s1.notBefore.Format(time.TimeOnly), len(serials))
	return obs, c.Check(ctx)
}

// meshLoad sends requests from each pod to svc one after another, each
// pod on its own client, until stop; the returned func waits and says
// how many each sent and how they were answered.
func meshLoad(ctx context.Context, c cluster.Cluster, svc, tag string, stop <-chan struct{}, pods ...string) func() (map[string]int, map[int]int) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		sent  = map[string]int{}
		codes = map[int]int{}
	)
	for _, name := range pods {
		p, err := pod(c, name)
		if err != nil {
			mu.Lock()
			codes[0]++
			mu.Unlock()
			continue
		}
		client := meshClient(c, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer client.CloseIdleConnections()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, _, _ := meshGet(ctx, c, client, svc, fmt.Sprintf("/%s/%s/%d", tag, name, i))
				mu.Lock()
				sent[name]++
				codes[code]++
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return func() (map[string]int, map[int]int) {
		wg.Wait()
		return sent, codes
	}
}

func checkRotation(o redgreen.Observation) error {
	sent, ok1 := o.Facts["sent"].(map[string]int)
	codes, ok2 := o.Facts["codes"].(map[int]int)
	xfcc, ok3 := o.Facts["app_xfcc"].(map[string]int)
	refused, ok4 := o.Facts["refused"].(counters)
	before, ok5 := o.Facts["serial_before"].(string)
	after, ok6 := o.Facts["serial_after"].(string)
	moved, ok7 := o.Facts["not_before_moved"].(bool)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || len(sent) != 2 {
		return errNothing
	}
	if before == after || !moved {
		return fmt.Errorf("api-0 presented no new certificate to a new connection (serial %s → %s, NotBefore later %v): no rotation was seen", before, after, moved)
	}
	total := 0
	for pod, n := range sent {
		total += n
		sa := pod[:len(pod)-2]
		if xfcc[spiffeID(sa)] != n {
			return fmt.Errorf("%s sent %d requests, the app saw %d under its ID (%s)", pod, n, xfcc[spiffeID(sa)], toJSON(xfcc))
		}
	}
	if !allOK(codes, total) {
		return fmt.Errorf("requests failed across the rotation: %v of %d", codes, total)
	}
	for reason, n := range refused {
		if n != 0 {
			return fmt.Errorf("api-0's inbound refused %v handshakes (%s) across the rotation", n, reason)
		}
	}
	return nil
}
