import fc from "fast-check";
import { Command } from "ioredis";
import { describe, expect, it } from "vitest";
import { EncodedCommand, encodeCommand } from "../../src/store/redis-script.js";

// runScript sends every Function call as encodeCommand builds it (EncodedCommand): it must be the
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
    // ioredis writes a string when no argument is binary, and so does encodeCommand: the same bytes in UTF-8.
    const encoded = encodeCommand("fcall", args);
    expect(typeof encoded).toBe(typeof written);
    expect(Buffer.from(encoded as string | Buffer).equals(Buffer.from(written as string | Buffer))).toBe(true);
  });
  it("EncodedCommand, which sets its arguments after ioredis' constructor: numbers as ioredis turns them into text", () => {
    const args = ["laurel_0123", 1, "{t:3}:u:ada", 1764000000123, -2.5, 0, Buffer.from([9, 13, 10]), ""];
    const written = new Command("fcall", args).toWritable({});
    expect(Buffer.from(new EncodedCommand("fcall", args).toWritable()).equals(written as Buffer)).toBe(true);
  });
  it("EncodedCommand of text only (the metering read's LRANGE): the text ioredis writes", () => {
    const args = ["{t:3}:aw:energy:adä", 0, 9];
    const written = new Command("lrange", args).toWritable({});
    expect(new EncodedCommand("lrange", args).toWritable()).toBe(written);
  });
  it("EncodedCommand tells a re-send by the socket it is written to, and encodes the call again after mayHaveRun", () => {
    const flags = Buffer.from([0]);
    let told = 0;
    const mayHaveRun = () => {
      told++;
      flags[0] = 2; // as markMayHaveRun does: the call's numbers change in place
    };
    const [first, second] = [{}, {}];
    const again = new EncodedCommand("fcall", ["f", 0, flags], mayHaveRun);
    expect(Buffer.from(again.toWritable(first)).includes(Buffer.from([0]))).toBe(true);
    again.toWritable(first); // the same socket asking again is not a re-send
    expect(told).toBe(0);
    const resent = Buffer.from(again.toWritable(second));
    expect(told).toBe(1);
    expect(resent.equals(Buffer.from(new Command("fcall", ["f", "0", Buffer.from([2])]).toWritable({}) as Buffer))).toBe(true);
    again.toWritable({}); // told once only
    expect(told).toBe(1);

    // A first write with no socket named (ioredis passes none in some paths) still counts as the first.
    flags[0] = 0;
    told = 0;
    const unnamed = new EncodedCommand("fcall", ["f", 0, flags], mayHaveRun);
    unnamed.toWritable();
    unnamed.toWritable(first);
    expect(told).toBe(1);
  });
});

// EncodedCommand is a Command not built by Command's constructor (redis-script.ts says why): it
// must hold every field that constructor sets, with the same values, and settle as ioredis' own.
describe("EncodedCommand as a Command", () => {
  const own = new Set(["encoded", "written", "firstSocket", "mayHaveRun"]);
  it("holds the fields ioredis' Command constructor sets, in its order, with its values", () => {
    const theirs = new Command("lrange", ["{t:3}:aw:energy:ada", "0", "9"], { replyEncoding: "utf8" });
    const ours = new EncodedCommand("lrange", ["{t:3}:aw:energy:ada", 0, 9]);
    expect(ours).toBeInstanceOf(Command);
    expect(Object.keys(ours).filter((key) => !own.has(key))).toEqual(Object.keys(theirs));
    const values = (command: object) => Object.fromEntries(Object.entries(command).filter(([key, value]) => !own.has(key) && typeof value !== "function" && !(value instanceof Promise)));
    expect(values(ours)).toEqual(values(theirs));
  });
  it("resolves with its reply as text, and rejects with the error ioredis gives it", async () => {
    const answered = new EncodedCommand("lrange", ["k", 0, 9]);
    answered.resolve([Buffer.from("a"), Buffer.from("日本")]);
    await expect(answered.promise).resolves.toEqual(["a", "日本"]);
    expect(answered.isResolved).toBe(true);
    const failed = new EncodedCommand("lrange", ["k", 0, 9]);
    const error = new Error("Connection is closed.");
    failed.reject(error);
    await expect(failed.promise).rejects.toBe(error);
  });
});

// EncodedCommand turns the reply's Buffers into text itself (redis-script.ts replyText): it must
// give what ioredis' own utf8 command gives, for every shape a script or LRANGE replies.
describe("EncodedCommand replies", () => {
  const replies: [string, unknown][] = [
    ["a bulk string", Buffer.from("héllo")],
    ["an integer", 42],
    ["null", null],
    ["an array of text, integers and nulls", [Buffer.from("a"), 1, null, Buffer.from("日本")]],
    ["nested arrays, empty ones", [[Buffer.from("x"), [Buffer.from(""), []]], [], 0]],
  ];
  it.each(replies)("%s: the same value as ioredis' utf8 reply", (_name, reply) => {
    const ours = new EncodedCommand("fcall", []).transformReply(reply as Buffer);
    const theirs = new Command("fcall", [], { replyEncoding: "utf8" }).transformReply(reply as Buffer);
    expect(ours).toEqual(theirs);
    expect(JSON.stringify(ours)).toBe(JSON.stringify(theirs));
  });
});

describe("encodeCommand, any arguments", () => {
  it("is the bytes ioredis writes for any mix of text (any Unicode, lone surrogates, lengths whose byte count has more digits) and binary", () => {
    // size "max": at fast-check's default size strings, byte arrays and the argument list stop at 10.
    const text = fc.oneof(fc.string({ unit: "binary", maxLength: 40, size: "max" }), fc.string({ unit: "grapheme", minLength: 3, maxLength: 12 }), fc.constantFrom("", "é".repeat(5), "日".repeat(4), "x".repeat(99), "é".repeat(50), "\ud800"));
    const binary = fc.uint8Array({ maxLength: 120, size: "max" }).map((bytes) => Buffer.from(bytes));
    fc.assert(
      fc.property(fc.constantFrom("fcall", "evalsha", "lrange", "x"), fc.array(fc.oneof(text, binary), { maxLength: 14, size: "max" }), (name, args) => {
        const written = new Command(name, args).toWritable({});
        const encoded = encodeCommand(name, args);
        expect(typeof encoded).toBe(typeof written);
        expect(Buffer.from(encoded as string | Buffer).equals(Buffer.from(written as string | Buffer))).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });
});
