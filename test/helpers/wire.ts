import type { ApiReply } from "../../src/http/router.js";
import { stringifyReply } from "../../src/http/raw-json.js";

/** A reply as a client receives it: serialised the way the router does, then parsed (RawJson parts included). */
export function onTheWire(reply: ApiReply): ApiReply {
  return { ...reply, body: JSON.parse(stringifyReply(reply.body)) };
}
