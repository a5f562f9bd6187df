package commands

// The names of the context menus ("Remember this", "What Clankie knows",
// "Remember about them") as registered and as invocations carry them; the
// catalog translates them under "menu.<name>" (1–32 characters, the tests
// hold every language to it), and every other word of the menus, their
// forms and /person-memory export is a catalog message.
const (
	nameRememberThis      = "Remember this"
	nameWhatClankieKnows  = "What Clankie knows"
	nameRememberAboutThem = "Remember about them"

	// exportFileName is the export attachment's name, by server id.
	exportFileName = "clankie-memory-%s.json"
)
