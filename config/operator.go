package config

// Operator configures the operator CLI (`clankie memory status`, `people`,
// `person`, `fact`, `episodes`, `episode`…): where the memory service
// answers, the operator's bearer, and logging.
type Operator struct {
	OperatorToken
	Memory MemoryClient
	Log    Log
}

// Validate names the variable that is wrong, never echoing the token.
func (o Operator) Validate() error {
	for _, v := range []Validator{Tokens{OperatorToken: o.OperatorToken}, o.Memory, o.Log} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// LoadOperator reads and validates the operator CLI's settings. An empty
// operator token is not an error here: the CLI then reads the minted one with
// ResolveBearer and says plainly when there is none.
func LoadOperator() (Operator, error) { return load[Operator]() }

// LoadMemoryClient reads and validates only where the memory service
// answers (for `clankie health`, which needs no credential).
func LoadMemoryClient() (MemoryClient, error) { return load[MemoryClient]() }
