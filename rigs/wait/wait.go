// Package wait is how rigs and suites wait for a condition they poll (a
// counter, a log line, a state file): until it holds, its time is up, or
// the context ends, whichever is first. A wait that ignores its context
// outlives the interrupt or the spec timeout that ended it.
package wait

import (
	"context"
	"fmt"
	"time"
)

// Until calls cond at once and then every every, until it reports done,
// returns an error, within has passed, or ctx ends. It reports whether
// cond was met; a time that is up is not an error (the caller judges what
// it saw last), an error from cond or an ended ctx is, the latter naming
// its cause.
func Until(ctx context.Context, within, every time.Duration, cond func() (bool, error)) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		done, err := cond()
		if done || err != nil {
			return done, err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if cause := context.Cause(ctx); cause != context.DeadlineExceeded {
				return false, fmt.Errorf("wait ended: %w", cause)
			}
			return false, nil
		}
	}
}
