// Package personfiles is the file engine of the person memory: a
// people.Storer that keeps one append-only JSON-lines log per (guildId,
// userId) under <root>/discord-people. It knows no rule; people.Memory
// decides every change and hands it a people.Change to make durable.
//
// A change is one small line: durable first in the store-wide journal
// (memory/journal), whose fdatasync is shared by every change that arrived
// meanwhile (group commit), then appended to the person's log, which is
// compacted once it passes 5/4 of its live size. A checkpoint keeps every
// person's count in the catalog, so start-up reads the catalog and the
// short journal and no person log; people are loaded on first access (a
// recall reads their facts alone, a change their whole log, idempotency
// records included), and a cache bounded by what it holds decoded
// (CLANKIE_MEMORY_CACHE_MB, 128 MiB unless set) keeps busy people, so the
// service's memory stays flat however many people it knows. See log.go,
// journal.go and catalog.go for the files.
package personfiles
