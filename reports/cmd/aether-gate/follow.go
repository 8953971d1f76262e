package main

import (
	"fmt"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
)

// How often the soak's figures reach the screen: rewritten in place on a
// terminal, appended as lines elsewhere, where each is kept; and how long
// a step may go unseen off a terminal before a line says it still runs.
const (
	statusEvery = 2 * time.Second
	soakEvery   = 5 * time.Second
	quietEvery  = time.Minute
)

// follower turns a step's progress events into lines as they arrive: one
// per case and per suite at once, the soak's figures at most every few
// seconds. Its clock is given (tick's now), so what it prints, and when,
// follows from the events alone.
type follower struct {
	s    *screen
	step string
	// start is the gate's start, every line's clock.
	start time.Time
	// cases and suites count what the step has recorded so far.
	cases, suites int
	// soak is the latest soak figures, soakAt when they were reported;
	// soakShown whether a line has shown them yet.
	soak      *results.SoakProgress
	soakAt    time.Time
	soakShown bool
	// lastSoak, lastStatus and lastLine are when the screen last showed a
	// soak line, a status line and any whole line.
	lastSoak, lastStatus, lastLine time.Time
}

// handle prints what one event says.
func (f *follower) handle(e results.Event, now time.Time) {
	switch {
	case e.Case != nil:
		f.cases++
		f.print(caseLine(since(f.start, e.At), e.Suite, *e.Case), now)
	case e.Written != "":
		f.suites++
		r, err := results.Load(e.Written)
		if err != nil {
			f.print(fit(fmt.Sprintf(lineFormat, since(f.start, e.At), e.Suite, "suite", "unreadable", results.Fail, err)), now)
			return
		}
		f.print(suiteLine(since(f.start, e.At), r), now)
	case e.Soak != nil:
		f.soak, f.soakAt, f.soakShown = e.Soak, e.At, false
	}
}

func (f *follower) print(l string, now time.Time) {
	f.s.line(l)
	f.lastLine = now
}

// running is the step's status while nothing else is shown.
func (f *follower) running(now time.Time) string {
	return fmt.Sprintf("%5s  %s: running, %d case(s) and %d suite(s) recorded so far", since(f.start, now), f.step, f.cases, f.suites)
}

// tick shows the step's state at now: on a terminal the status line, at
// most every statusEvery; elsewhere the soak's figures as a line at most
// every soakEvery, and a line when nothing was printed for quietEvery.
func (f *follower) tick(now time.Time) {
	if f.s.tty {
		if now.Sub(f.lastStatus) < statusEvery {
			return
		}
		f.lastStatus = now
		if f.soak != nil {
			f.s.setStatus(soakLine(since(f.start, f.soakAt), *f.soak))
			return
		}
		f.s.setStatus(f.running(now))
		return
	}
	if f.soak != nil && !f.soakShown && now.Sub(f.lastSoak) >= soakEvery {
		f.soakShown, f.lastSoak = true, now
		f.print(soakLine(since(f.start, f.soakAt), *f.soak), now)
		return
	}
	if now.Sub(f.lastLine) >= quietEvery {
		f.print(f.running(now), now)
	}
}

// finish shows the soak's last figures, if no line has, and clears the
// status line.
func (f *follower) finish(now time.Time) {
	f.s.clearStatus()
	if f.soak != nil && !f.soakShown {
		f.soakShown = true
		f.print(soakLine(since(f.start, f.soakAt), *f.soak), now)
	}
}
