// What is read before and after a measured phase: Redis INFO commandstats and INFO cpu, the
// CPU time of the server process, and the CPU time of this process (autocannon runs in it).
// Redis 7 counts a script's whole run under cmdstat_evalsha (the commands it calls are also
// counted under their own names), so the evalsha delta is the cost of the phase's script.
import { cpuSeconds } from "./processes.mjs";

/** `others`: more processes whose CPU a bench reports, by name ({receiver: pid}). */
export async function snapshot(redis, serverPid, others = {}) {
  const [commandstats, cpu] = await Promise.all([redis.info("commandstats"), redis.info("cpu")]);
  return {
    at: performance.now(),
    commands: parseCommandStats(commandstats),
    redisCpu: infoNumber(cpu, "used_cpu_user") + infoNumber(cpu, "used_cpu_sys"),
    serverCpu: cpuSeconds(serverPid),
    loadCpu: selfCpuSeconds(),
    othersCpu: Object.fromEntries(Object.entries(others).map(([name, pid]) => [name, cpuSeconds(pid)])),
  };
}

/** The change between two snapshots: per-command calls and µs, and CPU as % of one core. */
export function delta(before, after) {
  const seconds = (after.at - before.at) / 1000;
  const commands = {};
  for (const [name, a] of Object.entries(after.commands)) {
    const b = before.commands[name] ?? { calls: 0, usec: 0, failed: 0 };
    const calls = a.calls - b.calls;
    if (calls <= 0) continue;
    const usec = a.usec - b.usec;
    commands[name] = { calls, usec, usPerCall: usec / calls, failed: a.failed - b.failed };
  }
  const pct = (x) => (100 * x) / seconds;
  return {
    seconds,
    commands,
    cpuPercent: {
      server: pct(after.serverCpu - before.serverCpu),
      redis: pct(after.redisCpu - before.redisCpu),
      loadGenerator: pct(after.loadCpu - before.loadCpu),
      ...Object.fromEntries(Object.entries(after.othersCpu ?? {}).map(([name, cpu]) => [name, pct(cpu - before.othersCpu[name])])),
    },
  };
}

function parseCommandStats(text) {
  const out = {};
  for (const line of text.split("\r\n")) {
    const m = /^cmdstat_([^:]+):(.*)$/.exec(line);
    if (!m) continue;
    const kv = Object.fromEntries(m[2].split(",").map((p) => p.split("=")));
    out[m[1]] = { calls: Number(kv.calls), usec: Number(kv.usec), failed: Number(kv.failed_calls ?? 0) };
  }
  return out;
}

function infoNumber(text, field) {
  const m = new RegExp(`^${field}:([0-9.]+)`, "m").exec(text);
  return m ? Number(m[1]) : NaN;
}

function selfCpuSeconds() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}
