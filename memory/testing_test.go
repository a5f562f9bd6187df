package memory

import (
	"os"

	"github.com/clankie/clankie/memory/durable"
)

func openRootForTest(dir string) (*os.Root, error) { return durable.OpenRoot(dir) }
