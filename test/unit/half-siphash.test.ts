import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { halfSipHash53 } from "../../src/domain/half-siphash.js";

// The reference's test key: bytes 00..07, as two little-endian words.
const K0 = 0x03020100;
const K1 = 0x07060504;

/** The text whose UTF-16LE bytes are 00, 01, ..., length-1 (length even). */
function bytesText(length: number): string {
  let text = "";
  for (let b = 0; b < length; b += 2) text += String.fromCharCode(b | ((b + 1) << 8));
  return text;
}

/** A published 64-bit tag (8 bytes as hex) as halfSipHash53 returns it. */
function tag53(hex: string): number {
  const bytes = Buffer.from(hex, "hex");
  return (bytes.readUInt32LE(4) & 0x1fffff) * 0x100000000 + bytes.readUInt32LE(0);
}

describe("HalfSipHash-2-4-64", () => {
  it("matches the reference's vectors_hsip64 for messages of 0 to 10 bytes (with and without a tail)", () => {
    const vectors: [number, string][] = [
      [0, "218d1f59b9b83cc8"],
      [2, "064f39ef7c50eb57"],
      [4, "d5e78a175be52ea1"],
      [6, "ce3e91358aa2bc25"],
      [8, "edfee820bce4858c"],
      [10, "95b0469f06a6f2ee"],
    ];
    for (const [length, hex] of vectors) expect(halfSipHash53(K0, K1, bytesText(length)), `${length} bytes`).toBe(tag53(hex));
  });

  it("is a 53-bit integer, and depends on the key and on every code unit", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), fc.nat({ max: 39 }), fc.integer({ min: 1, max: 0xffff }), (text, at, flip) => {
        const tag = halfSipHash53(K0, K1, text);
        expect(Number.isSafeInteger(tag) && tag >= 0).toBe(true);
        expect(halfSipHash53(K0 ^ 1, K1, text)).not.toBe(tag);
        if (at < text.length) {
          const changed = text.slice(0, at) + String.fromCharCode(text.charCodeAt(at) ^ flip) + text.slice(at + 1);
          expect(halfSipHash53(K0, K1, changed)).not.toBe(tag);
        }
        expect(halfSipHash53(K0, K1, `${text}\0`)).not.toBe(tag);
      }),
    );
  });
});
