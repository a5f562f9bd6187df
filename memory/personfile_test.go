package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/clankie/clankie/api"
)

// legacyPersonFile is the schema-1 person file the store migrates: one JSON
// document per person, rewritten whole on every change. Tests and
// benchmarks write it from its shape here, so the migration is proven
// against the format rather than against the store's own encoder.
type legacyPersonFile struct {
	SchemaVersion int              `json:"schemaVersion"`
	Subject       api.Subject      `json:"subject"`
	Facts         []api.Fact       `json:"facts"`
	Proposals     []legacyProposal `json:"proposals,omitempty"`
}

type legacyProposal struct {
	ProposalID string `json:"proposalId"`
	Digest     string `json:"digest,omitempty"`
	FactID     string `json:"factId"`
}

// encodeLegacyFile renders a schema-1 person file; when proposalIDs is not
// nil, fact i gets an idempotency record under proposalIDs[i], as a
// proposal would have left.
func encodeLegacyFile(subject api.Subject, facts []api.Fact, proposalIDs []string) ([]byte, error) {
	lf := legacyPersonFile{SchemaVersion: 1, Subject: subject, Facts: facts}
	for i, id := range proposalIDs {
		b, _ := json.Marshal(facts[i])
		sum := sha256.Sum256(b)
		lf.Proposals = append(lf.Proposals, legacyProposal{ProposalID: id, Digest: hex.EncodeToString(sum[:16]), FactID: facts[i].FactID})
	}
	return json.Marshal(lf)
}
