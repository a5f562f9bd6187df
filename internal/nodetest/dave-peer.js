// dave-peer.js: one @snazzah/davey DAVE member driven over JSON lines, for
// the Go interop tests in voice/dave. Test-only; never part of the binary.
//
// Each stdin line is a request {"id":N,"cmd":"...",...}; each stdout line is
// the reply {"id":N,"ok":true,...} or {"id":N,"ok":false,"error":"..."}.
// Binary values travel as lowercase hex strings.
'use strict';

const readline = require('node:readline');
const davey = require('@snazzah/davey');

let session = null;

const hex = (b) => (b ? Buffer.from(b).toString('hex') : '');
const buf = (h) => Buffer.from(h || '', 'hex');

function need() {
  if (!session) throw new Error('no session: send init first');
  return session;
}

const handlers = {
  init(req) {
    if (session) {
      session.reinit(req.version ?? 1, req.userId, req.channelId);
    } else {
      session = new davey.DAVESession(req.version ?? 1, req.userId, req.channelId);
    }
    return {};
  },
  reset() {
    need().reset();
    return {};
  },
  externalSender(req) {
    need().setExternalSender(buf(req.data));
    return {};
  },
  keyPackage() {
    return { data: hex(need().getSerializedKeyPackage()) };
  },
  proposals(req) {
    const res = need().processProposals(req.op, buf(req.data), req.users ?? null);
    return { commit: hex(res.commit), welcome: hex(res.welcome) };
  },
  welcome(req) {
    need().processWelcome(buf(req.data));
    return {};
  },
  commit(req) {
    need().processCommit(buf(req.data));
    return {};
  },
  encrypt(req) {
    return { data: hex(need().encryptOpus(buf(req.data))) };
  },
  // burn encrypts n frames and drops them: it moves davey's nonce forward
  // (to cross a key generation boundary) without shipping the frames.
  burn(req) {
    const s = need();
    const frame = buf(req.data);
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < req.n; i++) s.encryptOpus(frame);
    return { ms: Number(process.hrtime.bigint() - t0) / 1e6 };
  },
  decrypt(req) {
    return { data: hex(need().decrypt(req.user, davey.MediaType?.AUDIO ?? 0, buf(req.data))) };
  },
  passthrough(req) {
    need().setPassthroughMode(!!req.on, req.expiry ?? 10);
    return {};
  },
  state() {
    const s = need();
    const auth = s.getEpochAuthenticator();
    return {
      epoch: s.epoch === null || s.epoch === undefined ? -1 : Number(s.epoch),
      status: s.status,
      ready: s.ready,
      ownLeafIndex: s.ownLeafIndex ?? -1,
      authenticator: hex(auth),
      users: s.getUserIds(),
      version: davey.VERSION,
    };
  },
  stats(req) {
    return { stats: need().getDecryptionStats(req.user, 0) };
  },
};

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    process.stdout.write(JSON.stringify({ id: -1, ok: false, error: 'bad json: ' + e.message }) + '\n');
    return;
  }
  let out;
  try {
    const h = handlers[req.cmd];
    if (!h) throw new Error('unknown cmd ' + req.cmd);
    out = Object.assign({ id: req.id, ok: true }, h(req));
  } catch (e) {
    out = { id: req.id, ok: false, error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
});
rl.on('close', () => process.exit(0));
