/**
 * Prometheus text exposition (format 0.0.4) of the replicas' status. Label
 * values are escaped as the format requires; no credentials can reach a label
 * because replica names are built from parsed URLs that refuse them.
 */
import { OPERATIONS } from './instrumented-store.ts';
import type { ReplicaStatus } from './status.ts';

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labels(pairs: Record<string, string>): string {
  return `{${Object.entries(pairs)
    .map(([key, value]) => `${key}="${escapeLabel(value)}"`)
    .join(',')}}`;
}

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'gauge' | 'counter';
  readonly samples: (
    status: ReplicaStatus,
    nowSeconds: number,
  ) => readonly [Record<string, string>, number][];
}

const FAMILIES: readonly Family[] = [
  {
    name: 'backupd_healthy',
    help: '1 when the replica is healthy, 0 otherwise.',
    type: 'gauge',
    samples: (s) => [[{}, s.healthy ? 1 : 0]],
  },
  {
    name: 'backupd_lag_seconds',
    help: 'Seconds the oldest durable, unshipped WAL byte has waited (a follower: since it last knew its target up to date).',
    type: 'gauge',
    samples: (s) => [[{}, s.lagSeconds]],
  },
  {
    name: 'backupd_last_success_timestamp_seconds',
    help: 'Unix time of the last moment everything durable was shipped.',
    type: 'gauge',
    samples: (s) => [[{}, s.lastSuccessSeconds]],
  },
  {
    name: 'backupd_errors_total',
    help: 'Failed backup steps since start.',
    type: 'counter',
    samples: (s) => [[{}, s.errors]],
  },
  {
    name: 'backupd_lease_held',
    help: '1 while this process holds the replica lease.',
    type: 'gauge',
    samples: (s) => [[{}, s.leaseHeld ? 1 : 0]],
  },
  {
    name: 'backupd_unshipped_bytes',
    help: 'Durable WAL bytes of the current generation not shipped yet.',
    type: 'gauge',
    samples: (s) => [[{}, s.unshippedBytes]],
  },
  {
    name: 'backupd_unrestorable_commits',
    help: 'Captured commits newer than the restore point LATEST names (not restorable yet).',
    type: 'gauge',
    samples: (s) => [[{}, s.unrestorableCommits]],
  },
  {
    name: 'backupd_restore_points',
    help: 'Restore points (manifests) this process knows in the replica.',
    type: 'gauge',
    samples: (s) => (s.restorePoints !== undefined ? [[{}, s.restorePoints]] : []),
  },
  {
    name: 'backupd_latest_restore_point_commit',
    help: 'Commit count of the restore point LATEST names.',
    type: 'gauge',
    samples: (s) => (s.latestRestorePoint ? [[{}, s.latestRestorePoint.commitSeq]] : []),
  },
  {
    name: 'backupd_directory_databases',
    help: 'Databases of a directory (replicate --dir) by state: awake (a worker runs), asleep, in-use (another replicate holds it), refused.',
    type: 'gauge',
    samples: (s) =>
      s.directory
        ? [
            [{ state: 'awake' }, s.directory.awake],
            [{ state: 'asleep' }, s.directory.asleep],
            [{ state: 'in-use' }, s.directory.inUse],
            [{ state: 'refused' }, s.directory.refused],
          ]
        : [],
  },
  {
    name: 'backupd_directory_wakes_total',
    help: 'Times a database of a directory was woken (a worker started for it) since start.',
    type: 'counter',
    samples: (s) => (s.directory ? [[{}, s.directory.wakes]] : []),
  },
  {
    name: 'backupd_directory_incomplete_sleeps_total',
    help: 'Times a database of a directory stopped with commits in no restore point (it is woken again at the next look).',
    type: 'counter',
    samples: (s) => (s.directory ? [[{}, s.directory.incompleteSleeps]] : []),
  },
  {
    name: 'backupd_follow_applied_commit',
    help: 'Commit count of the state a follower shows its readers.',
    type: 'gauge',
    samples: (s) => (s.follow ? [[{}, s.follow.appliedCommitSeq]] : []),
  },
  {
    name: 'backupd_follow_commits_behind',
    help: 'Commits the bucket is known to hold beyond the state a follower shows.',
    type: 'gauge',
    samples: (s) => (s.follow ? [[{}, s.follow.commitsBehind]] : []),
  },
  {
    name: 'backupd_follow_states_applied_total',
    help: 'States a follower has published to its readers since start.',
    type: 'counter',
    samples: (s) => (s.follow ? [[{}, s.follow.statesApplied]] : []),
  },
  {
    name: 'backupd_database_bytes',
    help: 'Size of the database file, as the engine last reported it.',
    type: 'gauge',
    samples: (s) => (s.engine?.databaseBytes != null ? [[{}, s.engine.databaseBytes]] : []),
  },
  {
    name: 'backupd_wal_bytes',
    help: "Size of the engine's WAL file on disk, as the engine last reported it.",
    type: 'gauge',
    samples: (s) => (s.engine?.walBytes != null ? [[{}, s.engine.walBytes]] : []),
  },
  {
    name: 'backupd_checkpoints_total',
    help: 'Checkpoints backupd ran on the database since its source opened, by mode.',
    type: 'counter',
    samples: (s) =>
      s.engine?.checkpoints
        ? [
            [{ mode: 'passive' }, s.engine.checkpoints.passive],
            [{ mode: 'truncate' }, s.engine.checkpoints.truncate],
          ]
        : [],
  },
  {
    name: 'backupd_checkpoint_lock_held',
    help: "1 while backupd holds SQLite's checkpoint lock (commits landing; the application's own checkpoints then answer busy), 0 otherwise.",
    type: 'gauge',
    samples: (s) =>
      s.engine?.checkpointLockHeld !== undefined ? [[{}, s.engine.checkpointLockHeld ? 1 : 0]] : [],
  },
  {
    name: 'backupd_latest_restore_point_age_seconds',
    help: 'Seconds since the restore point LATEST names was made: how old a restore of the latest state is, at most.',
    type: 'gauge',
    samples: (s, now) => {
      const at = s.latestRestorePoint?.createdAt;
      const ms = at === undefined ? Number.NaN : Date.parse(at);
      return Number.isNaN(ms) ? [] : [[{}, Math.max(0, Math.round(now - ms / 1000))]];
    },
  },
  {
    name: 'backupd_oldest_restore_point_timestamp_seconds',
    help: 'Unix time of the oldest restore point retention kept: the restorable window starts there.',
    type: 'gauge',
    samples: (s) => {
      const ms = s.oldestRestorePoint ? Date.parse(s.oldestRestorePoint.createdAt) : Number.NaN;
      return Number.isNaN(ms) ? [] : [[{}, Math.floor(ms / 1000)]];
    },
  },
  {
    name: 'backupd_requests_total',
    help: 'Object-store requests by operation.',
    type: 'counter',
    samples: (s) =>
      OPERATIONS.map(
        (operation) =>
          [{ operation }, s.requests?.[operation].requests ?? 0] as [
            Record<string, string>,
            number,
          ],
      ).filter(() => s.requests !== undefined),
  },
  {
    name: 'backupd_request_errors_total',
    help: 'Object-store requests that failed, by operation.',
    type: 'counter',
    samples: (s) =>
      OPERATIONS.map(
        (operation) =>
          [{ operation }, s.requests?.[operation].errors ?? 0] as [Record<string, string>, number],
      ).filter(() => s.requests !== undefined),
  },
  {
    name: 'backupd_bytes_total',
    help: 'Bytes sent to (out) and received from (in) the object store, by operation.',
    type: 'counter',
    samples: (s) =>
      OPERATIONS.flatMap((operation) => [
        [{ operation, direction: 'out' }, s.requests?.[operation].bytesOut ?? 0] as [
          Record<string, string>,
          number,
        ],
        [{ operation, direction: 'in' }, s.requests?.[operation].bytesIn ?? 0] as [
          Record<string, string>,
          number,
        ],
      ]).filter(() => s.requests !== undefined),
  },
];

export function renderMetrics(statuses: readonly ReplicaStatus[], now = Date.now()): string {
  const lines: string[] = [];
  for (const family of FAMILIES) {
    lines.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
    for (const status of statuses) {
      for (const [extra, value] of family.samples(status, now / 1000)) {
        lines.push(
          `${family.name}${labels({ database: status.database, replica: status.replica, ...extra })} ${value}`,
        );
      }
    }
  }
  return `${lines.join('\n')}\n`;
}
