package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	ok, err := Until(context.Background(), time.Hour, time.Millisecond, func() (bool, error) { n++; return n == 3, nil })
	if !ok || err != nil || n != 3 {
		t.Fatalf("met %v, err %v, after %d calls; want met after 3", ok, err, n)
	}
}

func TestUntilStopsOnTheConditionsError(t *testing.T) {
	want := errors.New("metrics: connection refused")
	if ok, err := Until(context.Background(), time.Hour, time.Millisecond, func() (bool, error) { return false, want }); ok || !errors.Is(err, want) {
		t.Fatalf("met %v, err %v; want %v", ok, err, want)
	}
}

// A time that is up is the caller's to judge; a context that ended (an
// interrupt) is an error naming its cause.
func TestUntilTimeUpAndContextEnd(t *testing.T) {
	never := func() (bool, error) { return false, nil }
	if ok, err := Until(context.Background(), time.Millisecond, time.Millisecond, never); ok || err != nil {
		t.Fatalf("time up: met %v, err %v; want not met, no error", ok, err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("Interrupted by User")
	cancel(cause)
	if ok, err := Until(ctx, time.Hour, time.Hour, never); ok || !errors.Is(err, cause) {
		t.Fatalf("ended context: met %v, err %v; want %v", ok, err, cause)
	}
}
