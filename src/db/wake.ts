import { watchCommits, type CommitWatcher } from './notify.js';

export interface WakeListen {
  url: string;
  /** The channel the writers announce on (`notifyOnCommit`). */
  channel: string;
  onError: (error: Error) => void;
  /**
   * What a commit heard does; by default it wakes every sleeper. A loop whose answer to a wake-up costs more
   * than a read (several workers each claiming) looks first, and wakes only when there is something to do.
   */
  onCommit?: () => void;
}

/**
 * A loop's sleep until its next poll, cut short by `wake()`: the dispatcher's one loop, the sync workers
 * each. A wake-up with nobody asleep is kept for the next `wait`, which then does not sleep: work committed
 * while a loop was busy is not left to the poll.
 */
export class Waker {
  private woken = false;
  private readonly sleepers = new Set<() => void>();
  private watcher: CommitWatcher | null = null;

  /** Hears other processes' commits on the channel (notify.ts), until `close`. */
  listen({ url, channel, onError, onCommit = () => this.wake() }: WakeListen): void {
    this.watcher = watchCommits({ url, channel, onCommit, onError });
  }

  wake(): void {
    this.woken = true;
    for (const sleeper of [...this.sleepers]) sleeper();
  }

  /** Sleeps `ms`, or less if woken or aborted meanwhile; not at all if woken since the last wait. */
  async wait(ms: number, signal?: AbortSignal): Promise<void> {
    if (!this.woken && ms > 0 && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.sleepers.delete(done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        this.sleepers.add(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    }
    this.woken = false;
  }

  async close(): Promise<void> {
    await this.watcher?.close();
    this.watcher = null;
  }
}
