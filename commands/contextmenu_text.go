package commands

// The words of the context menus ("Remember this", "What Clankie knows",
// "Remember about them") and of /person-memory export, in one place so
// they are translated together. Names, titles and labels are Discord's
// to show: a context menu's name is 1–32 characters, a modal's title and
// a text input's label at most 45 (the tests hold them to it).
const (
	// Context menu names, as registered and as invocations carry them.
	nameRememberThis      = "Remember this"
	nameWhatClankieKnows  = "What Clankie knows"
	nameRememberAboutThem = "Remember about them"

	// The forms.
	titleRememberThis      = "Remember this"
	titleRememberAboutThem = "Remember about them"
	labelFact              = "What to remember"
	labelExpires           = "Forget after (optional)"
	holderExpires          = "7d, 2w or a date like 2027-01-31"
	// labelKinds names every kind (api.Kinds; a test holds it to them).
	labelKinds = "person-fact, preference or relationship-note"

	// Refusals.
	sayBotMessage          = "That message was written by a bot or a webhook; person memory is about people."
	sayOnlyYourOwnMessages = "You can only remember your own messages; remembering what someone else wrote needs the memory role or Manage Server."
	sayMessageElsewhere    = "That message is in another channel; use Remember this in the channel it was posted in."
	sayStaleForm           = "That form doesn't match anything I showed you here (it may be out of date), so I stored nothing. Open it again from the message or the member."
	sayUnknownKind         = "I don't know that kind; write person-fact, preference or relationship-note, or leave it empty. Nothing was stored."

	// /person-memory export.
	sayExportedNone = "I keep nothing about you in this server; %s holds an empty list."
	sayExportedOne  = "Here is the one fact I keep about you in this server, in %s."
	sayExportedMany = "Here are the %d facts I keep about you in this server, in %s."
	// exportFileName is the attachment's name, by server id.
	exportFileName = "clankie-memory-%s.json"
	// exportDescription describes the subcommand (at most 100 characters).
	exportDescription = "Get a file with everything I keep about you in this server"
)
