// Turns the phases into the figures (bench/README.md says what each means) and prints them.
// The targets are shown beside the figures; they never change the exit code.

export const TARGETS = { usPerEventScript: 40, eventsToCeiling: 0.8, readToBaseline: 0.8, p99Ms: 10 };

/** phases: { baselineEvalsha, events, baselineHget, read }, each a load result plus its delta. */
export function figures(phases, readSlices = []) {
  const usPerEventScript = (phases.events.redis.fcall ?? phases.events.redis.evalsha)?.usPerCall ?? NaN;
  // Redis CPU per event script: the events phase's Redis CPU per request less what a request
  // costs Redis around its script (the baseline's CPU per request less its script's µs).
  const redisCpuPerEventScript = phases.events.cpuUsPerRequest.redis - (phases.baselineEvalsha.cpuUsPerRequest.redis - (phases.baselineEvalsha.redis.evalsha?.usPerCall ?? 0));
  const scriptCeiling = 1e6 / usPerEventScript;
  const ceiling = Math.min(phases.baselineEvalsha.rps, scriptCeiling);
  return {
    usPerEventScript,
    redisCpuPerEventScript,
    scriptCeiling,
    ceiling,
    ceilingBoundBy: phases.baselineEvalsha.rps <= scriptCeiling ? "baseline EVALSHA req/s" : "1e6 / µs per script",
    eventsToCeiling: phases.events.rps / ceiling,
    readToBaseline: phases.read.rps / phases.baselineHget.rps,
    slicedReadToBaseline: median(readSlices.map((p) => p.ratio)),
    slicedReadRange: readSlices.length ? [Math.min(...readSlices.map((p) => p.ratio)), Math.max(...readSlices.map((p) => p.ratio))] : [NaN, NaN],
    eventsP99: phases.events.p99,
    readP99: phases.read.p99,
    streakReadToBaseline: phases.streakRead.rps / phases.baselineHget.rps,
    achievementsReadToBaseline: phases.achievementsRead.rps / phases.baselineHget.rps,
  };
}

const LABELS = {
  baselineEvalsha: "baseline POST → EVALSHA (1 call)",
  events: "events POST /v1/metrics/*/event",
  baselineHget: "baseline GET → HGET",
  read: "read GET /v1/users/*/points/energy",
  streakRead: "read GET /v1/users/*/streak",
  achievementsRead: "read GET /v1/users/*/achievements",
};

