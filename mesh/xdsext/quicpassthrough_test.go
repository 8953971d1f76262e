package xdsext

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The QUIC passthrough's config survives the round trip, and encodes to
// the same bytes every time (a Struct is a map: an unstable encoding
// would move the listener's version on every build).
func TestQUICPassthroughRoundTrip(t *testing.T) {
	q := QUICPassthrough{StatPrefix: "gw", MaxFlows: 7, MaxPendingFlows: 3, MaxPendingBytesPerFlow: 4096, IdleTimeout: 90 * time.Second, ClientHelloTimeout: 1500 * time.Millisecond}
	a, err := q.TypedConfig()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		b, err := q.TypedConfig()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.GetValue(), b.GetValue()) {
			t.Fatal("two encodings of one config differ")
		}
	}
	got, err := QUICPassthroughFrom(a, "tc")
	if err != nil {
		t.Fatal(err)
	}
	if got != q {
		t.Fatalf("round trip %+v, want %+v", got, q)
	}
	if empty, err := (QUICPassthrough{}).TypedConfig(); err != nil {
		t.Fatal(err)
	} else if got, err := QUICPassthroughFrom(empty, "tc"); err != nil || got != (QUICPassthrough{}) {
		t.Fatalf("empty config reads as %+v, %v; want every field unset", got, err)
	}
	if _, err := (QUICPassthrough{IdleTimeout: -time.Second}).TypedConfig(); err == nil || !strings.Contains(err.Error(), "idle_timeout") {
		t.Fatalf("negative idle_timeout encoded (err %v)", err)
	}
}
