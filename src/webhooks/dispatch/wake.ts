import type { Config } from '../../config/defaults.js';
import { watchCommits, type CommitWatcher } from '../../db/notify.js';
import { DELIVERY_CHANNEL } from '../deliveries.js';
import type { Logger } from '../../logging/logger.js';

/**
 * When the dispatcher's loop wakes. A cheap indexed read tells whether anything is due and when the next row
 * will be; the loop sleeps until then, at most `pollIntervalMs`, and wakes early on another process's commit
 * (Postgres LISTEN/NOTIFY, the SQLite WAL watched; see src/db/notify.ts) unless `wakeOnCommit` is off. While
 * claims come back full, the read is skipped: more is due.
 */
export class Waker {
  private woken = false;
  private wakeUp: (() => void) | null = null;
  private watcher: CommitWatcher | null = null;

  /** Wakes on commits of deliveries, when the settings say so, until `close`. */
  listen(config: Readonly<Config>, logger: Logger): void {
    if (!config.dispatcher.wakeOnCommit) return;
    this.watcher = watchCommits({
      url: config.databaseUrl,
      channel: DELIVERY_CHANNEL,
      onCommit: () => this.wake(),
      onError: (error) => logger.warn({ err: error.message }, 'commit wake-ups unavailable; polling'),
    });
  }

  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Sleeps `ms`, or less if woken meanwhile; not at all if woken since the last wait. */
  async wait(ms: number): Promise<void> {
    if (!this.woken && ms > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.wakeUp = null;
          resolve();
        };
        const timer = setTimeout(done, ms);
        this.wakeUp = done;
      });
    }
    this.woken = false;
  }

  async close(): Promise<void> {
    await this.watcher?.close();
    this.watcher = null;
  }
}
