package mtlspool

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

// unrotated calls api-0's inbound with an SVID of 3 s that nobody
// rotates, before and after it expires.
func unrotated(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "node-b's QUIC inbound (refusals by reason) and api-0's app record"}
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
	obs.Evidence = expiry{FirstErr: errString(ferr), AfterErr: errString(aerr), Refused: after.since(before).Refused, AfterHandshakes: as.dials,
		AppFirst: first, AppAfter: later}
	obs.Summary = fmt.Sprintf("before expiry: %s, the app saw %s; after: %s, api-0's inbound refused %s, the app saw %s",
		orOK(ferr), toJSON(first), orOK(aerr), toJSON(after.since(before).Refused), toJSON(later))
	return obs, c.Check(ctx)
}

// expiry is the unrotated-SVID case's evidence: the request's error
// before the SVID expired and after, what api-0's inbound refused by
// reason around the one after and the handshakes it took, and what
// api-0's app saw of each by peer URI.
type expiry struct {
	FirstErr        string         `json:"first_err"`
	AfterErr        string         `json:"after_err"`
	Refused         counters       `json:"refused"`
	AfterHandshakes int            `json:"after_handshakes"`
	AppFirst        map[string]int `json:"app_first"`
	AppAfter        map[string]int `json:"app_after"`
}

func checkUnrotated(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[expiry](o)
	if err != nil {
		return err
	}
	ferr, aerr, refused, first, later, dials := ev.FirstErr, ev.AfterErr, ev.Refused, ev.AppFirst, ev.AppAfter, ev.AfterHandshakes
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
	obs := redgreen.Observation{Witness: "api-0's app record (every request under its source's ID), node-b's QUIC inbound refusals, the certificate api-0 presents to new connections of the suite's client"}
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
	// A failed watch ends the watch and is recorded; the load's answers
	// are still read, and the check finds no new certificate.
	_, err = wait.Until(ctx, svidTTL+4*time.Second, 500*time.Millisecond, func() (bool, error) {
		s, err := p.get(ctx, fmt.Sprintf("/rotation-watch/%d", len(serials)+1), false)
		if err != nil {
			werr = err
			return true, nil
		}
		serials = append(serials, s.serial)
		if s.serial != s0.serial {
			s1 = s
			return true, nil
		}
		return false, nil
	})
	if err != nil && werr == nil {
		werr = err
	}
	if s1.serial != s0.serial {
		// A pace, not a wait: the load runs on a second past the new certificate.
		time.Sleep(time.Second)
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
	obs.Evidence = rotated{Sent: sent, Codes: codes, AppXFCC: xfcc, Refused: after.since(before).Refused,
		SerialBefore: s0.serial, SerialAfter: s1.serial, NotBeforeMoved: s1.notBefore.After(s0.notBefore), WatchErr: errString(werr)}
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
				// A pace, not a wait: steady traffic, not a flood.
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return func() (map[string]int, map[int]int) {
		wg.Wait()
		return sent, codes
	}
}

// rotated is the rotation case's evidence: the requests each source pod
// sent across the rotation and their answers by status, what api-0's app
// saw by peer URI and its inbound refused by reason meanwhile, the serial
// of api-0's certificate before and after, whether its NotBefore moved
// later, and the watch's error, if it failed.
type rotated struct {
	Sent           map[string]int `json:"sent"`
	Codes          map[int]int    `json:"codes"`
	AppXFCC        map[string]int `json:"app_xfcc"`
	Refused        counters       `json:"refused"`
	SerialBefore   string         `json:"serial_before"`
	SerialAfter    string         `json:"serial_after"`
	NotBeforeMoved bool           `json:"not_before_moved"`
	WatchErr       string         `json:"watch_err"`
}

func checkRotation(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[rotated](o)
	if err != nil {
		return err
	}
	sent, codes, xfcc, refused := ev.Sent, ev.Codes, ev.AppXFCC, ev.Refused
	before, after, moved := ev.SerialBefore, ev.SerialAfter, ev.NotBeforeMoved
	if len(sent) != 2 {
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
