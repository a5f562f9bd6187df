// Times the original TypeScript person store in process, as issue 16 did:
// createFileMemory from Volpestyle/clankie@91309b7 (memory.ts, and
// memory-fsync.ts, the same with an fsync in writePerson), on a fresh data
// dir under os.tmpdir(), 64 people rotating, each figure the median of n
// calls. At 16 facts each proposal replaces the person's oldest fact by
// reusing its id (that store has no supersede); at 128 each is a new id and
// evicts the oldest. The list recalls all 128 facts of one person.
// internal/benchreport copies this file next to the original's sources and
// runs it with Node 22 (types stripped); it prints go test's benchmark line
// format, so the report reads it like any other benchmark:
//
//	node bench.ts plain|fsync [n]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const variant = process.argv[2] === "fsync" ? "fsync" : "plain";
const n = Number(process.argv[3] ?? 2000);
const { createFileMemory } = await import(variant === "fsync" ? "./memory-fsync.ts" : "./memory.ts");

// The same fact bodies as internal/benchtext's Body.
const words = ("plays bass in a jazz trio on thursdays prefers tea over coffee learning portuguese " +
  "for a trip to lisbon has two cats named pixel and byte runs the server's minecraft nights likes quiet " +
  "voice channels after midnight studies marine biology and collects old maps of the harbour").split(/\s+/);
function body(i: number): string {
  const want = 90 + (i * 37) % 71;
  let s = "";
  for (let j = 0; s.length < want; j++) {
    if (j > 0) s += " ";
    s += words[(i * 11 + j * 7) % words.length];
  }
  return s;
}
const guild = "100000000000000001";
const channel = "100000000000000011";
const user = (p: number) => "2000000000" + String(p).padStart(8, "0");

function fact(p: number, i: number, id: string, at: number) {
  const t = new Date(at).toISOString();
  const k = p * 100000 + i;
  return {
    schemaVersion: 1, factId: id, subject: { guildId: guild, userId: user(p) }, kind: "person-fact",
    body: body(k), visibility: { scope: "guild" },
    provenance: {
      correlationId: k.toString(16).padStart(16, "0"), sourceEventId: "13" + String(k).padStart(17, "0"),
      sourceSurface: "discord_text", rawTranscript: false,
    },
    confidence: 0.9, createdAt: t, updatedAt: t,
  };
}

function median(xs: number[]): number {
  xs.sort((a, b) => a - b);
  return xs[xs.length >> 1];
}

const since = (t: bigint) => Number(process.hrtime.bigint() - t) / 1e3;

function run(facts: number, calls: number): { propose: number; list?: number } {
  const dir = mkdtempSync(join(tmpdir(), "clankie-original-"));
  try {
    const m = createFileMemory({ dataDir: dir });
    const base = Date.now() - 30 * 86400e3;
    for (let p = 0; p < 64; p++) {
      for (let i = 0; i < facts; i++) m.storeDiscordPersonFact(fact(p, i, `f${String(i).padStart(7, "0")}`, base + (p * facts + i) * 1000));
    }
    const next = new Array(64).fill(0);
    const propose: number[] = [];
    for (let k = 0; k < calls; k++) {
      const p = k % 64;
      const i = next[p]++;
      const id = facts < 128 ? `f${String(i % facts).padStart(7, "0")}` : `g${String(i).padStart(7, "0")}`;
      const f = fact(p, facts + i, id, Date.now());
      const t = process.hrtime.bigint();
      m.storeDiscordPersonFact(f);
      propose.push(since(t));
    }
    if (facts < 128) return { propose: median(propose) };
    const list: number[] = [];
    for (let k = 0; k < calls; k++) {
      const t = process.hrtime.bigint();
      const got = m.listDiscordPerson({ guildId: guild, userId: user(k % 64) }, { channelId: channel });
      list.push(since(t));
      if (got.length !== 128) throw new Error(`the original listed ${got.length} facts, not 128`);
    }
    return { propose: median(propose), list: median(list) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

run(16, 200); // warm the JIT up before anything is timed
const small = run(16, n);
const full = run(128, n);
console.log(`BenchmarkOriginalPropose/store=${variant}/facts=16 ${n} ${small.propose.toFixed(1)} p50-µs`);
console.log(`BenchmarkOriginalPropose/store=${variant}/facts=128 ${n} ${full.propose.toFixed(1)} p50-µs`);
console.log(`BenchmarkOriginalList/store=${variant}/facts=128 ${n} ${full.list!.toFixed(1)} p50-µs`);
console.log(`node ${process.version}`);
