package commands

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
)

// subExport is /person-memory export: your own copy.
const subExport = "export"

func exportDefinition() *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{
		Type: discordgo.ApplicationCommandOptionSubCommand,
		Name: subExport,
	}
}

// export answers with a file holding exactly the facts mine lists for the
// invoker in this server, as the memory service's records (ids, kind,
// body, visibility, dates, provenance ids), indented JSON. It asks the
// service for the subject's own view, which only the subject may read, so
// nothing about anyone else can be in it.
func (pm *personMemory) export(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
	say := pm.cat.Printer(inv.Locale)
	if !api.ValidSnowflake(inv.GuildID) {
		return interaction.Reply{}, interaction.ErrStale
	}
	resp, err := pm.mem.Mine(ctx, inv.GuildID, inv.User.ID, inv.User.ID)
	if err != nil {
		return interaction.Reply{}, memoryError(say, err, readEffect)
	}
	facts := resp.Facts
	if facts == nil {
		facts = []api.Fact{}
	}
	data, err := json.MarshalIndent(facts, "", "  ")
	if err != nil {
		return interaction.Reply{}, fmt.Errorf("encode the export: %w", err)
	}
	name := fmt.Sprintf(exportFileName, inv.GuildID)
	return interaction.Reply{
		Content: exportedReply(say, len(facts), name),
		Files:   []interaction.File{{Name: name, ContentType: "application/json", Data: append(data, '\n')}},
	}, nil
}

// exportedReply says how many facts the file holds.
func exportedReply(say *lang.Printer, n int, name string) string {
	if n == 0 {
		return say.Say(lang.ExportedNone, lang.Args{"File": code(name)})
	}
	return say.Count(lang.Exported, n, lang.Args{"File": code(name)})
}
