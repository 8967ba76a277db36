import { randomBytes } from "node:crypto";
import { awardId } from "./ids.js";
import { fmix32 } from "./fmix32.js";

/**
 * Award ids, remembered outside the JavaScript heap.
 *
 * An award id is a UUIDv5 (ids.ts awardId): a SHA-1 through OpenSSL, its hex and the UUID's
 * text cost ~8.5k instructions, the largest single item of a metering read (bench/README.md,
 * "The fifteenth stop"). A read renders the same ids again and again, so they are remembered.
 * A JavaScript Map of id strings was tried twice and dropped: every entry outlives the young
 * generation, and the GC's copying of them cost more than the hashes saved (~+2 µs per miss).
 * Here the ids live in one Buffer and their keys in one Int32Array, allocated once: nothing per
 * entry for the GC to trace or copy, and a hit returns a new flat 36-character string that dies
 * young. The table is 8-way set-associative: a key may sit in any slot of its set, whose eight
 * keys are side by side (128 bytes: two or three cache lines, where eight scattered slots would
 * be eight). A set's slots are taken in turn, so once it is full a new key replaces its oldest.
 * Direct-mapped (one slot a key, until the seventeenth stop), keys sharing a slot evicted each
 * other: 150 000 ids (100 000 users) in the default table, looked up in random order, cost
 * ~0.8 µs a look, as a share of them computed their UUID (~1.5 µs) again and again; eight ways
 * ~0.46 µs (`node bench/award-render.mjs`; bench/README.md, *The seventeenth stop*).
 *
 * A slot's key is exact in the (tenant, system) pair and the sequence number, and holds the
 * user id as a 64-bit fingerprint (two seeded 32-bit lanes, different multipliers, each finished
 * by MurmurHash3's fmix32). A wrong id needs two user ids of one system, with one sequence
 * number, whose fingerprints agree on all 64 bits; the seed is drawn at start, so user ids
 * cannot be crafted against it offline.
 */
export const MAX_AWARD_ID_SLOTS = 1 << 24;

/** 0 (no table) or a power of two up to MAX_AWARD_ID_SLOTS. */
export function isAwardIdSlots(slots: number): boolean {
  return slots === 0 || (Number.isInteger(slots) && slots >= 1 && slots <= MAX_AWARD_ID_SLOTS && (slots & (slots - 1)) === 0);
}

export class AwardIdTable {
  private static readonly ID_LENGTH = 36;
  /** A slot's key: 4 int32s (system number, from 1, 0 for an empty slot; seq; lane a; lane b). */
  private static readonly KEY_INTS = 4;
  /** Slots a set holds (all of them in a table smaller than a set). */
  private static readonly WAYS = 8;
  private readonly ways: number;
  /** Sets - 1 (sets: slots ÷ ways, a power of two). */
  private readonly setMask: number;
  /** The keys, a set's side by side (8 × 16 bytes). */
  private readonly keys: Int32Array;
  /** The ids, 36 latin1 characters a slot, in slot order. */
  private readonly ids: Buffer;
  /** Per set, the way its next new id takes (round robin: the oldest once the set is full). */
  private readonly nextWay: Uint8Array;
  private readonly systems = new Map<string, Map<string, number>>();
  private systemCount = 0;
  private readonly seedA: number;
  private readonly seedB: number;
  /** Looks, and those that found nothing and computed the id: GET /metrics exports both, for sizing LAUREL_AWARD_IDS. */
  lookups = 0;
  misses = 0;

  /** `slots`: a power of two; 0 turns the table off (every id is computed). */
  constructor(readonly slots: number) {
    if (!isAwardIdSlots(slots)) throw new Error(`award id table slots must be 0 or a power of two up to ${MAX_AWARD_ID_SLOTS} (got ${slots})`);
    this.ways = Math.min(AwardIdTable.WAYS, Math.max(slots, 1));
    this.setMask = slots / this.ways - 1;
    // Not from Buffer's pool (too large for it): their own zeroed memory.
    this.keys = new Int32Array(slots * AwardIdTable.KEY_INTS);
    this.ids = Buffer.alloc(slots * AwardIdTable.ID_LENGTH);
    this.nextWay = new Uint8Array(this.setMask + 1);
    const seed = randomBytes(8);
    this.seedA = seed.readInt32LE(0);
    this.seedB = seed.readInt32LE(4);
  }

  /** Bytes held (README: LAUREL_AWARD_IDS). */
  get bytes(): number {
    return this.keys.byteLength + this.ids.length + this.nextWay.length;
  }

