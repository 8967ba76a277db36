import { TrophyApiError } from "@trophyso/node";
import { expect } from "vitest";

/**
 * Runs an SDK call that must fail and returns its error. A ParseError (our JSON did not match the
 * SDK's schema) is not a TrophyApiError, so it fails the test here.
 */
export async function rejection(call: Promise<unknown>): Promise<TrophyApiError> {
  const err = await call.then(
    () => {
      throw new Error("expected the SDK call to fail");
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(TrophyApiError);
  return err as TrophyApiError;
}

/** The error body every mapped status carries: exactly `{error: <non-empty string>}`; returns the message. */
export function errorBody(err: TrophyApiError): string {
  expect(err.body).toEqual({ error: expect.any(String) });
  const message = (err.body as { error: string }).error;
  expect(message.length).toBeGreaterThan(0);
  return message;
}
