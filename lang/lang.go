// Package lang is Clankie's message catalog: every sentence a person reads
// on Discord, in English and in each language Discord users most often
// choose, kept in one message file per language (messages/<tag>.json,
// embedded) and rendered by go-i18n, which brings CLDR plural rules,
// language matching and the fallback to English.
//
// A caller is given a *Catalog at construction (the bridges load one and
// pass it down) and renders with the Printer for the locale Discord sent:
// the user's locale for an ephemeral reply, the server's for a message
// everyone in a channel reads. A locale the catalog does not translate
// (en-US, zh-CN, anything unknown) is English.
//
// Adding a message: declare its id in ids.go (the constant's value is the
// key), write the English sentence under that key in messages/en.json,
// and the same sentence in every other messages/<tag>.json. Placeholders
// are template fields ({{.Name}}), filled from Args; a sentence that
// depends on a number is a plural message ({"one": …, "other": …}; Japanese
// has "other" only) rendered with Printer.Count, whose number is
// {{.Count}}. The catalog test fails when a language lacks a key or a
// plural form, when a translation's placeholders or markdown (**, `,
// <@…>, <#…>, <t:…>) differ from the English, or when ids.go and en.json
// disagree. Moving English constants into the catalog is therefore
// mechanical: one constant, one key per file, and the call site becomes
// p.Say(lang.TheID, lang.Args{…}).
//
// Adding a language: add messages/<tag>.json with every key (the test
// names each missing one), and its Discord locale to Locales.
//
// Slash commands are localized from keys derived from their path
// ("cmd.<command>[.<subcommand>][.<option>]" + ".name" or ".description",
// and ".choice.<value>" for a choice), filled in by Catalog.Command; a
// context-menu command's name from "menu.<its name>" (its name, and its
// translations, may hold spaces and capitals: they only have to be 1–32
// characters).
package lang

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	"github.com/bwmarrin/discordgo"
	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

//go:embed messages/*.json
var messageFiles embed.FS

// ID names a message: a key of every message file.
type ID string

// Args fill a message's template fields by name.
type Args map[string]any

// Locales are the Discord locales the catalog translates into besides
// English, in the order command localizations list them.
func Locales() []discordgo.Locale {
	return []discordgo.Locale{discordgo.German, discordgo.French, discordgo.SpanishES, discordgo.PortugueseBR, discordgo.Japanese}
}

// Catalog holds every message in every language, loaded once.
type Catalog struct {
	bundle   *i18n.Bundle
	matcher  language.Matcher
	tags     []language.Tag
	printers map[language.Tag]*Printer
}

