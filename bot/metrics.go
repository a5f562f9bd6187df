package bot

import (
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a bridge's Prometheus figures. Labels come from closed sets
// (a registered command's name, an outcome word); no id and no text.
type Metrics struct {
	// Registerer is where the rest of the bridge registers its own metrics
	// (voice sessions, briefings delivered), already labelled with the
	// bridge's name, so every metric of one bridge carries bridge="…".
	Registerer prometheus.Registerer

	interactions  *prometheus.CounterVec
	firstCallback *prometheus.HistogramVec
	reconnects    prometheus.Counter
	refused       *prometheus.CounterVec
	connected     sync.Map // *discordgo.Session → true once it connected
}

// Refusal is why the HTTP interactions endpoint refused a request: the
// reason label of clankie_bridge_interactions_refused_total.
type Refusal string

// Refusal reasons, a closed set.
const (
	RefusedMissingSignature   Refusal = "missing_signature"   // no X-Signature-Ed25519 or X-Signature-Timestamp
	RefusedMalformedSignature Refusal = "malformed_signature" // not 128 hex digits, or a timestamp not decimal digits
	RefusedStaleTimestamp     Refusal = "stale_timestamp"     // signed more than MaxSignatureSkew from now
	RefusedTooLarge           Refusal = "too_large"           // a body over MaxInteractionBody
	RefusedBadSignature       Refusal = "bad_signature"       // the signature does not verify
	RefusedReplayed           Refusal = "replayed"            // the interaction was claimed already (another replica, a restart)
)

var refusals = []Refusal{RefusedMissingSignature, RefusedMalformedSignature, RefusedStaleTimestamp,
	RefusedTooLarge, RefusedBadSignature, RefusedReplayed}

// Outcome is how an interaction ended: the outcome label of
// clankie_bridge_interactions_total.
type Outcome string

// Interaction outcomes.
const (
	OutcomeOK        Outcome = "ok"         // answered with the handler's reply
	OutcomeRefused   Outcome = "refused"    // a sentence for the user (bad input, not allowed)
	OutcomeFailed    Outcome = "failed"     // the generic failure sentence
	OutcomePanicked  Outcome = "panicked"   // a handler panicked; the user got the failure sentence
	OutcomeStale     Outcome = "stale"      // the command or its options are not what the router knows
	OutcomeNotServed Outcome = "not_served" // a server outside DISCORD_GUILD_IDS
)

// NewMetrics registers a bridge's metrics in reg under the label
// bridge=name ("text" or "voice"), so two bridges in one process share a
// registry without clashing.
func NewMetrics(reg prometheus.Registerer, bridge string) *Metrics {
	r := prometheus.WrapRegistererWith(prometheus.Labels{"bridge": bridge}, reg)
	m := &Metrics{
		Registerer: r,
		interactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clankie_bridge_interactions_total",
			Help: "Interactions answered, by command name (component:<prefix> for a button, modal:<prefix> for a modal submit), kind (command, autocomplete, component or modal) and outcome.",
		}, []string{"command", "kind", "outcome"}),
		firstCallback: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clankie_bridge_first_callback_seconds",
			Help:    "Time from receiving an interaction to its first callback (a reply, a deferral or choices); Discord drops one not answered within 3 s.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 1.5, 2, 2.5, 3, 5},
		}, []string{"command"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clankie_bridge_gateway_reconnects_total",
			Help: "Gateway connections after the first (each reconnect or resume).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clankie_bridge_interactions_refused_total",
			Help: "Requests the HTTP interactions endpoint refused before serving them, by reason.",
		}, []string{"reason"}),
	}
	for _, reason := range refusals {
		m.refused.WithLabelValues(string(reason)) // present at 0 before the first refusal
	}
	r.MustRegister(m.interactions, m.firstCallback, m.reconnects, m.refused)
	return m
}

// refusal counts one request the endpoint refused; nil-safe.
func (m *Metrics) refusal(reason Refusal) {
	if m != nil {
		m.refused.WithLabelValues(string(reason)).Inc()
	}
}

// kindOf is the kind label of an interaction the router counts: "command",
// "autocomplete", "component" or "modal"; "" for one it does not count (a PING).
func kindOf(in *discordgo.Interaction) string {
	switch in.Type {
	case discordgo.InteractionApplicationCommand:
		return "command"
	case discordgo.InteractionApplicationCommandAutocomplete:
		return "autocomplete"
	case discordgo.InteractionMessageComponent:
		return "component"
	case discordgo.InteractionModalSubmit:
		return "modal"
	}
	return ""
}

// interaction counts one answered interaction of kind (kindOf); nil-safe.
func (m *Metrics) interaction(command, kind string, outcome Outcome) {
	if m != nil {
		m.interactions.WithLabelValues(command, kind, string(outcome)).Inc()
	}
}

// callback records the time to an interaction's first callback; nil-safe.
func (m *Metrics) callback(command string, d time.Duration) {
	if m != nil {
		m.firstCallback.WithLabelValues(command).Observe(d.Seconds())
	}
}

// onConnect counts each shard's gateway connections after its first as
// reconnects: every shard connects once at start.
func (m *Metrics) onConnect(s *discordgo.Session, _ *discordgo.Connect) {
	if _, seen := m.connected.LoadOrStore(s, true); seen {
		m.reconnects.Inc()
	}
}
