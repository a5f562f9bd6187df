/*
 * shim.c: the small C surface clankie's Go code calls inside opus.wasm.
 *
 * The Go side (voice/opus) owns all buffers through shim_alloc/shim_free and
 * passes pointers into linear memory; every function returns a negative
 * libopus error code on failure instead of aborting, so a bad packet from the
 * network becomes a Go error, never a trap.
 */
#include <stdlib.h>
#include "opus.h"

#define EXPORT(name) __attribute__((export_name(#name), visibility("default")))

EXPORT(shim_alloc) void *shim_alloc(int size) {
	if (size <= 0) {
		return NULL;
	}
	return malloc((size_t)size);
}

EXPORT(shim_free) void shim_free(void *p) { free(p); }

/*
 * shim_encoder_create returns an encoder for 48 kHz audio with the given
 * channel count, application, bitrate (bits/s), complexity (0..10) and
 * in-band FEC with the expected packet loss in percent (0 disables FEC).
 * On failure it returns NULL and writes the libopus error to *err.
 */
EXPORT(shim_encoder_create)
OpusEncoder *shim_encoder_create(int channels, int application, int bitrate, int complexity, int loss_percent, int *err) {
	OpusEncoder *enc = opus_encoder_create(48000, channels, application, err);
	if (enc == NULL) {
		return NULL;
	}
	int rc = opus_encoder_ctl(enc, OPUS_SET_BITRATE(bitrate));
	if (rc == OPUS_OK) {
		rc = opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(complexity));
	}
	if (rc == OPUS_OK) {
		rc = opus_encoder_ctl(enc, OPUS_SET_INBAND_FEC(loss_percent > 0 ? 1 : 0));
	}
	if (rc == OPUS_OK) {
		rc = opus_encoder_ctl(enc, OPUS_SET_PACKET_LOSS_PERC(loss_percent));
	}
	if (rc != OPUS_OK) {
		opus_encoder_destroy(enc);
		*err = rc;
		return NULL;
	}
	*err = OPUS_OK;
	return enc;
}

/* shim_encode encodes one frame of interleaved PCM16 and returns the packet length or an error. */
EXPORT(shim_encode)
int shim_encode(OpusEncoder *enc, const opus_int16 *pcm, int frame_size, unsigned char *out, int max_out) {
	return opus_encode(enc, pcm, frame_size, out, max_out);
}

EXPORT(shim_encoder_destroy) void shim_encoder_destroy(OpusEncoder *enc) { opus_encoder_destroy(enc); }

/* shim_decoder_create returns a 48 kHz decoder with the given channel count, or NULL with *err set. */
EXPORT(shim_decoder_create)
OpusDecoder *shim_decoder_create(int channels, int *err) {
	return opus_decoder_create(48000, channels, err);
}

/*
 * shim_decode decodes one packet (or conceals a lost one when data is NULL)
 * into interleaved PCM16 and returns samples per channel or an error.
 */
EXPORT(shim_decode)
int shim_decode(OpusDecoder *dec, const unsigned char *data, int len, opus_int16 *pcm, int frame_size, int decode_fec) {
	return opus_decode(dec, data, len, pcm, frame_size, decode_fec);
}

EXPORT(shim_decoder_destroy) void shim_decoder_destroy(OpusDecoder *dec) { opus_decoder_destroy(dec); }