// Load parses the embedded message files. An error is a broken message
// file, which the catalog test catches before it ships.
func Load() (*Catalog, error) {
	b := i18n.NewBundle(language.English)
	entries, err := fs.ReadDir(messageFiles, "messages")
	if err != nil {
		return nil, fmt.Errorf("lang: read message files: %w", err)
	}
	c := &Catalog{bundle: b, printers: map[language.Tag]*Printer{}}
	english := 0
	for _, e := range entries {
		f, err := b.LoadMessageFileFS(messageFiles, path.Join("messages", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("lang: %s: %w", e.Name(), err)
		}
		if f.Tag == language.English {
			english = len(f.Messages)
		}
	}
	if english == 0 {
		return nil, fmt.Errorf("lang: no English messages")
	}
	// The bundle's first tag is English, which the matcher answers when
	// nothing fits.
	c.tags = b.LanguageTags()
	c.matcher = language.NewMatcher(c.tags)
	for _, t := range c.tags {
		c.printers[t] = &Printer{loc: i18n.NewLocalizer(b, t.String())}
	}
	return c, nil
}

// Printer returns the printer for a Discord locale ("de", "es-ES",
// "en-US", …): the closest language the catalog has, English when none is
// close (or the locale is empty or not a language tag).
func (c *Catalog) Printer(locale string) *Printer {
	t, err := language.Parse(locale)
	if err != nil {
		return c.printers[language.English]
	}
	_, i, conf := c.matcher.Match(t)
	if conf == language.No {
		return c.printers[language.English]
	}
	return c.printers[c.tags[i]]
}

// English is the printer of the default language.
func (c *Catalog) English() *Printer { return c.printers[language.English] }

// Localizations returns id rendered in each of Locales, for a command's
// name_localizations or description_localizations; nil when id is no
// message.
func (c *Catalog) Localizations(id ID) *map[discordgo.Locale]string {
	out := make(map[discordgo.Locale]string, len(Locales()))
	for _, l := range Locales() {
		if s := c.Printer(string(l)).text(id); s != "" {
			out[l] = s
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &out
}

// Command fills in a slash command's descriptions (English, from the
// catalog) and the localizations of its name, description, options (to
// any depth) and choices, from the keys its path derives
// ("cmd.voice.consent.action.description"). A context-menu command (a
// user or message command) has a name and nothing else: only its name is
// localized, from "menu.<name>". It returns def, so a definition is
// written as c.Command(&discordgo.ApplicationCommand{…}). A missing
// English key leaves a description empty, which Discord refuses at
// registration, and a test of each command catches first.
func (c *Catalog) Command(def *discordgo.ApplicationCommand) *discordgo.ApplicationCommand {
	if def.Type == discordgo.UserApplicationCommand || def.Type == discordgo.MessageApplicationCommand {
		def.NameLocalizations = c.Localizations(ID("menu." + def.Name))
		return def
	}
	key := "cmd." + def.Name
	def.NameLocalizations = c.Localizations(ID(key + ".name"))
	def.Description = c.English().text(ID(key + ".description"))
	def.DescriptionLocalizations = c.Localizations(ID(key + ".description"))
	c.options(key, def.Options)
	return def
}

func (c *Catalog) options(parent string, opts []*discordgo.ApplicationCommandOption) {
	for _, o := range opts {
		key := parent + "." + o.Name
		o.Description = c.English().text(ID(key + ".description"))
		o.NameLocalizations = deref(c.Localizations(ID(key + ".name")))
		o.DescriptionLocalizations = deref(c.Localizations(ID(key + ".description")))
		for _, ch := range o.Choices {
			id := ChoiceID(key, fmt.Sprint(ch.Value))
			if name := c.English().text(id); name != "" {
				ch.Name = name
			}
			ch.NameLocalizations = deref(c.Localizations(id))
		}
		c.options(key, o.Options)
	}
}

func deref(m *map[discordgo.Locale]string) map[discordgo.Locale]string {
	if m == nil {
		return nil
	}
	return *m
}

// ChoiceID is the key of a choice's name: the option's key (without
// ".name"), ".choice.", and the choice's value. Replies that show a chosen
// value (a fact's kind) name it with the same words.
func ChoiceID(optionKey, value string) ID { return ID(optionKey + ".choice." + value) }

// Printer renders messages in one language.
type Printer struct {
	loc *i18n.Localizer
}

// Say renders a message with its fields filled from args (nil when it has
// none). A message missing in the printer's language is English; an id
// missing everywhere renders as the id, which the catalog test prevents.
func (p *Printer) Say(id ID, args Args) string {
	return p.render(id, args, nil)
}

// Count renders a plural message for n, which its template reads as
// {{.Count}}.
func (p *Printer) Count(id ID, n int, args Args) string {
	all := Args{"Count": n}
	for k, v := range args {
		all[k] = v
	}
	return p.render(id, all, n)
}

// Render renders a message carried as a value (Msg), with any Msg among
// its args rendered first in the same language.
func (p *Printer) Render(m Msg) string {
	args := make(Args, len(m.Args))
	for k, v := range m.Args {
		if sub, ok := v.(Msg); ok {
			v = p.Render(sub)
		}
		args[k] = v
	}
	return p.Say(m.ID, args)
}

// text is a message without fields, "" when id is no message.
func (p *Printer) text(id ID) string {
	s, _ := p.loc.Localize(&i18n.LocalizeConfig{MessageID: string(id)})
	return s
}

func (p *Printer) render(id ID, args Args, count any) string {
	lc := &i18n.LocalizeConfig{MessageID: string(id), PluralCount: count}
	if len(args) > 0 {
		lc.TemplateData = map[string]any(args)
	}
	s, err := p.loc.Localize(lc)
	if s == "" && err != nil {
		return string(id)
	}
	return s
}

// Msg is a message not rendered yet: what a producer that does not know
// the reader's language (the voice session's status) hands to the one
// that does. An arg may itself be a Msg.
type Msg struct {
	ID   ID
	Args Args
}
