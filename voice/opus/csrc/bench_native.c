/*
 * bench_native.c: the native baseline for voice/opus's benchmarks (test
 * only; built with gcc by scripts/opus-native-bench, never shipped). It
 * encodes and decodes the same signal with the same settings as
 * BenchmarkEncode/BenchmarkDecode: 48 kHz stereo, OPUS_APPLICATION_AUDIO,
 * 64 kbit/s, complexity 10, 20 ms frames of 300 + 700 + 2500 Hz tones.
 *
 *   bench_native FRAMES   prints "encode_ns_per_frame=N decode_ns_per_frame=M"
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "opus.h"

#define FRAME 960
#define CHANNELS 2

static double now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
	int frames = argc > 1 ? atoi(argv[1]) : 500;
	if (frames < 1) {
		frames = 1;
	}
	/* One second of signal, cycled. */
	int sig_frames = 50;
	opus_int16 *pcm = malloc(sizeof(opus_int16) * FRAME * CHANNELS * sig_frames);
	const double freqs[3] = {300, 700, 2500};
	for (int i = 0; i < FRAME * sig_frames; i++) {
		double v = 0;
		for (int k = 0; k < 3; k++) {
			v += 4000 * sin(2 * M_PI * freqs[k] * i / 48000.0);
		}
		pcm[2 * i] = pcm[2 * i + 1] = (opus_int16)lrint(v);
	}
	int err;
	OpusEncoder *enc = opus_encoder_create(48000, CHANNELS, OPUS_APPLICATION_AUDIO, &err);
	if (enc == NULL) {
		fprintf(stderr, "encoder: %s\n", opus_strerror(err));
		return 1;
	}
	opus_encoder_ctl(enc, OPUS_SET_BITRATE(64000));
	opus_encoder_ctl(enc, OPUS_SET_COMPLEXITY(10));
	OpusDecoder *dec = opus_decoder_create(48000, CHANNELS, &err);
	if (dec == NULL) {
		fprintf(stderr, "decoder: %s\n", opus_strerror(err));
		return 1;
	}
	unsigned char (*packets)[4000] = malloc(4000 * (size_t)sig_frames);
	int lens[50];
	opus_int16 out[5760 * CHANNELS];

	double t0 = now_ns();
	for (int i = 0; i < frames; i++) {
		int f = i % sig_frames;
		lens[f] = opus_encode(enc, pcm + f * FRAME * CHANNELS, FRAME, packets[f], 4000);
		if (lens[f] < 0) {
			fprintf(stderr, "encode: %s\n", opus_strerror(lens[f]));
			return 1;
		}
	}
	double enc_ns = (now_ns() - t0) / frames;
	/* Make sure every packet slot holds a real packet before decoding. */
	for (int f = 0; f < sig_frames && frames < sig_frames; f++) {
		if (f >= frames) {
			lens[f] = opus_encode(enc, pcm + f * FRAME * CHANNELS, FRAME, packets[f], 4000);
		}
	}
	t0 = now_ns();
	for (int i = 0; i < frames; i++) {
		int f = i % sig_frames;
		int n = opus_decode(dec, packets[f], lens[f], out, 5760, 0);
		if (n < 0) {
			fprintf(stderr, "decode: %s\n", opus_strerror(n));
			return 1;
		}
	}
	double dec_ns = (now_ns() - t0) / frames;
	printf("encode_ns_per_frame=%.0f decode_ns_per_frame=%.0f\n", enc_ns, dec_ns);
	opus_encoder_destroy(enc);
	opus_decoder_destroy(dec);
	return 0;
}
