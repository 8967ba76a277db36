import { Command } from "ioredis";
import { describe, expect, it } from "vitest";
import { encodeCommand } from "../../src/store/redis-script.js";

// runScript sends a command with a binary argument as encodeCommand builds it: it must be the
// very bytes ioredis would have written (RESP: *n, then $len and each argument).
describe("encodeCommand", () => {
  const cases: [string, (string | Buffer)[]][] = [
    ["text only", ["laurel_0123", "1", "{t:3}:u:ada", "{t:3}:"]],
    ["a binary argument among text", ["laurel_0123", "1", "{t:3}:u:ada", Buffer.from([0, 255, 13, 10, 36, 42]), "Europe/Paris"]],
    ["binary first and last, empty ones", [Buffer.alloc(0), "", Buffer.from("\r\n"), ""]],
    ["non-ASCII text (lengths in bytes)", ["héllo wörld", "日本語", Buffer.from([1, 2, 3]), "emoji 🎉", "em\0a@b.c\0tz\0UTC\0"]],
  ];
  it.each(cases)("%s: the bytes ioredis writes", (_name, args) => {
    const written = new Command("fcall", args).toWritable({});
    // ioredis writes a string when no argument is binary: the same bytes in UTF-8.
    expect(encodeCommand("fcall", args).equals(typeof written === "string" ? Buffer.from(written, "utf8") : written)).toBe(true);
  });
});
