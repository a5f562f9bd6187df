package discordtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// Modal is a form the bot answered an interaction with (callback type 9),
// as it was sent.
type Modal struct {
	CustomID string
	Title    string
	Inputs   []TextInput
}

// TextInput is one text input of a Modal, one per action row.
type TextInput struct {
	CustomID    string
	Label       string
	Style       discordgo.TextInputStyle
	Required    bool
	MinLength   int
	MaxLength   int
	Value       string
	Placeholder string
}

// ModalValue is one text input's value in a submit.
type ModalValue struct {
	CustomID string
	Value    string
}

// ModalSpec describes a modal submit (interaction type 5) as Discord
// delivers it: the modal's custom_id and each text input's value, from
// the person who filled it in. Discord sends back whatever custom_id and
// values the client sends, so a test may send any (a forged one); use
// Interaction.SubmitSpec for the submit of a modal the bot opened.
type ModalSpec struct {
	// GuildID, ChannelID, UserID, Username, Roles, Permissions, Locale
	// and Deadline are as in InteractionSpec; UserID is required.
	GuildID     string
	ChannelID   string
	UserID      string
	Username    string
	Roles       []string
	Permissions *int64
	Locale      discordgo.Locale
	Deadline    time.Duration
	CustomID    string
	Values      []ModalValue
}

// Submit delivers a modal submit over the gateway, as Interact delivers a
// command; WaitReply and the other waits work as for a command.
func (f *Fake) Submit(ctx context.Context, spec ModalSpec) *Interaction {
	f.t.Helper()
	in, err := f.newSubmit(spec)
	return f.dispatch(ctx, "Submit", in, err)
}

// SubmitHTTP delivers a modal submit to an Interactions Endpoint URL, as
// InteractHTTP delivers a command.
func (f *Fake) SubmitHTTP(ctx context.Context, endpoint string, spec ModalSpec) *Interaction {
	f.t.Helper()
	in, err := f.newSubmit(spec)
	return f.postInteraction(ctx, "SubmitHTTP", endpoint, in, err)
}

// BuildSubmit makes a modal submit from spec without delivering it, for a
// test that answers or POSTs it itself.
func (f *Fake) BuildSubmit(spec ModalSpec) (*Interaction, error) { return f.newSubmit(spec) }

func (f *Fake) newSubmit(spec ModalSpec) (*Interaction, error) {
	if spec.UserID == "" {
		return nil, errors.New("ModalSpec.UserID is required")
	}
	is := InteractionSpec{GuildID: spec.GuildID, ChannelID: spec.ChannelID, UserID: spec.UserID, Username: spec.Username,
		Roles: spec.Roles, Permissions: spec.Permissions, Locale: spec.Locale, Deadline: spec.Deadline}
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.startLocked(discordgo.InteractionModalSubmit, is)
	in.CustomID = spec.CustomID
	rows := make([]any, 0, len(spec.Values))
	for i, v := range spec.Values {
		rows = append(rows, map[string]any{"type": int(discordgo.ActionsRowComponent), "id": 2*i + 1, "components": []any{
			map[string]any{"type": int(discordgo.TextInputComponent), "id": 2*i + 2, "custom_id": v.CustomID, "value": v.Value},
		}})
	}
	f.finishLocked(in, is, map[string]any{"custom_id": spec.CustomID, "components": rows}, nil)
	return in, nil
}

// WaitModal waits for the accepted callback and returns its modal; an
// error when the interaction was answered otherwise.
func (in *Interaction) WaitModal(ctx context.Context) (Modal, error) {
	cb, err := in.WaitCallback(ctx)
	if err != nil {
		return Modal{}, err
	}
	if cb.Type != discordgo.InteractionResponseModal || cb.Modal == nil {
		return Modal{}, fmt.Errorf("interaction %s was answered with callback type %d (%q), not a modal", in.ID, cb.Type, cb.Content)
	}
	return *cb.Modal, nil
}

// SubmitSpec is the submit of the modal the bot answered this interaction
// with, by the same person in the same channel: each input holds its
// prefilled value unless values names it (by custom_id). It fails when the
// interaction was not answered with a modal.
func (in *Interaction) SubmitSpec(values map[string]string) (ModalSpec, error) {
	f := in.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.acked < 0 || in.callbacks[in.acked].Modal == nil {
		return ModalSpec{}, fmt.Errorf("interaction %s was not answered with a modal", in.ID)
	}
	m := in.callbacks[in.acked].Modal
	spec := ModalSpec{GuildID: in.GuildID, ChannelID: in.ChannelID, UserID: in.UserID, Username: in.spec.Username,
		Roles: in.spec.Roles, Permissions: in.spec.Permissions, Locale: in.spec.Locale, CustomID: m.CustomID}
	for _, ti := range m.Inputs {
		v := ti.Value
		if nv, ok := values[ti.CustomID]; ok {
			v = nv
		}
		spec.Values = append(spec.Values, ModalValue{CustomID: ti.CustomID, Value: v})
	}
	return spec, nil
}

