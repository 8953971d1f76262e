package tcp

import "time"

// clock is the idle timers' time. Tests replace it to drive time by hand
// instead of waiting.
type clock struct {
	now func() time.Time
	// afterFunc runs f in its own goroutine once d has passed.
	afterFunc func(d time.Duration, f func()) timer
}

// timer is the part of *time.Timer an idle watch uses.
type timer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

var realClock = clock{
	now:       time.Now,
	afterFunc: func(d time.Duration, f func()) timer { return time.AfterFunc(d, f) },
}
