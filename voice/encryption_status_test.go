package voice

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
)

// nopSignal drops what the DAVE session sends: the test drives the voice
// server's side by hand.
type nopSignal struct{}

func (nopSignal) SendJSON(media.Opcode, any) error      { return nil }
func (nopSignal) SendBinary(media.Opcode, []byte) error { return nil }

// TestStatusSaysWhenTheCallWasDowngraded: after the voice server's
// documented downgrade (op 21 to protocol 0 with a transition id, then op
// 22), Clankie's speech goes out in the clear, and /voice status says so;
// before it, status says the call is end-to-end encrypted. Before the fix
// status said nothing either way. An undocumented downgrade (op 24 epoch 1
// at protocol 0) is refused and status keeps saying encrypted.
func TestStatusSaysWhenTheCallWasDowngraded(t *testing.T) {
	m := startManager(t, Config{}, nil, guild, voiceStates(lounge, ana)...)
	if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	d, err := davemedia.New(davemedia.Config{UserID: botUser, ChannelID: lounge})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.sessions[guild].link = &audioLink{dave: d, cancel: func() {}}
	m.mu.Unlock()
	if err := d.Start(1, botUser, nopSignal{}); err != nil {
		t.Fatal(err)
	}
	status := func() string {
		st, ok := m.Status(guild)
		if !ok {
			t.Fatal("no session")
		}
		return m.cfg.Catalog.English().Render(st.Encryption) // as /voice status words it in English
	}
	if got := status(); got != "End-to-end encrypted (DAVE)." {
		t.Fatalf("encrypted call: status says %q", got)
	}
	// Undocumented: refused, still encrypted.
	_ = d.HandleJSON(media.OpDAVEPrepareEpoch, json.RawMessage(`{"epoch":1,"protocol_version":0}`))
	if got := status(); got != "End-to-end encrypted (DAVE)." {
		t.Fatalf("after an undocumented downgrade: status says %q", got)
	}
	// Documented: prepared, then executed.
	if err := d.HandleJSON(media.OpDAVEPrepareTransition, json.RawMessage(`{"transition_id":9,"protocol_version":0}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.HandleJSON(media.OpDAVEExecuteTransition, json.RawMessage(`{"transition_id":9}`)); err != nil {
		t.Fatal(err)
	}
	if got := status(); !strings.HasPrefix(got, "Not end-to-end encrypted: the call was downgraded") {
		t.Fatalf("after the documented downgrade: status says %q, want that the call was downgraded", got)
	}
	if frame, _ := d.Encrypt(nil, []byte("speech")); string(frame) != "speech" {
		t.Fatal("the test's premise: after the downgrade our frames go out in the clear")
	}
	if r := d.DAVE().Refusals(); r.Downgrades != 1 {
		t.Fatalf("refused downgrades %d, want 1", r.Downgrades)
	}
}
