package opus

import (
	"context"
	"errors"
	"testing"
)

// panickingPion stands in for pion/opus on a packet it cannot handle.
type panickingPion struct{}

func (panickingPion) DecodeToInt16([]byte, []int16) (int, error) {
	var s []int16
	return int(s[3]), nil // index out of range, as a parser bug would
}

// TestGoDecoderPanicIsReportedAndReset: a panic inside pion/opus is
// reported as ErrDecoderPanicked (still an ErrInvalidPacket, so callers
// skip the packet) and the decoder starts afresh: the next packet decodes.
func TestGoDecoderPanicIsReportedAndReset(t *testing.T) {
	ctx := context.Background()
	d, err := NewGoDecoder(1)
	if err != nil {
		t.Fatal(err)
	}
	d.dec = panickingPion{}
	pcm := make([]int16, MaxFrameSamples)
	silk := []byte{0x08, 0x00} // SILK NB 20 ms, one frame
	if _, err := d.Decode(ctx, silk, pcm); !errors.Is(err, ErrDecoderPanicked) || !errors.Is(err, ErrInvalidPacket) {
		t.Fatalf("Decode with a panicking parser = %v, want ErrDecoderPanicked (an ErrInvalidPacket)", err)
	}
	if _, ok := d.dec.(panickingPion); ok {
		t.Fatal("the decoder that panicked was kept")
	}
	if _, err := d.Decode(ctx, silk, pcm); errors.Is(err, ErrDecoderPanicked) {
		t.Fatalf("after the reset: %v", err)
	}
}
