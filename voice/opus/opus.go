// Package opus encodes 48 kHz Opus audio with libopus 1.3.1 compiled to
// WebAssembly and run by wazero, so the clankie binary stays CGO-free and
// static, and decodes it in pure Go with pion/opus (GoDecoder). No pure-Go
// Opus encoder exists; running the reference implementation in a sandbox
// also means a hostile input can at worst trap its own instance (an error
// here), never corrupt the process. The tests also decode with libopus in
// wasm (decoder_test.go), the reference GoDecoder is checked against.
//
// opus.wasm is rebuilt byte for byte by scripts/build-opus-wasm from the
// libopus source shipped in the npm package @discordjs/opus@0.10.0 (BSD, see
// LICENSE.libopus) and csrc/shim.c. See README.md for its sha256.
//
// A Runtime compiles the module once; each Encoder is its own module
// instance (its own linear memory), so encoders can run on different
// goroutines. A single Encoder or GoDecoder is not safe for concurrent use.
package opus

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

//go:embed opus.wasm
var wasmModule []byte

const (
	// SampleRate is the only rate this package speaks: Discord's.
	SampleRate = 48000
	// FrameSamples is the samples per channel in one 20 ms frame at 48 kHz.
	FrameSamples = 960
	// MaxFrameSamples is the samples per channel of the longest Opus packet (120 ms).
	MaxFrameSamples = 5760
	// MaxPacketBytes bounds one encoded packet (libopus's recommended maximum).
	MaxPacketBytes = 4000

	// memoryLimitPages caps each instance's linear memory at 16 MiB (64 KiB
	// pages); an encoder or decoder needs well under 1 MiB, so a runaway
	// allocation fails as an error instead of growing without bound.
	memoryLimitPages = 256
)

// SilenceFrame is the Opus packet of 20 ms of silence (one CELT frame) that
// Discord's voice protocol gives a meaning of its own: five of them end an
// utterance, the SFU synthesises it for a muted source, and DAVE passes it
// through unencrypted in both directions. It is the one definition of it;
// the media connection, DAVE and the tests' fake voice server all use it.
const SilenceFrame = "\xF8\xFF\xFE"

// IsSilence reports whether packet is SilenceFrame.
func IsSilence(packet []byte) bool { return string(packet) == SilenceFrame }

// Application tells the encoder what it is encoding (OPUS_APPLICATION_*).
type Application int32

const (
	// ApplicationVoIP favours speech intelligibility (high-pass, formant emphasis).
	ApplicationVoIP Application = 2048
	// ApplicationAudio favours faithfulness to the input; our default, see EncoderConfig.
	ApplicationAudio Application = 2049
	// ApplicationLowDelay disables the speech modes for minimal latency.
	ApplicationLowDelay Application = 2051
)

// Error is a libopus error code; its text is libopus's own error string.
type Error int32

const (
	ErrBadArg         Error = -1
	ErrBufferTooSmall Error = -2
	ErrInternal       Error = -3
	ErrInvalidPacket  Error = -4
	ErrUnimplemented  Error = -5
	ErrInvalidState   Error = -6
	ErrAllocFail      Error = -7
)

func (e Error) Error() string {
	switch e {
	case ErrBadArg:
		return "opus: invalid argument"
	case ErrBufferTooSmall:
		return "opus: buffer too small"
	case ErrInternal:
		return "opus: internal error"
	case ErrInvalidPacket:
		return "opus: corrupted stream"
	case ErrUnimplemented:
		return "opus: request not implemented"
	case ErrInvalidState:
		return "opus: invalid state"
	case ErrAllocFail:
		return "opus: memory allocation failed"
	}
	return fmt.Sprintf("opus: error %d", int32(e))
}

// ErrBroken reports that an earlier call trapped inside the module; the
// instance's state is undefined, so the Encoder refuses further work and
// the caller makes a new one.
var ErrBroken = errors.New("opus: codec instance trapped earlier and must be replaced")

