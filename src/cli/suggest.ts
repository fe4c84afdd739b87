/** Edit distance (insertions, deletions, substitutions), for the command a mistyped one was meant to be. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The command id closest to `typed`, or null when none is close enough to be a typo of it (more than a
 * third of the longer id would have to change: "svc deploy" gets no suggestion rather than a random one).
 */
export function closestCommand(typed: string, ids: readonly string[]): string | null {
  let best: { id: string; distance: number } | null = null;
  for (const id of ids) {
    const distance = editDistance(typed, id);
    if (!best || distance < best.distance) best = { id, distance };
  }
  if (!best) return null;
  return best.distance <= Math.max(2, Math.floor(Math.max(typed.length, best.id.length) / 3))
    ? best.id
    : null;
}