  /** awardId(namespace, userId, systemKey, seq): remembered, or computed and remembered. */
  get(namespace: string, systemKey: string, userId: string, seq: number): string {
    this.lookups++;
    if (this.slots === 0) return this.compute(namespace, systemKey, userId, seq);
    const system = this.systemNumber(namespace, systemKey);
    let a = this.seedA ^ seq;
    let b = this.seedB ^ Math.imul(seq, 0x9e3779b1);
    for (let i = 0; i < userId.length; i++) {
      const c = userId.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul((b ^ c) + (b >>> 13), 0x5bd1e995);
    }
    a = fmix32(a ^ userId.length);
    b = fmix32(b ^ system);
    const first = ((fmix32(a ^ Math.imul(b, 0x85ebca6b) ^ system) & this.setMask) >>> 0) * this.ways;
    const keys = this.keys;
    const ways = this.ways;
    for (let way = 0; way < ways; way++) {
      const k = (first + way) * AwardIdTable.KEY_INTS;
      if (keys[k] === system && keys[k + 1] === seq && keys[k + 2] === a && keys[k + 3] === b) {
        const at = (first + way) * AwardIdTable.ID_LENGTH;
        return (this.ids as unknown as Latin1Slicer).latin1Slice(at, at + AwardIdTable.ID_LENGTH);
      }
      if (keys[k] === 0) break; // a set fills from its first slot: nothing after an empty one
    }
    const id = this.compute(namespace, systemKey, userId, seq);
    // A UUID is 36 ASCII characters; anything else is not remembered (it never is, but a wrong length would corrupt the neighbour).
    if (id.length === AwardIdTable.ID_LENGTH) {
      // The set's slots are taken in turn: the first ones while it fills, then the oldest.
      const set = first / ways;
      const slot = first + this.nextWay[set]!;
      this.nextWay[set] = (this.nextWay[set]! + 1) % ways;
      this.ids.write(id, slot * AwardIdTable.ID_LENGTH, AwardIdTable.ID_LENGTH, "latin1");
      const k = slot * AwardIdTable.KEY_INTS;
      keys[k] = system;
      keys[k + 1] = seq;
      keys[k + 2] = a;
      keys[k + 3] = b;
    }
    return id;
  }

  private compute(namespace: string, systemKey: string, userId: string, seq: number): string {
    this.misses++;
    return awardId(namespace, userId, systemKey, seq);
  }

  /** A small number per (namespace, system key) pair, from 1: the pairs are the configured ones. */
  private systemNumber(namespace: string, systemKey: string): number {
    let bySystem = this.systems.get(namespace);
    if (!bySystem) this.systems.set(namespace, (bySystem = new Map()));
    let n = bySystem.get(systemKey);
    if (n === undefined) bySystem.set(systemKey, (n = ++this.systemCount));
    return n;
  }
}

/**
 * Buffer's own latin1 decoder, which `buf.toString("latin1", start, end)` reaches after two
 * JavaScript wrappers check the encoding and the bounds (~0.5k instructions of a hit's ~1.8k,
 * bench/read-cost.mjs); the table's bounds are its own (not in @types/node).
 */
type Latin1Slicer = { latin1Slice(start: number, end: number): string };

/** Award ids remembered by default (LAUREL_AWARD_IDS): 2^18 slots, 13 MB outside the JS heap (52 bytes a slot). */
export const DEFAULT_AWARD_ID_SLOTS = 1 << 18;

// The process's table, allocated at the first read of an award id: a process that serves none holds none.
let processTable: AwardIdTable | null = null;

/**
 * awardId, from the process's table when it holds it: for the metering read, which renders the
 * same stored awards again and again. Replies that show new awards (an event's, a completion's,
 * a webhook's) call awardId: the table could not hold them yet, and looking costs a slot's memory
 * access (~0.3 µs on this VM) for nothing.
 */
export function rememberedAwardId(namespace: string, userId: string, systemKey: string, seq: number): string {
  processTable ??= new AwardIdTable(DEFAULT_AWARD_ID_SLOTS);
  return processTable.get(namespace, systemKey, userId, seq);
}

export interface AwardIdTableStats {
  slots: number;
  lookups: number;
  misses: number;
}

/** The process's table (GET /metrics): its size (LAUREL_AWARD_IDS, or the default), and its looks and misses since it was made. */
export function awardIdTableStats(): AwardIdTableStats {
  return { slots: processTable?.slots ?? DEFAULT_AWARD_ID_SLOTS, lookups: processTable?.lookups ?? 0, misses: processTable?.misses ?? 0 };
}

/** How many award ids to remember (a power of two; 0: none). Replaces the table: ids are recomputed. */
export function setAwardIdSlots(slots: number): void {
  processTable = new AwardIdTable(slots);
}
