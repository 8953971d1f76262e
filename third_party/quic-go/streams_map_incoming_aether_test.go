package quic

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/quic-go/quic-go/internal/protocol"
	"github.com/quic-go/quic-go/internal/wire"

	"github.com/stretchr/testify/require"
)

// aether: MAX_STREAMS is queued once the peer's remaining credit falls below
// half of the limit, not after every completed stream (quic-go#2872).

// A peer that runs one stream at a time gets an update every 51 streams of
// 100, and is never refused a stream.
func TestStreamsMapIncomingMaxStreamsBatched(t *testing.T) {
	var frames []wire.Frame
	var at []int
	m := newIncomingStreamsMap(
		protocol.StreamTypeBidi,
		func(id protocol.StreamID) *mockStream { return &mockStream{id: id} },
		100,
		false,
		func(f wire.Frame) { frames = append(frames, f) },
		protocol.PerspectiveServer,
	)
	first := protocol.FirstIncomingBidiStreamServer
	for i := range 1000 {
		id := first + 4*protocol.StreamID(i)
		_, err := m.GetOrOpenStream(id)
		require.NoError(t, err, "stream %d", i)
		_, err = m.AcceptStream(context.Background())
		require.NoError(t, err)
		n := len(frames)
		require.NoError(t, m.DeleteStream(id))
		if len(frames) > n {
			at = append(at, i)
		}
	}
	var want []int
	for i := 50; i < 1000; i += 51 {
		want = append(want, i)
	}
	require.Equal(t, want, at)
	// each update gives the peer its whole limit again
	require.Equal(t, &wire.MaxStreamsFrame{Type: protocol.StreamTypeBidi, MaxStreamNum: 151}, frames[0])
}

// A peer that used all of its credit is told of more on the first stream
// that completes.
func TestStreamsMapIncomingMaxStreamsWhenExhausted(t *testing.T) {
	var frames []wire.Frame
	m := newIncomingStreamsMap(
		protocol.StreamTypeUni,
		func(id protocol.StreamID) *mockStream { return &mockStream{id: id} },
		10,
		false,
		func(f wire.Frame) { frames = append(frames, f) },
		protocol.PerspectiveClient,
	)
	first := protocol.FirstIncomingUniStreamClient
	_, err := m.GetOrOpenStream(first + 4*9)
	require.NoError(t, err)
	_, err = m.GetOrOpenStream(first + 4*10)
	require.Error(t, err)
	for range 10 {
		_, err := m.AcceptStream(context.Background())
		require.NoError(t, err)
	}
	require.Empty(t, frames)
	require.NoError(t, m.DeleteStream(first+4*3))
	require.Equal(t, []wire.Frame{&wire.MaxStreamsFrame{Type: protocol.StreamTypeUni, MaxStreamNum: 11}}, frames)
}

// Whatever the peer does, the credit it holds and the streams it has open
// add up to at least half the limit (rounded up), so it is never held
// below that, and it is never without credit while no stream is open.
func TestStreamsMapIncomingMaxStreamsNeverStalls(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 2872))
	for _, limit := range []uint64{1, 2, 3, 7, 100} {
		m := newIncomingStreamsMap(
			protocol.StreamTypeBidi,
			func(id protocol.StreamID) *mockStream { return &mockStream{id: id} },
			limit,
			false,
			func(wire.Frame) {},
			protocol.PerspectiveServer,
		)
		var open []protocol.StreamID
		for range 20000 {
			remaining := uint64(0)
			if m.maxStream >= m.nextStreamToOpen {
				remaining = uint64(m.maxStream.StreamNum()-m.nextStreamToOpen.StreamNum()) + 1
			}
			require.GreaterOrEqual(t, uint64(len(m.streams))+remaining, (limit+1)/2, "limit %d", limit)
			if remaining > 0 && (len(open) == 0 || r.IntN(2) == 0) {
				id := m.nextStreamToOpen
				_, err := m.GetOrOpenStream(id)
				require.NoError(t, err)
				_, err = m.AcceptStream(context.Background())
				require.NoError(t, err)
				open = append(open, id)
				continue
			}
			require.NotEmpty(t, open, "limit %d: no credit and no stream open", limit)
			i := r.IntN(len(open))
			require.NoError(t, m.DeleteStream(open[i]))
			open = append(open[:i], open[i+1:]...)
		}
	}
}
