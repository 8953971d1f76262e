//go:build race

package proxy_test

// raceEnabled: the race detector's shadow memory multiplies the heap, so
// RSS bounds do not apply under it.
const raceEnabled = true
