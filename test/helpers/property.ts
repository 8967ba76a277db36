/**
 * fast-check's parameters for a property test: the seed from FC_SEED, else a fresh one, printed so
 * that a failure can be rerun (`FC_SEED=<seed> npx vitest run test/property`); the number of runs
 * from FC_RUNS, else the test's default.
 */
export function propertyParameters(defaultRuns: number): { seed: number; numRuns: number } {
  const seed = process.env.FC_SEED ? Number(process.env.FC_SEED) : Date.now() % 2 ** 31;
  console.log(`property seed: FC_SEED=${seed}`);
  return { seed, numRuns: Number(process.env.FC_RUNS ?? defaultRuns) };
}
