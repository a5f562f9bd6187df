package voice

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clankie/clankie/voice/media"
)

// TestPeerPanicAndRefusalMetrics: recovered panics are exported by
// component and refusals by reason, a fixed label set each, and a
// connection's counts outlive it.
func TestPeerPanicAndRefusalMetrics(t *testing.T) {
	m := NewManager(Config{Memory: &brieferRec{}, Gateway: newGateway()})
	reg := prometheus.NewRegistry()
	if err := m.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.ended.addConn(media.Stats{GatewayPanics: 1, MediaPanics: 4, SSRCRefused: 3}, nil)
	m.ended.speech.PeerPanics.Opus += 2 // an ended session's audio path's decoder panics
	m.mu.Unlock()
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "clankie_voice_peer_") {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				got[f.GetName()+"{"+l.GetName()+"="+l.GetValue()+"}"] = mt.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{
		"clankie_voice_peer_panics_total{component=gateway}":      1,
		"clankie_voice_peer_panics_total{component=media}":        4,
		"clankie_voice_peer_panics_total{component=dave}":         0,
		"clankie_voice_peer_panics_total{component=opus}":         2,
		"clankie_voice_peer_panics_total{component=realtime}":     0,
		"clankie_voice_peer_refused_total{reason=ssrc_cap}":       3,
		"clankie_voice_peer_refused_total{reason=dave_users_cap}": 0,
		"clankie_voice_peer_refused_total{reason=dave_downgrade}": 0,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("peer metrics\n got %v\nwant %v", got, want)
	}
}