// Runtime holds libopus compiled for this process. Make one at start, share
// it, and Close it last; Close also closes every Encoder made from it.
type Runtime struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
}

// NewRuntime compiles the embedded libopus module. It takes a few hundred
// milliseconds, so do it once per process.
func NewRuntime(ctx context.Context) (*Runtime, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(memoryLimitPages))
	compiled, err := rt.CompileModule(ctx, wasmModule)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("compile libopus module: %w", err)
	}
	if n := len(compiled.ImportedFunctions()); n != 0 {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("libopus module imports %d host functions, want none (rebuild with scripts/build-opus-wasm)", n)
	}
	return &Runtime{rt: rt, compiled: compiled}, nil
}

// Close releases the compiled module and every instance made from it.
func (r *Runtime) Close(ctx context.Context) error {
	return r.rt.Close(ctx)
}

// instance is one module instance plus the exported functions we call and a
// reusable call stack, so a steady-state Encode or Decode does not allocate.
type instance struct {
	mod    api.Module
	mem    api.Memory
	alloc  api.Function
	free   api.Function
	stack  []uint64
	broken bool
}

func (r *Runtime) instantiate(ctx context.Context) (*instance, error) {
	// An empty name lets any number of instances of the same module coexist.
	mod, err := r.rt.InstantiateModule(ctx, r.compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("instantiate libopus: %w", err)
	}
	in := &instance{mod: mod, mem: mod.Memory(), stack: make([]uint64, 8)}
	if in.alloc, err = in.fn("shim_alloc"); err != nil {
		return nil, errors.Join(err, mod.Close(ctx))
	}
	if in.free, err = in.fn("shim_free"); err != nil {
		return nil, errors.Join(err, mod.Close(ctx))
	}
	return in, nil
}

func (in *instance) fn(name string) (api.Function, error) {
	f := in.mod.ExportedFunction(name)
	if f == nil {
		return nil, fmt.Errorf("libopus module lacks export %s", name)
	}
	return f, nil
}

// call runs f with the given arguments and returns its first result as int32.
// A trap marks the instance broken.
func (in *instance) call(ctx context.Context, f api.Function, args ...uint64) (int32, error) {
	if in.broken {
		return 0, ErrBroken
	}
	n := copy(in.stack, args)
	if err := f.CallWithStack(ctx, in.stack[:max(n, 1)]); err != nil {
		in.broken = true
		return 0, fmt.Errorf("libopus trapped: %w", err)
	}
	return int32(uint32(in.stack[0])), nil
}

func (in *instance) malloc(ctx context.Context, size int) (uint32, error) {
	p, err := in.call(ctx, in.alloc, uint64(size))
	if err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, ErrAllocFail
	}
	return uint32(p), nil
}

// view returns the module memory [ptr, ptr+size) as a Go slice; valid until
// the module next grows its memory, so callers use it only between calls.
func (in *instance) view(ptr uint32, size int) ([]byte, error) {
	b, ok := in.mem.Read(ptr, uint32(size))
	if !ok {
		in.broken = true
		return nil, fmt.Errorf("libopus memory [%d, +%d) out of range", ptr, size)
	}
	return b, nil
}

func (in *instance) close(ctx context.Context) error {
	return in.mod.Close(ctx)
}

// writeInt16 stores pcm little-endian at ptr (wasm memory is little-endian).
func (in *instance) writeInt16(ptr uint32, pcm []int16) error {
	b, err := in.view(ptr, 2*len(pcm))
	if err != nil {
		return err
	}
	for i, s := range pcm {
		b[2*i] = byte(s)
		b[2*i+1] = byte(uint16(s) >> 8)
	}
	return nil
}

func validChannels(channels int) error {
	if channels != 1 && channels != 2 {
		return fmt.Errorf("opus: %d channels, want 1 or 2", channels)
	}
	return nil
}
