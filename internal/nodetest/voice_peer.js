// A test-only voice peer: the real @discordjs/voice client, joined to the
// fake voice server (internal/voicetest) through a fake gateway adapter that
// hands it the VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE Discord's main
// gateway would. It trusts the test certificate through NODE_EXTRA_CA_CERTS.
//
//   node voice_peer.js encode '{"freq":440,"frames":50}'
//       prints {"frames":[base64 Opus, ...]}: a sine tone, 20 ms stereo frames
//   node voice_peer.js play   '{"creds":{...},"frames":[base64...]}'
//       joins, prints {"event":"ready"}, plays the frames, prints {"event":"played"}
//   node voice_peer.js listen '{"creds":{...},"hear":"<user id>","frames":N,"timeoutMs":T}'
//       joins, prints {"event":"ready"}, then {"event":"heard","user":..,"frames":[..],"freq":Hz}
//   node voice_peer.js dave   '{"creds":{...},"channel":"<id>","with":["<id>",...],"hear":"<id>","hearFrames":N,
//                               "frames":[base64...],"timeoutMs":T,"lingerMs":L}'
//       an end-to-end encrypted call: joins, waits until its DAVE session is
//       ready with every "with" user in the MLS group and no transition
//       pending, prints {"event":"ready","epoch":E,"users":[..]}, plays the
//       frames while collecting what "hear" sends, prints {"event":"played"}
//       and {"event":"heard",...,"undecrypted":n,"stats":davey's decryption
//       stats}, then stays in the call for lingerMs before leaving.
//
// The channel id ("channel", default 700000000000000001) is the MLS group id
// davey uses, so it must be the one the other members and the server use.
// Every line on stdout is one JSON object; debug goes to stderr.
'use strict';

const { Readable } = require('node:stream');
const OpusScript = require('opusscript');
const voice = require('@discordjs/voice');

const RATE = 48000;
const FRAME = 960;
const SILENCE = Buffer.from([0xf8, 0xff, 0xfe]);

function out(obj) {
	process.stdout.write(JSON.stringify(obj) + '\n');
}

function encode(freq, frames) {
	const enc = new OpusScript(RATE, 2, OpusScript.Application.AUDIO);
	const packets = [];
	let n = 0;
	for (let f = 0; f < frames; f++) {
		const pcm = Buffer.alloc(FRAME * 4);
		for (let i = 0; i < FRAME; i++, n++) {
			const v = Math.round(Math.sin((2 * Math.PI * freq * n) / RATE) * 12000);
			pcm.writeInt16LE(v, i * 4);
			pcm.writeInt16LE(v, i * 4 + 2);
		}
		packets.push(Buffer.from(enc.encode(pcm, FRAME)).toString('base64'));
	}
	enc.delete();
	return packets;
}

// dominantFrequency decodes the frames and returns the strongest frequency
// between 100 Hz and 2 kHz (Goertzel, 5 Hz steps) of the left channel.
function dominantFrequency(frames) {
	const dec = new OpusScript(RATE, 2, OpusScript.Application.AUDIO);
	const samples = [];
	for (const f of frames) {
		const pcm = Buffer.from(dec.decode(f));
		for (let i = 0; i + 3 < pcm.length; i += 4) samples.push(pcm.readInt16LE(i));
	}
	dec.delete();
	let best = 0;
	let bestPower = -1;
	for (let freq = 100; freq <= 2000; freq += 5) {
		const k = 2 * Math.cos((2 * Math.PI * freq) / RATE);
		let s1 = 0;
		let s2 = 0;
		for (const x of samples) {
			const s0 = x + k * s1 - s2;
			s2 = s1;
			s1 = s0;
		}
		const power = s1 * s1 + s2 * s2 - k * s1 * s2;
		if (power > bestPower) {
			bestPower = power;
			best = freq;
		}
	}
	return best;
}

function join(creds, channel = '700000000000000001') {
	const adapterCreator = (methods) => ({
		sendPayload(payload) {
			if (payload.op !== 4) return true;
			setImmediate(() => {
				methods.onVoiceStateUpdate({
					guild_id: creds.ServerID,
					channel_id: channel,
					user_id: creds.UserID,
					session_id: creds.SessionID,
					deaf: false,
					mute: false,
					self_deaf: false,
					self_mute: false,
					self_video: false,
					suppress: false,
					request_to_speak_timestamp: null,
				});
				methods.onVoiceServerUpdate({ guild_id: creds.ServerID, token: creds.Token, endpoint: creds.Endpoint });
			});
			return true;
		},
		destroy() {},
	});
	const conn = voice.joinVoiceChannel({
		channelId: channel,
		guildId: creds.ServerID,
		adapterCreator,
		selfDeaf: false,
		selfMute: false,
		debug: true,
	});
	conn.on('debug', (m) => process.stderr.write(`[voice] ${m}\n`));
	conn.on('error', (e) => process.stderr.write(`[voice error] ${e.stack || e}\n`));
	return conn;
}

async function ready(conn) {
	await voice.entersState(conn, voice.VoiceConnectionStatus.Ready, 10_000);
	out({ event: 'ready' });
}

