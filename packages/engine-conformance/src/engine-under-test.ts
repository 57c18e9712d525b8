/** What an engine hands the suite: how to make its files change, and how to read its state. */

/** One engine's files in a fresh directory, with the means to change and read them. */
export interface EngineFixture {
  /** A new source over the files, as a process starting now would open it. */
  openSource(): BackupSource | Promise<BackupSource>;
  /**
   * Makes exactly `count` commits through the engine's own writer, each
   * changing the state (an engine may log nothing for a no-op); durable on return.
   */
  commit(count: number): void | Promise<void>;
  /** The engine's committed state now, as a string equal for equal states. */
  state(): string | Promise<string>;
  /** Ends a source as a killed process leaves it: no graceful close, nothing flushed. */
  kill(source: BackupSource): void | Promise<void>;
  /** Closes a source gracefully, as a stopping process does. */
  close(source: BackupSource): void | Promise<void>;
  /** Removes the fixture's files. */
  dispose(): void | Promise<void>;
}

export interface EngineUnderTest {
  /** Creates a fixture: new files with some initial content. */
  createFixture(): Promise<EngineFixture>;
  /** How a restore point becomes the engine's files. */
  readonly materializer: RestoreMaterializer;
  /** The state of what a restore wrote into `directory`, comparable with `EngineFixture.state()`. */
  restoredState(directory: string): string | Promise<string>;
  /**
   * When given, every case backs up with this `encryption` and restores
   * with its identities (at least one must open what it seals), and the
   * bucket must hold every object but manifests, `LATEST` and the lease
   * sealed. Absent: in clear.
   */
  readonly encryption?: EncryptionOptions;
}

import type { EncryptionOptions } from '@x/backup-worker';
import type { BackupSource, RestoreMaterializer } from '@x/engine';
