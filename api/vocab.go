package api

// Lane is who a bearer speaks for. A bearer belongs to exactly one lane; a
// request body never changes it.
type Lane string

// The four lanes.
const (
	LaneOperator        Lane = "operator"
	LaneDiscordPresence Lane = "discord_presence"
	LaneDiscordVoice    Lane = "discord_voice"
	LaneGameplay        Lane = "gameplay"
)

// LaneInfo is one row of the lane table: everything derived from a lane.
type LaneInfo struct {
	Lane Lane
	// TokenVar is the environment variable holding the lane's bearer
	// (config declares it with its doc; a config test checks the names).
	TokenVar string
	// Credential names the bearer in a sentence ("the operator credential").
	Credential string
	// Surface is what a person fact's provenance records for the lane.
	Surface Surface
}

// lanes is the lane table, in the order episode files are read and written
// (so which of two duplicate ids wins on load is deterministic) and in which
// bearers are minted and compared.
var lanes = [...]LaneInfo{
	{LaneOperator, "CLANKIE_OPERATOR_TOKEN", "the operator credential", SurfaceOperator},
	{LaneDiscordVoice, "CLANKIE_VOICE_BRIDGE_TOKEN", "the voice bridge credential", SurfaceDiscordVoice},
	{LaneDiscordPresence, "CLANKIE_TEXT_BRIDGE_TOKEN", "the text bridge credential", SurfaceDiscordText},
	{LaneGameplay, "CLANKIE_GAMEPLAY_TOKEN", "the gameplay credential", SurfaceGameplay},
}

// Lanes returns the lane table; the copy keeps the table read-only.
func Lanes() []LaneInfo { return append([]LaneInfo(nil), lanes[:]...) }

// AllLanes returns the four lanes in table order.
func AllLanes() []Lane {
	out := make([]Lane, len(lanes))
	for i, l := range lanes {
		out[i] = l.Lane
	}
	return out
}

// Info returns the table row of l, and reports whether l is a lane.
func (l Lane) Info() (LaneInfo, bool) {
	for _, i := range lanes {
		if i.Lane == l {
			return i, true
		}
	}
	return LaneInfo{}, false
}

// Valid reports whether l is one of the four lanes.
func (l Lane) Valid() bool { _, ok := l.Info(); return ok }

// Principal is who is asking: the lane of the bearer that authenticated
// the request. Only the bearer decides it; a request body never changes it.
// The zero Principal is no lane: not the operator, no surface.
type Principal struct {
	Lane Lane
}

// Operator reports whether the principal is the operator, who may cross
// lanes and rooms.
func (p Principal) Operator() bool { return p.Lane == LaneOperator }

// Surface returns what a person fact's provenance records for the
// principal (the lane table's Surface).
func (p Principal) Surface() Surface {
	info, _ := p.Lane.Info()
	return info.Surface
}

// Access is the set of lanes that may call a route.
type Access []Lane

// Who may call which route; the operator is listed where it may, and the
// voice briefing deliberately lists only the voice bridge. AnyLane is the
// lane table itself, so a lane added there may call every AnyLane route.
var (
	AnyLane      = Access(AllLanes())
	DiscordLanes = Access{LaneOperator, LaneDiscordPresence, LaneDiscordVoice}
	OperatorOnly = Access{LaneOperator}
	VoiceOnly    = Access{LaneDiscordVoice}
)

// Allows reports whether lane may call a route with this access.
func (a Access) Allows(lane Lane) bool {
	for _, l := range a {
		if l == lane {
			return true
		}
	}
	return false
}

// LaneList returns the lanes comma-separated, in table order, for sentences.
func LaneList() string {
	s := ""
	for i, l := range lanes {
		if i > 0 {
			s += ", "
		}
		s += string(l.Lane)
	}
	return s
}

// kinds are the three fact kinds, in the order offered to people: the one
// list Kinds and ValidKind read.
var kinds = [...]Kind{KindPersonFact, KindPreference, KindRelationshipNote}

// Kinds returns the three fact kinds, in the order offered to people; the
// copy keeps the list read-only.
func Kinds() []Kind { return append([]Kind(nil), kinds[:]...) }

// ValidKind reports whether k is one of the three fact kinds. The service
// enforces it; the slash command and the CLI ask it before sending.
func ValidKind(k Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}
