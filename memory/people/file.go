package people

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/clankie/clankie/api"
)

// EncodeFile renders a person file in the store's on-disk format, for tools
// and benchmarks that seed a memory root without a durable write per fact
// (write it under FileName(subject) in Dir). When proposalIDs is not nil,
// fact i gets an idempotency record under proposalIDs[i], as a proposal
// would have left.
func EncodeFile(subject api.Subject, facts []api.Fact, proposalIDs []string) ([]byte, error) {
	pf := personFile{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: facts}
	for i, id := range proposalIDs {
		b, _ := json.Marshal(facts[i])
		sum := sha256.Sum256(b)
		pf.Proposals = append(pf.Proposals, proposalRecord{ProposalID: id, Digest: hex.EncodeToString(sum[:16]), FactID: facts[i].FactID})
	}
	return json.Marshal(pf)
}

// DecodeFile parses a person file as the store does, for tools and for the
// baseline of the recall benchmark.
func DecodeFile(b []byte) (api.Subject, []api.Fact, error) {
	var pf personFile
	err := json.Unmarshal(b, &pf)
	return pf.Subject, pf.Facts, err
}
