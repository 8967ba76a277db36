/**
 * Which shard a user belongs to: the store builds the user's keys from it, the reference model
 * orders batch work by it.
 */
/** FNV-1a over the UTF-8 bytes of the user id: stable across processes and languages. */
export function shardOf(userId: string, shards: number): number {
  let hash = 0x811c9dc5;
  const bytes = Buffer.from(userId, "utf8");
  for (let i = 0; i < bytes.length; i++) {
    hash ^= bytes[i]!;
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % shards;
}

