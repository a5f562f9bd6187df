package api

import (
	"bytes"
	"encoding/json"
	"time"
)

// OptionalTime tells a field that was absent from one that was null, which a
// PATCH needs: absent keeps the value, null clears it.
type OptionalTime struct {
	Set   bool
	Value *time.Time
}

// UnmarshalJSON records that the field was present.
func (o *OptionalTime) UnmarshalJSON(b []byte) error {
	o.Set = true
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		o.Value = nil
		return nil
	}
	var t time.Time
	if err := json.Unmarshal(b, &t); err != nil {
		return err
	}
	o.Value = &t
	return nil
}

// MarshalJSON writes null when unset or cleared.
func (o OptionalTime) MarshalJSON() ([]byte, error) {
	if o.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*o.Value)
}

// IsZero lets omitzero drop an absent field.
func (o OptionalTime) IsZero() bool { return !o.Set }
