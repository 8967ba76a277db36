/**
 * HalfSipHash-2-4 with a 64-bit tag (Aumasson and Bernstein's reference, `halfsiphash.c`, whose
 * published vectors `vectors_hsip64` test/unit/half-siphash.test.ts checks): a keyed
 * pseudorandom function on 32-bit words, cheap in JavaScript (no 64-bit arithmetic).
 *
 * The message is the text's UTF-16 code units, each as two bytes little-endian, so that every
 * string has one encoding and no two strings share one. The tag is returned as a number of 53
 * bits (the second word's low 21 bits above the first word), usable as a Map key.
 */

/** The 53-bit tag of `text` under the key (k0, k1), each a 32-bit word (key bytes little-endian). */
export function halfSipHash53(k0: number, k1: number, text: string): number {
  // The state in four int32 locals, every sum truncated (`| 0`): V8 keeps them in registers (a
  // typed array holding them measured 4-5 times slower, 146 against 32 ns for an 8-character key).
  let v0 = k0 | 0;
  let v1 = (k1 ^ 0xee) | 0; // 0xee: the 64-bit tag's variant
  let v2 = (0x6c796765 ^ k0) | 0;
  let v3 = (0x74656462 ^ k1) | 0;
  const units = text.length;
  const whole = units & ~1;
  let low = 0;
  // One loop for the four kinds of step, so that the round is written once. Each step absorbs a
  // word m (xor into v3, rounds, xor into v0; m = 0 in the finalisations, where that is nothing):
  // 0 the message's words (two code units each), 1 the last block (the length in bytes mod 256 in
  // the top byte, a lone last code unit below), 2 and 3 the finalisations of each half of the tag.
  for (let i = 0, kind = whole > 0 ? 0 : 1; ; ) {
    let m = 0;
    let rounds = 4;
    if (kind === 0) {
      m = text.charCodeAt(i) | (text.charCodeAt(i + 1) << 16);
      rounds = 2;
      i += 2;
      if (i === whole) kind = 1;
    } else if (kind === 1) {
      m = (((units * 2) & 0xff) << 24) | (units === whole ? 0 : text.charCodeAt(whole));
      rounds = 2;
      kind = 2;
    } else if (kind === 2) {
      v2 ^= 0xee;
      kind = 3;
    } else if (kind === 3) {
      low = (v1 ^ v3) >>> 0;
      v1 ^= 0xdd;
      kind = 4;
    } else {
      return ((v1 ^ v3) & 0x1fffff) * 0x100000000 + low;
    }
    v3 ^= m;
    for (let r = 0; r < rounds; r++) {
      v0 = (v0 + v1) | 0;
      v1 = (v1 << 5) | (v1 >>> 27);
      v1 ^= v0;
      v0 = (v0 << 16) | (v0 >>> 16);
      v2 = (v2 + v3) | 0;
      v3 = (v3 << 8) | (v3 >>> 24);
      v3 ^= v2;
      v0 = (v0 + v3) | 0;
      v3 = (v3 << 7) | (v3 >>> 25);
      v3 ^= v0;
      v2 = (v2 + v1) | 0;
      v1 = (v1 << 13) | (v1 >>> 19);
      v1 ^= v2;
      v2 = (v2 << 16) | (v2 >>> 16);
    }
    v0 ^= m;
  }
}
