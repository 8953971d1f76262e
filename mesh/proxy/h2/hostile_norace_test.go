//go:build !race

package h2_test

// raceScale multiplies the hostile tests' RSS bound; without the race
// detector it is 1.
const raceScale = 1
