/**
 * Progress for long restores: a redrawn bar on a terminal, plain lines
 * (at each phase and every 10 %) otherwise, so logs stay readable.
 */
import { formatBytes } from './format-bytes.ts';

export interface ProgressState {
  readonly phase: string;
  readonly bytesDone: number;
  readonly bytesTotal: number;
  readonly objectsDone: number;
  readonly objectsTotal: number;
}

export function progressReporter(
  stream: NodeJS.WritableStream & { isTTY?: boolean; columns?: number },
) {
  let lastPhase = '';
  let lastTenth = -1;
  let drawn = false;
  return {
    update(state: ProgressState): void {
      const fraction =
        state.bytesTotal > 0
          ? Math.min(1, state.bytesDone / state.bytesTotal)
          : state.phase === 'done'
            ? 1
            : 0;
      const label = `${state.phase} ${formatBytes(state.bytesDone)}/${formatBytes(state.bytesTotal)} · ${state.objectsDone}/${state.objectsTotal} objects`;
      if (stream.isTTY) {
        const width = Math.max(10, Math.min(40, (stream.columns ?? 80) - label.length - 10));
        const filled = Math.round(fraction * width);
        stream.write(
          `\r[${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${String(Math.round(fraction * 100)).padStart(3)}% ${label}\u001b[K`,
        );
        drawn = true;
        return;
      }
      const tenth = Math.floor(fraction * 10);
      if (state.phase !== lastPhase || tenth > lastTenth) {
        stream.write(`${Math.round(fraction * 100)}% ${label}\n`);
        lastPhase = state.phase;
        lastTenth = tenth;
      }
    },
    finish(): void {
      if (drawn) stream.write('\n');
    },
  };
}
