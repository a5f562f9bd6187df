package people

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/clankie/clankie/api"
)

// EncodeFile renders a person log in the store's on-disk format (a compacted
// log: the header, one line per fact, one per idempotency record), for tools
// and benchmarks that seed a memory root without a durable write per fact
// (write it under FileName(subject) in Dir; with no catalog in Dir the
// service counts such files at its next start). When proposalIDs is not nil,
// fact i gets an idempotency record under proposalIDs[i], as a proposal
// would have left.
func EncodeFile(subject api.Subject, facts []api.Fact, proposalIDs []string) ([]byte, error) {
	pf := personFile{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: facts}
	for i, id := range proposalIDs {
		b, _ := json.Marshal(facts[i])
		sum := sha256.Sum256(b)
		pf.Proposals = append(pf.Proposals, proposalRecord{ProposalID: id, Digest: hex.EncodeToString(sum[:16]), FactID: facts[i].FactID})
	}
	return encodeSnapshot(&pf)
}

// EncodeLegacyFile renders the schema-1 person file (one JSON document) the
// store migrates, for tests and benchmarks of that migration and of the
// whole-file write it replaced.
func EncodeLegacyFile(subject api.Subject, facts []api.Fact, proposalIDs []string) ([]byte, error) {
	lf := legacyFile{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: facts}
	for i, id := range proposalIDs {
		b, _ := json.Marshal(facts[i])
		sum := sha256.Sum256(b)
		lf.Proposals = append(lf.Proposals, proposalRecord{ProposalID: id, Digest: hex.EncodeToString(sum[:16]), FactID: facts[i].FactID})
	}
	return json.Marshal(lf)
}

// DecodeFile reads a person's facts from the bytes of their file as the
// store does, for tools, tests and the baseline of the recall benchmark: a
// person log (a torn tail ignored) or a schema-1 file.
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
