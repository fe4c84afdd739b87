/*
 * The shape every owned state machine shares (a link's status, a refresh intent's, a job's, an account's):
 * a table of named changes, each with the states it may start from and the one it leads to. The owner's
 * state file declares the table next to the functions that apply it, so what can happen to a row is read
 * in one place; the statements make the same table their `WHERE status IN (…)`, so a stale read cannot
 * move a row the table forbids.
 */

/** One named change: the states it may start from and the state it leads to. */
export interface Transition<S extends string> {
  readonly from: readonly S[];
  readonly to: S;
}

/** A state machine: each named change with its transition. */
export type Transitions<S extends string, C extends string> = Readonly<Record<C, Transition<S>>>;

/** A change asked of a row whose state does not allow it: a bug or a lost race, never a user's mistake. */
export class IllegalTransitionError extends Error {
  override name = 'IllegalTransitionError';

  constructor(
    readonly machine: string,
    readonly id: string | null,
    readonly from: string,
    readonly change: string,
    allowed: readonly string[],
  ) {
    super(
      `${machine}${id === null ? '' : ` ${id}`} is ${from}: "${change}" is allowed only from ${allowed.join(', ') || 'no state'}`,
    );
  }
}

/** The state `change` leads to from `from`, or an IllegalTransitionError naming both. Pure. */
export function transition<S extends string, C extends string>(
  machine: string,
  table: Transitions<S, C>,
  from: S,
  change: C,
  id: string | null = null,
): S {
  const move = table[change];
  if (!move.from.includes(from)) throw new IllegalTransitionError(machine, id, from, change, move.from);
  return move.to;
}
