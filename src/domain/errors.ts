/**
 * Every error Laurel answers with, declared once (in the manner of fastify's lib/errors.js).
 * The wire body is always `{"error": "<message>"}`; the status decides which typed error the
 * official SDK raises (trophy-compat §1.5, §2.3). Nothing is written when one of these is thrown:
 * request validation runs before the store is called, and the Lua scripts check before they write.
 */
export const ErrorCodes = {
  MALFORMED_JSON: { status: 400, message: "Malformed JSON body" },
  INVALID_BODY: { status: 400, message: "Invalid request body" },
  INVALID_PATH: { status: 400, message: "Invalid path parameter" },
  INVALID_QUERY: { status: 400, message: "Invalid query parameter" },
  UNAUTHORIZED: { status: 401, message: "Missing or invalid API key" },
  NOT_FOUND: { status: 404, message: "Not found" },
  METRIC_NOT_FOUND: { status: 404, message: "Metric not found" },
  POINTS_SYSTEM_NOT_FOUND: { status: 404, message: "Points system not found" },
  USER_NOT_FOUND: { status: 404, message: "User not found" },
  ACHIEVEMENT_NOT_FOUND: { status: 404, message: "Achievement not found" },
  BOOST_NOT_FOUND: { status: 404, message: "Boost not found" },
  LEADERBOARD_NOT_FOUND: { status: 404, message: "Leaderboard not found" },
  RUN_NOT_KEPT: { status: 404, message: "Leaderboard run no longer kept" },
  METHOD_NOT_ALLOWED: { status: 405, message: "Method not allowed" },
  BODY_TOO_LARGE: { status: 413, message: "Request body too large" },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: "Content-Type must be application/json" },
  INVALID_VALUE: { status: 422, message: "Invalid value" },
  INVALID_TIMEZONE: { status: 422, message: "Unknown IANA time zone" },
  INVALID_ATTRIBUTES: { status: 422, message: "Invalid attribute keys" },
  OUT_OF_RANGE: { status: 422, message: "Parameter out of range" },
  FEATURE_DISABLED: { status: 422, message: "Feature not enabled for this tenant" },
  TOTAL_OUT_OF_RANGE: { status: 422, message: "Metric total would leave the supported range" },
  NO_LEVELS: { status: 422, message: "No levels configured on the points system" },
  INTERNAL: { status: 500, message: "Internal server error" },
  // ioredis gave up on a command (src/http/router.ts): Redis may or may not have run it.
  // (The first wording promised an Idempotency-Key to every write; only events take one. The
  // README says per route what sending again does.)
  REDIS_UNREACHABLE: { status: 503, message: "Redis is not reachable; whether this request took effect is unknown (an event is safe to send again with the same Idempotency-Key)" },
  // The same for a read (GET), which changes nothing either way.
  REDIS_UNREACHABLE_READ: { status: 503, message: "Redis is not reachable; retry later" },
  // Redis at maxmemory refuses a write (a script that may write, a write command) before running it.
  REDIS_OUT_OF_MEMORY: { status: 503, message: "Redis is out of memory (maxmemory) and refused this write; nothing was recorded" },
  // The user's stored zone changed again between each of an event's (or a streak operation's)
  // ZONE_ATTEMPTS calls (src/store/tenant-store.ts): nothing was written, and the SDK retries a 503.
  ZONE_CHANGING: { status: 503, message: "The user's time zone kept changing while this request ran (identifies or updates at the same time); nothing was recorded for that user: send it again" },
  // The server REDIS_URL reaches is a replica now (a failover demoted it, and the address still
  // leads to it): it refuses every write before running it. The client reconnects at once
  // (redis-client.ts), so that an address which moved to the new primary (a managed service's
  // endpoint, a virtual IP) is followed; the SDK retries the 503.
  REDIS_READ_ONLY: { status: 503, message: "Redis refused this write: the server is a read-only replica (after a failover?); nothing was recorded; retry" },
  // A read refused by a replica: its script was not loaded yet (FUNCTION LOAD is a write).
  REDIS_READ_ONLY_READ: { status: 503, message: "Redis is a read-only replica and refused to load the script this read needs; retry later" },
  // Redis could not write its AOF or its last RDB snapshot (a full disk): it refuses every write
  // before running it (MISCONF) until a write to its disk succeeds again.
  REDIS_DISK_ERROR: { status: 503, message: "Redis cannot write to its disk (MISCONF) and refused this write; nothing was recorded; retry" },
  REDIS_DISK_ERROR_READ: { status: 503, message: "Redis cannot write to its disk (MISCONF) and refused to load the script this read needs; retry later" },
  // Redis set to refuse writes while fewer replicas than min-replicas-to-write are in sync (README: Persistence).
  REDIS_TOO_FEW_REPLICAS: { status: 503, message: "Redis refused this write: too few replicas are in sync (min-replicas-to-write); nothing was recorded; retry" },
  REDIS_TOO_FEW_REPLICAS_READ: { status: 503, message: "Redis refused to load the script this read needs: too few replicas are in sync (min-replicas-to-write); retry later" },
  // Redis loading its dataset (a replica's full resync after a failover, a restart) refuses every command.
  REDIS_LOADING: { status: 503, message: "Redis is loading its data and refused this request; nothing was recorded; retry" },
  REDIS_LOADING_READ: { status: 503, message: "Redis is loading its data; retry later" },
  // A script ran past busy-reply-threshold: Redis refuses every other command until it ends.
  REDIS_BUSY: { status: 503, message: "Redis is busy running a script and refused this request; nothing was recorded; retry" },
  REDIS_BUSY_READ: { status: 503, message: "Redis is busy running a script; retry later" },
  // Redis refused REDIS_URL's credentials at a reconnect (WRONGPASS), or asks for some REDIS_URL
  // does not give (NOAUTH): the command was never run. The operator's to mend (the log says it);
  // the SDK retries a 503.
  REDIS_CREDENTIALS_REFUSED: { status: 503, message: "Redis refused the service's credentials (WRONGPASS) and this request was not sent to it; nothing was recorded; retry" },
  REDIS_CREDENTIALS_REFUSED_READ: { status: 503, message: "Redis refused the service's credentials (WRONGPASS); retry later" },
  REDIS_AUTHENTICATION_REQUIRED: { status: 503, message: "Redis asks for a password the service was not given (NOAUTH) and refused this request; nothing was recorded; retry" },
  REDIS_AUTHENTICATION_REQUIRED_READ: { status: 503, message: "Redis asks for a password the service was not given (NOAUTH); retry later" },
  // A read (GET) Redis had not answered within LAUREL_READ_TIMEOUT (src/http/read-deadline.ts):
  // Redis is stalled; the message names the bound. Writes are never answered early.
  REDIS_READ_TIMEOUT: { status: 503, message: "Redis did not answer in time; retry later" },
  // A read refused at maxmemory: its script was not loaded yet (FUNCTION LOAD is a write).
  REDIS_OUT_OF_MEMORY_READ: { status: 503, message: "Redis is out of memory (maxmemory) and refused to load the script this read needs; retry later" },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ErrorCodes;

export class LaurelError extends Error {
  readonly code: ErrorCode;
  readonly status: number;

  /** `detail` replaces the default message when the caller can say more precisely what was wrong. */
  constructor(code: ErrorCode, detail?: string) {
    // No stack: these are answers to the client, never logged (src/http/router.ts), and V8's
    // capture of the frames was ~11% of the service's CPU under a flood of 404 reads.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(detail ?? ErrorCodes[code].message);
    Error.stackTraceLimit = limit;
    this.code = code;
    this.status = ErrorCodes[code].status;
  }
}

export function fail(code: ErrorCode, detail?: string): never {
  throw new LaurelError(code, detail);
}