// Discord's limits on a modal. Its OpenAPI description holds the lengths
// of the title, custom_ids, labels, values, placeholders and min/max
// lengths (checked again here for a fake without WithSpec); the row count,
// one text input per row, required labels, unique custom_ids, a known
// style, min_length ≤ max_length and a prefilled value within max_length
// it does not.
const (
	maxModalTitle  = 45
	maxModalRows   = 5
	maxInputLabel  = 45
	maxInputValue  = 4000
	maxPlaceholder = 100
)

// modalRow and modalInput are a modal's body as the bot sends it.
type modalRow struct {
	Type       discordgo.ComponentType `json:"type"`
	Components []modalInput            `json:"components"`
}

type modalInput struct {
	Type        discordgo.ComponentType  `json:"type"`
	CustomID    *string                  `json:"custom_id"`
	Style       discordgo.TextInputStyle `json:"style"`
	Label       *string                  `json:"label"`
	Value       *string                  `json:"value"`
	Placeholder *string                  `json:"placeholder"`
	Required    *bool                    `json:"required"`
	MinLength   *int                     `json:"min_length"`
	MaxLength   *int                     `json:"max_length"`
}

// validateModal applies Discord's limits to a modal callback's data and
// returns the modal as sent.
func validateModal(d *msgBody) (*Modal, []fieldError) {
	var errs []fieldError
	data := []string{"data"}
	m := &Modal{CustomID: d.CustomID, Title: d.Title}
	if n := utf8.RuneCountInString(d.Title); n < 1 || n > maxModalTitle {
		errs = append(errs, badLength(sub(data, "title"), 1, maxModalTitle))
	}
	if n := utf8.RuneCountInString(d.CustomID); n < 1 || n > maxCustomID {
		errs = append(errs, badLength(sub(data, "custom_id"), 1, maxCustomID))
	}
	var rows []modalRow
	if !hasJSON(d.Components) || json.Unmarshal(d.Components, &rows) != nil {
		return m, append(errs, fieldError{sub(data, "components"), "BASE_TYPE_REQUIRED", "This field is required"})
	}
	if len(rows) > maxModalRows {
		errs = append(errs, badLength(sub(data, "components"), 1, maxModalRows))
	}
	seen := map[string]bool{}
	for i, row := range rows {
		p := sub(data, "components", strconv.Itoa(i))
		if row.Type != discordgo.ActionsRowComponent {
			errs = append(errs, fieldError{sub(p, "type"), "COMPONENT_TYPE_INVALID", "A modal's rows must be action rows."})
			continue
		}
		if len(row.Components) != 1 {
			errs = append(errs, fieldError{sub(p, "components"), "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "An action row in a modal holds exactly one text input."})
			continue
		}
		ti := row.Components[0]
		ip := sub(p, "components", "0")
		if ti.Type != discordgo.TextInputComponent {
			errs = append(errs, fieldError{sub(ip, "type"), "COMPONENT_TYPE_INVALID", "A modal's action rows hold text inputs."})
			continue
		}
		in := TextInput{Style: ti.Style, Required: ti.Required == nil || *ti.Required}
		if e, ok := checkCustomID(sub(ip, "custom_id"), ti.CustomID, seen); !ok {
			errs = append(errs, e)
		} else {
			in.CustomID = *ti.CustomID
		}
		if ti.Style != discordgo.TextInputShort && ti.Style != discordgo.TextInputParagraph {
			errs = append(errs, fieldError{sub(ip, "style"), "BASE_TYPE_CHOICES", "Value must be one of (1, 2)."})
		}
		if ti.Label == nil || *ti.Label == "" {
			errs = append(errs, fieldError{sub(ip, "label"), "BASE_TYPE_REQUIRED", "This field is required"})
		} else if utf8.RuneCountInString(*ti.Label) > maxInputLabel {
			errs = append(errs, tooLong(sub(ip, "label"), maxInputLabel))
		} else {
			in.Label = *ti.Label
		}
		if ti.Placeholder != nil {
			in.Placeholder = *ti.Placeholder
			if utf8.RuneCountInString(in.Placeholder) > maxPlaceholder {
				errs = append(errs, tooLong(sub(ip, "placeholder"), maxPlaceholder))
			}
		}
		lo, hi := 0, maxInputValue
		if ti.MinLength != nil {
			lo = *ti.MinLength
			if lo < 0 || lo > maxInputValue {
				errs = append(errs, fieldError{sub(ip, "min_length"), "NUMBER_TYPE_MAX", "int value should be between 0 and 4000."})
			}
		}
		if ti.MaxLength != nil {
			hi = *ti.MaxLength
			if hi < 1 || hi > maxInputValue {
				errs = append(errs, fieldError{sub(ip, "max_length"), "NUMBER_TYPE_MAX", "int value should be between 1 and 4000."})
			}
		}
		if lo > hi {
			errs = append(errs, fieldError{sub(ip, "min_length"), "TEXT_INPUT_LENGTH_INVALID", "min_length must not exceed max_length."})
		}
		in.MinLength, in.MaxLength = lo, hi
		if ti.Value != nil {
			in.Value = *ti.Value
			if n := utf8.RuneCountInString(in.Value); n > min(hi, maxInputValue) {
				errs = append(errs, tooLong(sub(ip, "value"), min(hi, maxInputValue)))
			}
		}
		m.Inputs = append(m.Inputs, in)
	}
	return m, errs
}
