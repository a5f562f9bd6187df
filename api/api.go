// Package api holds the wire types of the memory service's HTTP API and the
// OpenAPI document that describes them. It is a leaf: the service, the client
// and the commands import it so that no copy of a type can drift.
package api

import (
	_ "embed"
	"time"
)

// SchemaVersion is the only version of the wire format this build speaks.
const SchemaVersion = 1

// OpenAPI is the contract document, embedded so the service and the contract
// test read the same bytes.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Bounds of the stores. They are part of the contract: clients render them
// ("n of 128") and the service enforces them.
const (
	// MaxFactsPerPerson bounds a person's Discord-visible facts (guild and
	// channel visibility), the "n of 128" a member is shown.
	MaxFactsPerPerson = 128
	// MaxHiddenFactsPerPerson bounds a person's operator_private notes,
	// kept apart from MaxFactsPerPerson so nothing a member sees depends
	// on notes they cannot see.
	MaxHiddenFactsPerPerson = 128

	MaxFactBody          = 2048
	MaxIDLength          = 64
	MaxBodyBytes         = 64 << 10
	DefaultRecallLimit   = 8
	MaxBriefingChars     = 8000
	BriefingFactsPerUser = 8
	MaxBriefingUsers     = 25
	EpisodeRingCapacity  = 128
	RetainedCapacity     = 1024
	MaxEpisodeSummary    = 512
	EpisodeCardSize      = 8
	MaxEpisodeSearch     = 32
	// MaxRecallQuery bounds a recall query, in characters: the service's
	// check and the slash command's query option (its maxLength and check).
	MaxRecallQuery = 200
)

// Kind is what sort of thing a person fact says. Kinds lists them,
// ValidKind is the rule.
type Kind string

// The fact kinds.
const (
	KindPersonFact       Kind = "person-fact"
	KindPreference       Kind = "preference"
	KindRelationshipNote Kind = "relationship-note"
)

// Scope is who may see a person fact: every room of its guild, one
// channel, or only the operator.
type Scope string

// The visibility scopes of a person fact.
const (
	ScopeGuild           Scope = "guild"
	ScopeChannel         Scope = "channel"
	ScopeOperatorPrivate Scope = "operator_private"
)

// Surface is the source surface a person fact's provenance records; the
// service sets it from the bearer's lane (the lane table's Surface).
type Surface string

// The source surfaces.
const (
	SurfaceDiscordText  Surface = "discord_text"
	SurfaceDiscordVoice Surface = "discord_voice"
	SurfaceOperator     Surface = "operator"
	SurfaceGameplay     Surface = "gameplay"
)

// EpisodeVisibility says who may read one of Clankie's notes.
type EpisodeVisibility string

// The episode visibilities.
const (
	EpisodeOperatorPrivate EpisodeVisibility = "operator_private"
	EpisodeShareable       EpisodeVisibility = "shareable"
)

// Error is every non-2xx answer: a machine code and a sentence for a person.
type Error struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

// Subject is the key of a person: ids, never display names.
type Subject struct {
	GuildID string `json:"guildId"`
	UserID  string `json:"userId"`
}

// Visibility says where a fact may be read.
type Visibility struct {
	Scope     Scope  `json:"scope"`
	ChannelID string `json:"channelId,omitempty"`
}

// Provenance is content-free: ids only, never names, text or audio.
type Provenance struct {
	SourceSurface  Surface `json:"sourceSurface,omitempty"`
	SourceEventID  string  `json:"sourceEventId,omitempty"`
	CorrelationID  string  `json:"correlationId,omitempty"`
	ProposerUserID string  `json:"proposerUserId,omitempty"`
	ChannelID      string  `json:"channelId,omitempty"`
	// SourceMessageID is the Discord message a fact was taken from
	// ("Remember this" on a message): its id only, never its text, so a
	// reader can jump to it.
	SourceMessageID string `json:"sourceMessageId,omitempty"`
}

// Fact is one thing Clankie was told about a person.
type Fact struct {
	FactID           string     `json:"factId"`
	Subject          Subject    `json:"subject"`
	Kind             Kind       `json:"kind"`
	Body             string     `json:"body"`
	Visibility       Visibility `json:"visibility"`
	Confidence       float64    `json:"confidence"`
	CreatedAt        time.Time  `json:"createdAt"`
	UpdatedAt        time.Time  `json:"updatedAt"`
	ExpiresAt        *time.Time `json:"expiresAt,omitempty"`
	SupersedesFactID string     `json:"supersedesFactId,omitempty"`
	Provenance       Provenance `json:"provenance"`
	// Expired is set only on operator export and the subject's own view.
	Expired bool `json:"expired,omitempty"`
}

