package memory

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/durable"
)

// BearersFile holds minted tokens, keyed by lane, 0600 in the memory root.
// Local clients (the CLI, `clankie up`) read it through config.ResolveBearer
// when their variable is unset.
const BearersFile = config.BearersFile

// minTokenLength is the shortest token accepted from bearers.json: the
// minimum config.Tokens.Validate applies to the variables.
const minTokenLength = 16

// Bearers recognises one token per lane of the lane table. Only SHA-256
// digests are kept, and every comparison looks at every lane's
// fixed-length digest, so neither a token's length nor which lane matched
// shows in the timing.
type Bearers struct {
	digests [][sha256.Size]byte
	lanes   []api.Lane
}

// LoadBearers takes tokens from the environment and mints the missing ones
// into <root>/bearers.json on first start. It returns which lanes were minted
// now (names only, never tokens).
func LoadBearers(root *os.Root, env config.Tokens) (*Bearers, []string, error) {
	fromEnv := env.ByLane()
	stored := map[api.Lane]string{}
	if b, err := root.ReadFile(BearersFile); err == nil {
		if err := json.Unmarshal(b, &stored); err != nil {
			return nil, nil, fmt.Errorf("%s in the memory root cannot be parsed; move it away to mint new tokens", BearersFile)
		}
		_ = root.Chmod(BearersFile, durable.FileMode)
	} else if !durable.IsNotExist(err) {
		return nil, nil, fmt.Errorf("read %s: %w", BearersFile, err)
	}
	laneVars := api.Lanes()
	var minted []string
	for _, l := range laneVars {
		if fromEnv[l.Lane] == "" && stored[l.Lane] == "" {
			stored[l.Lane] = mintToken()
			minted = append(minted, string(l.Lane))
		}
	}
	if len(minted) > 0 {
		b, _ := json.MarshalIndent(stored, "", "  ")
		if err := durable.WriteFile(root, BearersFile, b); err != nil {
			return nil, nil, fmt.Errorf("write %s: %w", BearersFile, err)
		}
	}
	bs := &Bearers{digests: make([][sha256.Size]byte, len(laneVars)), lanes: make([]api.Lane, len(laneVars))}
	source := make([]string, len(laneVars)) // where each lane's token came from, for sentences
	for i, l := range laneVars {
		tok, where := fromEnv[l.Lane], l.TokenVar
		if tok == "" {
			tok, where = stored[l.Lane], fmt.Sprintf("the %s entry of %s in the memory root", l.Lane, BearersFile)
			if err := checkStoredToken(tok); err != nil {
				return nil, nil, fmt.Errorf("%s in the memory root holds an unusable token for the %s lane: it %v; fix that entry, or remove it to have a new token minted", BearersFile, l.Lane, err)
			}
		}
		bs.digests[i] = sha256.Sum256([]byte(tok))
		bs.lanes[i] = l.Lane
		source[i] = where
		for j := range i {
			if bs.digests[j] == bs.digests[i] {
				return nil, nil, fmt.Errorf("the %s token (%s) and the %s token (%s) are the same; every lane needs its own token, or one bearer would act as another", laneVars[j].Lane, source[j], l.Lane, where)
			}
		}
	}
	return bs, minted, nil
}

// checkStoredToken applies the variables' rule (config.Tokens.Validate) to
// a token read from bearers.json. The sentence never holds the token.
func checkStoredToken(tok string) error {
	if len(tok) < minTokenLength {
		return fmt.Errorf("is shorter than %d characters", minTokenLength)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return fmt.Errorf("contains whitespace")
	}
	return nil
}

func mintToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed") // the runtime guarantees it does not
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Authenticate returns the principal of an Authorization header value.
func (b *Bearers) Authenticate(header string) (api.Principal, bool) {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || tok == "" {
		return api.Principal{}, false
	}
	sum := sha256.Sum256([]byte(tok))
	match := -1
	for i := range b.digests {
		if subtle.ConstantTimeCompare(sum[:], b.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return api.Principal{}, false
	}
	return api.Principal{Lane: b.lanes[match]}, true
}
