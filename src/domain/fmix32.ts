/** MurmurHash3's 32-bit finalizer: every input bit reaches every output bit (signed 32-bit result; `>>> 0` for unsigned). */
export function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}
