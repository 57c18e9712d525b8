/**
 * The tap's held read transaction, on one of two connections: the read
 * marks it holds are what keep SQLite from checkpointing or overwriting
 * frames the tap has not captured (see the module comment of tap.ts).
 *
 * Guarantee: {@link HeldReaders.moveForward} begins the new read
 * transaction before it ends the old one, so at no moment is there no
 * reader of the tap's holding the WAL, except between
 * {@link HeldReaders.letGo} and {@link HeldReaders.holdAgain}, which only
 * the restart calls, with the write lock held.
 */
import type { DatabaseSync, StatementSync } from 'node:sqlite';

/** Busy timeout of the reader connections (see the constructor). */
export const READER_BUSY_TIMEOUT_MS = 5000;

/** The held-reader query: any read of the schema starts the read transaction. */
const READER_QUERY = 'SELECT count(*) AS n FROM sqlite_schema';

export class HeldReaders {
  readonly #readers: [DatabaseSync, DatabaseSync];
  readonly #readerQueries: [StatementSync, StatementSync];
  #held: 0 | 1 | -1 = -1;

  /**
   * Takes the two reader connections (opened with
   * {@link READER_BUSY_TIMEOUT_MS}: beginning a read transaction never waits
   * on writers in WAL mode; the timeout only covers SQLite's own brief
   * WAL-index recovery locks) and holds a reader on the first.
   */
  constructor(readers: [DatabaseSync, DatabaseSync]) {
    this.#readers = readers;
    this.#readerQueries = [readers[0].prepare(READER_QUERY), readers[1].prepare(READER_QUERY)];
    this.#begin(0);
    this.#held = 0;
  }

  /** The first reader connection (it holds the reader the restart begins under the lock). */
  get first(): DatabaseSync {
    return this.#readers[0];
  }

  /** The second reader connection. */
  get second(): DatabaseSync {
    return this.#readers[1];
  }

  /** The connection not holding the reader (checkpoints run on it). */
  idle(): DatabaseSync {
    return this.#readers[this.#held === 0 ? 1 : 0];
  }

  /** Moves the held read transaction to the WAL's current end. */
  moveForward(): void {
    // Begin the new reader before ending the old one: at no moment is there
    // no reader of the tap's holding the WAL.
    const previous = this.#held;
    const next = previous === 0 ? 1 : 0;
    this.#begin(next);
    if (previous !== -1) this.#end(previous);
    this.#held = next;
  }

  /** Ends the held read transaction; only with the write lock held (see {@link holdAgain}). */
  letGo(): void {
    if (this.#held !== -1) this.#end(this.#held);
    this.#held = -1;
  }

  /**
   * Holds a reader again after {@link letGo}, on the first connection (read
   * mark 0 when everything was copied); nothing when one is held. Asks the
   * connection, not only the bookkeeping: a {@link letGo} that threw half
   * way may have ended the transaction without saying so.
   * @throws what beginning the read transaction throws; then none is held.
   */
  holdAgain(): void {
    if (this.#held !== -1 && this.#readers[this.#held].isTransaction) return;
    this.#held = -1;
    this.#begin(0);
    this.#held = 0;
  }

  /** Ends the read transactions and closes both connections. */
  close(): void {
    for (const reader of this.#readers) if (reader.isTransaction) reader.exec('ROLLBACK');
    this.#readers[0].close();
    this.#readers[1].close();
  }

  #begin(index: 0 | 1): void {
    const reader = this.#readers[index];
    reader.exec('BEGIN');
    try {
      this.#readerQueries[index].get();
    } catch (error) {
      reader.exec('ROLLBACK');
      throw error;
    }
  }

  #end(index: 0 | 1): void {
    const reader = this.#readers[index];
    if (reader.isTransaction) reader.exec('ROLLBACK');
  }
}
