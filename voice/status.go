package voice

import (
	"fmt"

	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/realtime"
)

// encryptionSentence says whether the session's call is end-to-end
// encrypted, for /voice status; "" when it has no voice connection.
func encryptionSentence(link *audioLink) string {
	if link == nil {
		return ""
	}
	if d, ok := link.dave.(*davemedia.Session); ok {
		switch ds := d.DAVE(); {
		case ds.Downgraded():
			return "Not end-to-end encrypted: the call was downgraded to transport encryption only (Discord's servers can hear it, Clankie included)."
		case ds.ProtocolVersion() > 0:
			return "End-to-end encrypted (DAVE)."
		}
	}
	if link.conn.Load() == nil {
		return ""
	}
	return "Not end-to-end encrypted: the call uses transport encryption only."
}

// modelSentence says where a session's model connection stands, in one
// sentence for /voice status: never content, only the phase, the attempt
// and, for a refusal, why and the server's code (a checked protocol token).
func modelSentence(configured bool, openFailed bool, st realtime.State) string {
	const p = "Realtime voice model: "
	switch {
	case !configured:
		return p + "not configured (CLANKIE_REALTIME_URL is empty), so briefings are prepared but not sent."
	case openFailed:
		return p + "refused: the realtime settings are invalid; check the CLANKIE_REALTIME_* variables, then start a new session."
	}
	switch st.Phase {
	case realtime.Connecting:
		return p + "connecting."
	case realtime.Ready:
		return p + "ready."
	case realtime.Reconnecting:
		return fmt.Sprintf(p+"reconnecting (attempt %d).", st.Attempt)
	case realtime.Closed:
		return p + "closed."
	}
	why := map[realtime.Reason]string{
		realtime.ReasonKey:         "the endpoint rejected the API key (%s); check CLANKIE_REALTIME_API_KEY and CLANKIE_REALTIME_AUTH",
		realtime.ReasonModel:       "the endpoint does not offer the model (%s); check CLANKIE_REALTIME_MODEL",
		realtime.ReasonNotFound:    "the endpoint answered not found (%s); check CLANKIE_REALTIME_URL and CLANKIE_REALTIME_MODEL",
		realtime.ReasonShape:       "the endpoint rejected the session setup (%s); it may not speak the Realtime GA protocol",
		realtime.ReasonNotRealtime: "CLANKIE_REALTIME_URL does not answer as a Realtime WebSocket (%s)",
		realtime.ReasonQuota:       "the account has no quota left (%s)",
	}[st.Reason]
	if why == "" {
		why = "the endpoint refused the session (%s)"
	}
	return p + "refused: " + fmt.Sprintf(why, st.Code) + ". It will not retry; fix the setting, then start a new session."
}
