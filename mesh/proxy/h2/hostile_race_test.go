//go:build race

package h2_test

// raceScale multiplies the hostile tests' RSS bound: the race detector
// keeps shadow memory for every allocation.
const raceScale = 8
