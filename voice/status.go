package voice

import (
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/realtime"
)

// encryptionSentence says whether the session's call is end-to-end
// encrypted, for /voice status; none (a zero Msg) when it has no voice
// connection. It is a message, rendered in the reader's language by
// /voice.
func encryptionSentence(link *audioLink) lang.Msg {
	if link == nil {
		return lang.Msg{}
	}
	if d, ok := link.dave.(*davemedia.Session); ok {
		switch ds := d.DAVE(); {
		case ds.Downgraded():
			return lang.Msg{ID: lang.EncryptionDowngraded}
		case ds.ProtocolVersion() > 0:
			return lang.Msg{ID: lang.EncryptionE2EE}
		}
	}
	if link.conn.Load() == nil {
		return lang.Msg{}
	}
	return lang.Msg{ID: lang.EncryptionTransport}
}

// modelSentence says where a session's model connection stands, in one
// sentence for /voice status: never content, only the phase, the attempt
// and, for a refusal, why and the server's code (a checked protocol token).
func modelSentence(configured bool, openFailed bool, st realtime.State) lang.Msg {
	switch {
	case !configured:
		return lang.Msg{ID: lang.ModelNotConfigured}
	case openFailed:
		return lang.Msg{ID: lang.ModelInvalidSettings}
	}
	switch st.Phase {
	case realtime.Connecting:
		return lang.Msg{ID: lang.ModelConnecting}
	case realtime.Ready:
		return lang.Msg{ID: lang.ModelReady}
	case realtime.Reconnecting:
		return lang.Msg{ID: lang.ModelReconnecting, Args: lang.Args{"Attempt": st.Attempt}}
	case realtime.Closed:
		return lang.Msg{ID: lang.ModelClosed}
	}
	why := lang.RefusedOther
	switch st.Reason {
	case realtime.ReasonKey:
		why = lang.RefusedKey
	case realtime.ReasonModel:
		why = lang.RefusedModel
	case realtime.ReasonNotFound:
		why = lang.RefusedNotFound
	case realtime.ReasonShape:
		why = lang.RefusedShape
	case realtime.ReasonNotRealtime:
		why = lang.RefusedNotRealtime
	case realtime.ReasonQuota:
		why = lang.RefusedQuota
	}
	return lang.Msg{ID: lang.ModelRefused, Args: lang.Args{"Why": lang.Msg{ID: why, Args: lang.Args{"Code": st.Code}}}}
}
