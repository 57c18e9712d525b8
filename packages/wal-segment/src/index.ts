export { crc32Combine } from './crc32-combine.ts';
export { FrameWriterError, SqliteWalHeaderError } from './errors.ts';
export { FrameWriter } from './frame-writer.ts';
export {
  type CompleteFrames,
  completeFrames,
  encodeFrame,
  FRAME_HEADER_BYTES,
  FrameCounter,
  MAX_FRAME_PAYLOAD_BYTES,
} from './frames.ts';
export {
  type ExpectedSegmentHeader,
  type HeaderDisagreement,
  segmentHeaderDisagreements,
} from './header-agreement.ts';
export {
  MAX_OBJECT_RECIPIENTS,
  type ObjectEncryption,
  SegmentObjectKeyError,
} from './object-encryption.ts';
export { type NewSegment, type ReadNewSegmentOptions, readNewSegment } from './read-segment.ts';
export {
  decodeSegmentObject,
  encodeSegmentObject,
  encodeSegmentObjectAsync,
  type ObjectCodec,
  readSegmentObjectHeader,
  SEGMENT_OBJECT_DEFAULT_ZSTD_LEVEL,
  SEGMENT_OBJECT_MAGIC,
  SEGMENT_OBJECT_MAX_HEADER_BYTES,
  SEGMENT_OBJECT_MIN_HEADER_BYTES,
  SEGMENT_OBJECT_VERSION,
  type SegmentObjectDecodeOptions,
  type SegmentObjectEncodeOptions,
  SegmentObjectError,
  type SegmentObjectFields,
  type SegmentObjectHeader,
  type SegmentObjectKind,
  segmentObjectFieldsOf,
} from './segment-object.ts';
export {
  type BufferedSegmentObject,
  encodeSegmentObjectInMemory,
  encodeSegmentObjectStream,
} from './segment-object-encode-stream.ts';
export { decodeSegmentObjectStream, type SegmentObjectStream } from './segment-object-stream.ts';
export {
  parseSqliteWalHeader,
  SQLITE_WAL_FORMAT_VERSION,
  SQLITE_WAL_FRAME_HEADER_BYTES,
  SQLITE_WAL_HEADER_BYTES,
  SQLITE_WAL_MAGIC_BIG_ENDIAN,
  SQLITE_WAL_MAGIC_LITTLE_ENDIAN,
  type SqliteWalEnd,
  type SqliteWalFrame,
  type SqliteWalHeader,
  type SqliteWalScan,
  SqliteWalScanner,
  scanSqliteWal,
  scanSqliteWalFile,
  sqliteWalChecksum,
  sqliteWalCommittedFrames,
  sqliteWalFrameBytes,
  sqliteWalHeaderProblem,
} from './sqlite-wal.ts';