// FactInput is the part of a fact a client proposes.
type FactInput struct {
	Subject          Subject    `json:"subject"`
	Kind             Kind       `json:"kind"`
	Body             string     `json:"body"`
	Visibility       Visibility `json:"visibility"`
	Confidence       float64    `json:"confidence"`
	ExpiresAt        *time.Time `json:"expiresAt,omitempty"`
	SupersedesFactID string     `json:"supersedesFactId,omitempty"`
	Provenance       Provenance `json:"provenance"`
}

// ProposalRequest is POST /v1/memory/discord-people/proposals.
type ProposalRequest struct {
	SchemaVersion int       `json:"schemaVersion"`
	ProposalID    string    `json:"proposalId"`
	Fact          FactInput `json:"fact"`
}

// ProposalResponse is the reply to a proposal. Fact is absent only when a replayed
// proposal's fact has since been forgotten; Reason then says so.
type ProposalResponse struct {
	SchemaVersion int    `json:"schemaVersion"`
	Fact          *Fact  `json:"fact,omitempty"`
	Superseded    bool   `json:"superseded"`
	Reason        string `json:"reason,omitempty"`
	Evicted       int    `json:"evicted"`
	Replayed      bool   `json:"replayed,omitempty"`
}

// RecallQuery narrows a recall (the query parameters of GET
// /v1/memory/discord-people/{guildId}/{userId}). A Discord bearer must name
// ChannelID (the service refuses with 400 otherwise); Query's
// whitespace-separated terms must all match; Limit 0 leaves the service's
// default (8).
type RecallQuery struct {
	ChannelID string
	Query     string
	Limit     int
}

// RecallResponse is the reply to a recall, the subject's own view and an export.
type RecallResponse struct {
	SchemaVersion int     `json:"schemaVersion"`
	Subject       Subject `json:"subject"`
	Facts         []Fact  `json:"facts"`
	Total         int     `json:"total"`
	// Capacity is the per-person bound, carried so a client can say "n of 128".
	Capacity int `json:"capacity,omitempty"`
}

// FactPatch is the operator's edit. ExpiresAt distinguishes absent (nil),
// null (clear) and a time.
type FactPatch struct {
	Body       *string      `json:"body,omitempty"`
	Kind       *Kind        `json:"kind,omitempty"`
	Visibility *Visibility  `json:"visibility,omitempty"`
	Confidence *float64     `json:"confidence,omitempty"`
	ExpiresAt  OptionalTime `json:"expiresAt,omitzero"`
}

// FactResponse is the reply to an edit.
type FactResponse struct {
	SchemaVersion int  `json:"schemaVersion"`
	Fact          Fact `json:"fact"`
}

// ForgetPersonResponse names the facts removed with a person.
type ForgetPersonResponse struct {
	SchemaVersion int      `json:"schemaVersion"`
	Subject       Subject  `json:"subject"`
	Removed       []string `json:"removed"`
}

// PersonSummary is one row of the operator's people list.
type PersonSummary struct {
	Subject Subject `json:"subject"`
	Facts   int     `json:"facts"`
}

// PeopleResponse is one page of the operator's people list.
type PeopleResponse struct {
	SchemaVersion int             `json:"schemaVersion"`
	People        []PersonSummary `json:"people"`
	Total         int             `json:"total"`
	NextCursor    string          `json:"nextCursor,omitempty"`
}

// BriefingRequest carries ids, never content.
type BriefingRequest struct {
	SchemaVersion    int      `json:"schemaVersion"`
	GuildID          string   `json:"guildId"`
	ChannelID        string   `json:"channelId"`
	ConsentedUserIDs []string `json:"consentedUserIds"`
	CorrelationID    string   `json:"correlationId,omitempty"`
}

// BriefingCounts are the only figures a briefing's receipt may hold.
type BriefingCounts struct {
	ConsentedUsers int `json:"consentedUsers"`
	UsersWithFacts int `json:"usersWithFacts"`
	Facts          int `json:"facts"`
	Episodes       int `json:"episodes"`
}

