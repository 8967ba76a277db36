import { Writable } from "node:stream";
import { pino } from "pino";
import { ReplyError } from "ioredis";
import { describe, expect, it } from "vitest";
import { errWithoutCredentials } from "../../src/boot.js";
import { REDACTED, urlForDisplay } from "../../src/redact.js";

/**
 * The process logger's `err` serializer (boot.ts processLogger): an ioredis error carries the
 * command it answers (`command: { name, args }`), and the AUTH or HELLO of a reconnect carries
 * REDIS_URL's user and password. The lines of a real logger, on ioredis' own error class.
 */
function logged(err: unknown): string {
  let out = "";
  const sink = new Writable({ write: (chunk, _enc, done) => ((out += chunk), done()) });
  pino({ serializers: { err: errWithoutCredentials } }, sink).error({ err }, "failed");
  return out;
}

/** A refusal as ioredis rejects a command with it (DataHandler, event_handler: `err.command`). */
function refusal(message: string, name: string, args: string[]): Error {
  return Object.assign(new ReplyError(message), { command: { name, args } });
}

describe("errWithoutCredentials", () => {
  it("writes an AUTH's refusal without its user and password, the original error's too, the rest of it kept", () => {
    const err = refusal("WRONGPASS invalid username-password pair or user is disabled.", "auth", ["app-user-1x", "app-pass-2y"]);
    const line = JSON.parse(logged(err));
    expect(line.err).toMatchObject({ type: "ReplyError", message: "WRONGPASS invalid username-password pair or user is disabled.", command: { name: "auth", args: REDACTED } });
    expect(line.err.stack).toContain("WRONGPASS");
    // The same error rejects every command waiting: its next line is clean too.
    expect((err as unknown as { command: { args: unknown } }).command.args).toBe(REDACTED);
  });

  it("HELLO's AUTH too, in any case, and inside the errors an error holds", () => {
    const hello = refusal("WRONGPASS invalid username-password pair", "HELLO", ["3", "AUTH", "app-user-3z", "app-pass-4w"]);
    const wrapped = Object.assign(new Error("all nodes failed"), { lastNodeError: refusal("NOAUTH Authentication required.", "auth", ["app-pass-5v"]) });
    const aggregate = new AggregateError([refusal("WRONGPASS x", "auth", ["app-user-6u", "app-pass-7t"])], "several");
    const out = [hello, wrapped, aggregate].map(logged).join("");
    expect(out).not.toMatch(/app-(user|pass)-/);
    expect(out.split(`"args":"${REDACTED}"`).length - 1).toBe(3);
  });

  it("keeps another command's arguments (the key a failed write named), and a field that is no error", () => {
    const line = JSON.parse(logged(refusal("OOM command not allowed", "evalsha", ["abc123", "1", "t:user:ada"])));
    expect(line.err.command).toEqual({ name: "evalsha", args: ["abc123", "1", "t:user:ada"] });
    expect(JSON.parse(logged("a plain message")).err).toBe("a plain message");
  });
});

describe("urlForDisplay", () => {
  it("shows a webhook URL's scheme and host; its userinfo never, what follows the host by its length", () => {
    expect(urlForDisplay("https://hooks.example.com")).toBe('"https://hooks.example.com"');
    expect(urlForDisplay("https://hooks.example.com/services/T0/B0/x?token=t")).toBe('"https://hooks.example.com" then 25 characters not shown (a path or query may hold a credential)');
    expect(urlForDisplay("http://u:pw@example.com:8080")).toBe('"http://<userinfo not shown>@example.com:8080"');
    // A password with a "/" or an "@" written unencoded: all of it before the host's @ is hidden.
    expect(urlForDisplay("http://u:p/w@d@example.com/x")).toBe('"http://<userinfo not shown>@example.com" then 2 characters not shown (a path or query may hold a credential)');
    // An @ in the query is no userinfo.
    expect(urlForDisplay("https://example.com?to=a@b")).toBe('"https://example.com" then 7 characters not shown (a path or query may hold a credential)');
    expect(urlForDisplay("example.com/secret")).toBe("a text of 18 characters (not shown: a URL may hold a credential)");
  });
});
