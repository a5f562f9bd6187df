package interaction

import (
	"context"
	"testing"
)

func TestMuxRoutesByPath(t *testing.T) {
	m := NewMux()
	m.Handle("person-memory/propose", reply("proposed"))
	m.Handle("person-memory/forget", reply("forgotten"))
	m.Handle("flat", reply("flat"))
	for _, tc := range []struct {
		name     string
		inv      Invocation
		want     string
		sentence string
	}{
		{"a subcommand", Invocation{Command: "person-memory", Subcommand: "propose"}, "proposed", ""},
		{"another subcommand", Invocation{Command: "person-memory", Subcommand: "forget"}, "forgotten", ""},
		{"a command without subcommands", Invocation{Command: "flat"}, "flat", ""},
		{"an unknown subcommand is a sentence", Invocation{Command: "person-memory", Subcommand: "recall"}, "", StaleSentence},
		{"a subcommand's name alone is not its path", Invocation{Command: "propose"}, "", StaleSentence},
		{"an unknown command is a sentence", Invocation{Command: "nope", Subcommand: "propose"}, "", StaleSentence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := m.Serve(context.Background(), tc.inv)
			if rep.Content != tc.want {
				t.Fatalf("reply %q, want %q", rep.Content, tc.want)
			}
			ue, ok := AsUserError(err)
			if tc.sentence == "" && err != nil || tc.sentence != "" && (!ok || ue.Sentence != tc.sentence) {
				t.Fatalf("error %v, want the sentence %q", err, tc.sentence)
			}
		})
	}
}

func TestMuxRefusesAPathRoutedTwice(t *testing.T) {
	m := NewMux()
	m.Handle("a/b", reply("1"))
	defer func() {
		if recover() == nil {
			t.Fatal("a second route for a/b was accepted")
		}
	}()
	m.Handle("a/b", reply("2"))
}
