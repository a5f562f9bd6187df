package commands

import (
	"testing"

	"github.com/clankie/clankie/lang"
)

// testCatalog is the embedded catalog, as the bridges load it.
func testCatalog(t testing.TB) *lang.Catalog {
	t.Helper()
	c, err := lang.Load()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// english is the printer an interaction without a translated locale gets.
func english(t testing.TB) *lang.Printer { return testCatalog(t).English() }

// inEnglish is a message in English, as the tests expect replies.
func inEnglish(t testing.TB, id lang.ID, args lang.Args) string { return english(t).Say(id, args) }