// BriefingResponse is the text handed to the realtime voice model.
type BriefingResponse struct {
	SchemaVersion int            `json:"schemaVersion"`
	Briefing      string         `json:"briefing"`
	Counts        BriefingCounts `json:"counts"`
	RefreshedAt   time.Time      `json:"refreshedAt"`
}

// Catalog is GET /v1/memory, answered from counters.
type Catalog struct {
	SchemaVersion int `json:"schemaVersion"`
	// Store is where the service keeps memory: StoreFile or StorePostgres.
	Store            string       `json:"store"`
	People           int          `json:"people"`
	Facts            int          `json:"facts"`
	Episodes         int          `json:"episodes"`
	Unretained       int          `json:"unretained"`
	RingCapacity     int          `json:"ringCapacity"`
	Retained         int          `json:"retained"`
	RetainedCapacity int          `json:"retainedCapacity"`
	EpisodesPerLane  map[Lane]int `json:"episodesPerLane"`
	// CorruptPersonFiles counts person files set aside as unreadable;
	// GET /v1/memory/discord-people/corrupt lists them.
	CorruptPersonFiles int `json:"corruptPersonFiles"`
}

// The stores a Catalog names.
const (
	StoreFile     = "file"
	StorePostgres = "postgres"
)

// CorruptFile is a person file the service set aside because it could not
// be parsed: its path under the memory root, when, and its size.
type CorruptFile struct {
	File       string    `json:"file"`
	SetAsideAt time.Time `json:"setAsideAt"`
	Bytes      int64     `json:"bytes"`
}

// CorruptFiles is the reply to GET /v1/memory/discord-people/corrupt, oldest first.
type CorruptFiles struct {
	SchemaVersion int           `json:"schemaVersion"`
	Files         []CorruptFile `json:"files"`
}

// EpisodeProvenance is content-free.
type EpisodeProvenance struct {
	CharacterID   string `json:"characterId,omitempty"`
	SessionID     string `json:"sessionId,omitempty"`
	SelfAuthored  bool   `json:"selfAuthored"`
	RawTranscript bool   `json:"rawTranscript"`
}

// Episode is one of Clankie's own notes. Retained and CorrectedAt are
// optional so records written before they existed load unchanged.
type Episode struct {
	EpisodeID   string            `json:"episodeId"`
	Lane        Lane              `json:"lane"`
	Room        string            `json:"room"`
	Summary     string            `json:"summary"`
	Visibility  EpisodeVisibility `json:"visibility"`
	OccurredAt  time.Time         `json:"occurredAt"`
	Provenance  EpisodeProvenance `json:"provenance"`
	Retained    bool              `json:"retained,omitempty"`
	CorrectedAt *time.Time        `json:"correctedAt,omitempty"`
}

// EpisodeRequest is POST /v1/memory/captain-episodes.
type EpisodeRequest struct {
	SchemaVersion int               `json:"schemaVersion"`
	EpisodeID     string            `json:"episodeId,omitempty"`
	Lane          Lane              `json:"lane"`
	Room          string            `json:"room"`
	Summary       string            `json:"summary"`
	Visibility    EpisodeVisibility `json:"visibility,omitempty"`
	Retain        bool              `json:"retain,omitempty"`
	Corrects      string            `json:"corrects,omitempty"`
	OccurredAt    time.Time         `json:"occurredAt"`
	Provenance    EpisodeProvenance `json:"provenance"`
}

// EpisodeResponse is the reply to a record.
type EpisodeResponse struct {
	Episode       Episode `json:"episode"`
	Retained      bool    `json:"retained"`
	RetainReason  string  `json:"retainReason,omitempty"`
	Corrected     *bool   `json:"corrected,omitempty"`
	CorrectReason string  `json:"correctReason,omitempty"`
}

// EpisodePatch is the operator's edit, keep and release.
type EpisodePatch struct {
	Summary    *string            `json:"summary,omitempty"`
	Visibility *EpisodeVisibility `json:"visibility,omitempty"`
	Retained   *bool              `json:"retained,omitempty"`
}

// Card is what every episode read answers: rendered lines, never records.
type Card struct {
	Card  string `json:"card"`
	Count int    `json:"count"`
	// Episodes are the card's notes as records, newest first; only the
	// operator lane gets them (the CLI's --json).
	Episodes []Episode `json:"episodes,omitempty"`
}