async function play(cfg) {
	const conn = join(cfg.creds);
	await ready(conn);
	const player = voice.createAudioPlayer();
	player.on('error', (e) => process.stderr.write(`[player error] ${e.stack || e}\n`));
	conn.subscribe(player);
	const frames = cfg.frames.map((b) => Buffer.from(b, 'base64'));
	player.play(voice.createAudioResource(Readable.from(frames), { inputType: voice.StreamType.Opus }));
	await voice.entersState(player, voice.AudioPlayerStatus.Playing, 5_000);
	await voice.entersState(player, voice.AudioPlayerStatus.Idle, 30_000);
	// let the trailing silence frames leave before leaving
	await new Promise((r) => setTimeout(r, 200));
	out({ event: 'played' });
	conn.destroy();
}

async function listen(cfg) {
	const conn = join(cfg.creds);
	await ready(conn);
	const stream = conn.receiver.subscribe(cfg.hear, { end: { behavior: voice.EndBehaviorType.Manual } });
	const frames = [];
	await new Promise((resolve) => {
		const timer = setTimeout(resolve, cfg.timeoutMs);
		stream.on('data', (packet) => {
			const opus = Buffer.from(packet.payload ?? packet);
			if (opus.equals(SILENCE)) return;
			frames.push(opus);
			if (frames.length >= cfg.frames) {
				clearTimeout(timer);
				resolve();
			}
		});
	});
	out({
		event: 'heard',
		user: cfg.hear,
		frames: frames.map((f) => f.toString('base64')),
		freq: frames.length ? dominantFrequency(frames) : 0,
	});
	conn.destroy();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// daveOf returns the connection's DAVE session wrapper, if any.
function daveOf(conn) {
	const net = conn.state.networking;
	return net && net.state && net.state.dave;
}

// daveReady waits until davey can encrypt and decrypt with every user in
// "with" in the group and no transition pending.
async function daveReady(conn, users, timeoutMs) {
	const end = Date.now() + timeoutMs;
	for (;;) {
		const d = daveOf(conn);
		if (d && d.protocolVersion > 0 && d.session && d.session.ready && d.pendingTransitions.size === 0) {
			const ids = d.session.getUserIds();
			if (users.every((u) => ids.includes(u))) return d;
		}
		if (Date.now() > end) throw new Error('DAVE session never became ready');
		await sleep(10);
	}
}

// isDAVEFrame reports whether a frame still ends with DAVE's 0xFAFA marker:
// discord.js handed it on undecrypted.
function isDAVEFrame(b) {
	return b.length > 2 && b[b.length - 1] === 0xfa && b[b.length - 2] === 0xfa;
}

async function daveCall(cfg) {
	const conn = join(cfg.creds, cfg.channel);
	const heard = [];
	let undecrypted = 0;
	const heardAll = new Promise((resolve) => {
		if (!cfg.hear) return resolve();
		const timer = setTimeout(resolve, cfg.timeoutMs);
		const stream = conn.receiver.subscribe(cfg.hear, { end: { behavior: voice.EndBehaviorType.Manual } });
		stream.on('data', (packet) => {
			const opus = Buffer.from(packet.payload ?? packet);
			if (opus.equals(SILENCE)) return;
			if (isDAVEFrame(opus)) {
				undecrypted++;
				return;
			}
			heard.push(opus);
			if (heard.length >= cfg.hearFrames) {
				clearTimeout(timer);
				resolve();
			}
		});
	});
	await voice.entersState(conn, voice.VoiceConnectionStatus.Ready, 10_000);
	const d = await daveReady(conn, cfg.with ?? [], cfg.timeoutMs);
	out({ event: 'ready', epoch: Number(d.session.epoch ?? -1), users: d.session.getUserIds() });
	const played = (async () => {
		if (!cfg.frames || cfg.frames.length === 0) return;
		const player = voice.createAudioPlayer();
		player.on('error', (e) => process.stderr.write(`[player error] ${e.stack || e}\n`));
		conn.subscribe(player);
		const frames = cfg.frames.map((b) => Buffer.from(b, 'base64'));
		player.play(voice.createAudioResource(Readable.from(frames), { inputType: voice.StreamType.Opus }));
		await voice.entersState(player, voice.AudioPlayerStatus.Playing, 5_000);
		await voice.entersState(player, voice.AudioPlayerStatus.Idle, cfg.timeoutMs);
		await sleep(200);
		out({ event: 'played' });
	})();
	await Promise.all([played, heardAll]);
	const dd = daveOf(conn);
	out({
		event: 'heard',
		user: cfg.hear,
		frames: heard.map((f) => f.toString('base64')),
		freq: heard.length ? dominantFrequency(heard) : 0,
		undecrypted,
		stats: cfg.hear && dd && dd.session ? dd.session.getDecryptionStats(cfg.hear) : null,
		epoch: dd && dd.session ? Number(dd.session.epoch ?? -1) : -1,
	});
	await sleep(cfg.lingerMs ?? 0);
	conn.destroy();
	await sleep(100);
}

async function main() {
	const [mode, arg] = process.argv.slice(2);
	const cfg = JSON.parse(arg || '{}');
	switch (mode) {
		case 'encode':
			out({ frames: encode(cfg.freq, cfg.frames) });
			return;
		case 'play':
			return play(cfg);
		case 'listen':
			return listen(cfg);
		case 'dave':
			return daveCall(cfg);
		default:
			throw new Error(`unknown mode ${mode}`);
	}
}

main().then(
	// exit once stdout is flushed: a pipe takes large outputs asynchronously
	() => process.stdout.write('', () => process.exit(0)),
	(e) => {
		process.stderr.write(`${e.stack || e}\n`);
		process.exit(1);
	},
);