export function print(config, phases, f) {
  const out = [];
  out.push("");
  out.push(`laurel bench: ${config.connections} connections, ${config.warmup} s warm-up + ${config.duration} s per phase, ${config.users} users, tree ${config.tree}`);
  if (config.pinned) out.push(`pinned: ${config.pinned}`);
  out.push("");
  const head = ["phase", "req/s", "p50 ms", "p99 ms", "non-2xx", "errors", "Redis µs/call", "CPU µs/req server/redis", "CPU % server/redis/load"];
  const rows = Object.entries(LABELS).map(([key, label]) => {
    const p = phases[key];
    // The service runs its scripts with FCALL (Redis Functions) unless LAUREL_LUA=eval; the
    // metering read is a plain LRANGE (a script only for a user with no award in the system).
    const name = key === "baselineHget" ? "hget" : key === "read" ? "lrange" : key === "baselineEvalsha" || !p.redis.fcall ? "evalsha" : "fcall";
    const cmd = p.redis[name];
    const cpu = p.cpuPercent;
    return [
      label,
      fmt(p.rps, 0),
      String(p.p50),
      String(p.p99),
      String(p.non2xx),
      String(p.errors),
      cmd ? `${fmt(cmd.usPerCall, 1)} (${name})` : "-",
      `${fmt(p.cpuUsPerRequest.server, 0)} / ${fmt(p.cpuUsPerRequest.redis, 0)}`,
      `${fmt(cpu.server, 0)} / ${fmt(cpu.redis, 0)} / ${fmt(cpu.loadGenerator, 0)}`,
    ];
  });
  out.push(...table([head, ...rows]));
  out.push("");
  out.push(check("Redis µs per event script", fmt(f.usPerEventScript, 1), f.usPerEventScript <= TARGETS.usPerEventScript, `≤ ${TARGETS.usPerEventScript}`));
  out.push(`  inside it, µs/call    ${insideScript(phases.events.redis)}`);
  out.push(`  info  Redis CPU per event script ${fmt(f.redisCpuPerEventScript, 1)} µs (CPU time, which a preempted Redis does not accrue; the µs above are wall time inside the script)`);
  out.push(`  events ceiling       ${fmt(f.ceiling, 0)} req/s = min(baseline EVALSHA ${fmt(phases.baselineEvalsha.rps, 0)}, 1e6/µs ${fmt(f.scriptCeiling, 0)}); bound by ${f.ceilingBoundBy}`);
  out.push(check("events ÷ ceiling", fmt(f.eventsToCeiling, 2), f.eventsToCeiling >= TARGETS.eventsToCeiling, `≥ ${TARGETS.eventsToCeiling}`));
  out.push(check("read ÷ HGET baseline", fmt(f.readToBaseline, 2), f.readToBaseline >= TARGETS.readToBaseline, `≥ ${TARGETS.readToBaseline}`));
  out.push(`  info  read ÷ HGET in ${config.slices} alternated pairs of ${config.slice}-s slices: median ${fmt(f.slicedReadToBaseline, 2)} (${fmt(f.slicedReadRange[0], 2)}-${fmt(f.slicedReadRange[1], 2)}); the phases above are ~25 s apart and this box's speed drifts`);
  out.push(check(`events p99 at c${config.connections}`, `${f.eventsP99} ms`, f.eventsP99 <= TARGETS.p99Ms, `≤ ${TARGETS.p99Ms} ms`));
  out.push(check(`read p99 at c${config.connections}`, `${f.readP99} ms`, f.readP99 <= TARGETS.p99Ms, `≤ ${TARGETS.p99Ms} ms`));
  out.push(`  info  streak read ÷ HGET baseline ${fmt(f.streakReadToBaseline, 2)}, p99 ${phases.streakRead.p99} ms (the user's script, then the rank: one call over every shard for all the streak reads of a batch)`);
  out.push(`  info  achievements read ÷ HGET    ${fmt(f.achievementsReadToBaseline, 2)}, p99 ${phases.achievementsRead.p99} ms (1 script + S HMGET per read)`);
  out.push("");
  out.push("CPU µs/req: CPU time of the server process and of redis-server over the phase ÷ requests.");
  out.push("CPU %: share of one core over the phase: server process, redis-server, this process (autocannon).");
  out.push("The load generator shares the machine: req/s are lower bounds for a box that only serves.");
  console.log(out.join("\n"));
}

/** The commands the event script ran, with their own µs per call (the rest of its time is Lua). */
function insideScript(commands) {
  return Object.entries(commands)
    .filter(([name]) => name !== "evalsha" && name !== "fcall" && name !== "info")
    .map(([name, c]) => `${name} ${fmt(c.usPerCall, 1)}${perScript(c.calls, (commands.fcall ?? commands.evalsha)?.calls)}`)
    .join(", ");
}

function perScript(calls, scripts) {
  if (calls === scripts) return "";
  return calls / scripts >= 0.1 ? ` (×${fmt(calls / scripts, 2)} per script)` : ` (${calls} calls)`;
}

function check(label, value, ok, target) {
  return `${ok ? "  ok  " : "  MISS"} ${label.padEnd(26)} ${value.padStart(8)}   target ${target}`;
}

/** The median of a list of numbers (NaN for none): the benches' alternated pairs report it. */
export function median(values) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function fmt(x, digits) {
  return Number.isFinite(x) ? x.toFixed(digits) : "n/a";
}

function table(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(rows[0]), widths.map((w) => "-".repeat(w)).join("  "), ...rows.slice(1).map(line)];
}
