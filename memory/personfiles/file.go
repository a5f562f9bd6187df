package personfiles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// EncodeFile renders a person log in the store's on-disk format (a compacted
// log: the header, one line per fact, one per idempotency record), for tools
// and benchmarks that seed a memory root without a durable write per fact
// (write it under FileName(subject) in Dir; with no catalog in Dir the
// service counts such files at its next start). When proposalIDs is not nil,
// fact i gets an idempotency record under proposalIDs[i], as a proposal
// would have left.
func EncodeFile(subject api.Subject, facts []api.Fact, proposalIDs []string) ([]byte, error) {
	pf := personFile{Person: people.Person{Subject: subject, Facts: facts}}
	for i, id := range proposalIDs {
		b, _ := json.Marshal(facts[i])
		sum := sha256.Sum256(b)
		pf.Proposals = append(pf.Proposals, people.ProposalRecord{ProposalID: id, Digest: hex.EncodeToString(sum[:16]), FactID: facts[i].FactID})
	}
	return encodeSnapshot(&pf)
}

// DecodeFile reads a person's facts from the bytes of their file as the
// store does: a person log (a torn tail ignored) or a schema-1 file. The
// crash test (internal/crashtest) checks the disk after a kill with it, so
// it is exported though no command calls it; .ci/run's deadcode check
// allows exactly this one.
func DecodeFile(b []byte) (api.Subject, []api.Fact, error) {
	if bytes.HasPrefix(b, []byte(`{"schemaVersion":2,`)) {
		pf, _, err := decodeLog(b)
		if err != nil {
			return api.Subject{}, nil, err
		}
		return pf.Subject, pf.Facts, nil
	}
	subject, facts, _, err := decodeLegacy(b)
	return subject, facts, err
}
