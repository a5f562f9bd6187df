package discordtest

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"time"
)

// discordEpochMS is the first millisecond of 2015, the origin of Discord's
// snowflake timestamps.
const discordEpochMS = 1420070400000

// snowflakes mints ids shaped like Discord's: a decimal uint64 whose top 42
// bits are milliseconds since the Discord epoch. Code that parses ids (for
// example discordgo.SnowflakeTimestamp or shard routing) then behaves as it
// would against Discord.
type snowflakes struct {
	mu     sync.Mutex
	lastMS int64
	inc    int64
}

func (g *snowflakes) next() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := time.Now().UnixMilli() - discordEpochMS
	if ms <= g.lastMS {
		g.inc++
		if g.inc > 0xFFF {
			g.lastMS++
			g.inc = 0
		}
		ms = g.lastMS
	} else {
		g.lastMS = ms
		g.inc = 0
	}
	const worker, process = 1, 1
	id := uint64(ms)<<22 | worker<<17 | process<<12 | uint64(g.inc)
	return strconv.FormatUint(id, 10)
}

// randomHex returns n random bytes as hex, for session ids and tokens.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
