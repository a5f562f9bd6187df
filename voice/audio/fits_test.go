package audio

import "github.com/clankie/clankie/voice/realtime"

// The audio path plugs into the realtime client without adapters: the
// client is the Path's Model, and the Path (or a bare Outbound) is the
// client's Listener.
var (
	_ Model             = (*realtime.Session)(nil)
	_ realtime.Listener = (*Path)(nil)
	_ realtime.Listener = (*Outbound)(nil)
)

// The model's rate is the one the realtime client declares in its session.
var _ = [1]struct{}{}[ModelRate-realtime.SampleRate]
