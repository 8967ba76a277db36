/**
 * Which shard a user belongs to: the store builds the user's keys from it, the reference model
 * orders batch work by it.
 */
export function shardOf(userId: string, shards: number): number {
  return userIdHash(userId) % shards;
}

/**
 * The hash shardOf takes the shard from (unsigned 32 bits; the metering read's award presence
 * bits use it too): FNV-1a over the UTF-8 bytes of the user id, stable across processes and
 * languages. The bytes are taken from the UTF-16 code units as they go (a lone surrogate as
 * U+FFFD, as Buffer.from and every encoder write it), not from a Buffer: the allocation and
 * copy cost a metering read ~0.7k instructions (bench/README.md, "The fifteenth stop").
 */
export function userIdHash(userId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < userId.length; i++) {
    let c = userId.charCodeAt(i);
    if (c < 0x80) {
      hash = Math.imul(hash ^ c, 0x01000193);
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < userId.length ? userId.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        i++;
      } else {
        c = 0xfffd;
      }
    }
    if (c < 0x800) {
      hash = Math.imul(hash ^ (0xc0 | (c >> 6)), 0x01000193);
    } else {
      if (c < 0x10000) {
        hash = Math.imul(hash ^ (0xe0 | (c >> 12)), 0x01000193);
      } else {
        hash = Math.imul(hash ^ (0xf0 | (c >> 18)), 0x01000193);
        hash = Math.imul(hash ^ (0x80 | ((c >> 12) & 0x3f)), 0x01000193);
      }
      hash = Math.imul(hash ^ (0x80 | ((c >> 6) & 0x3f)), 0x01000193);
    }
    hash = Math.imul(hash ^ (0x80 | (c & 0x3f)), 0x01000193);
  }
  return hash >>> 0;
}
