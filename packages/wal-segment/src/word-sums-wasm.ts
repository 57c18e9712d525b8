/**
 * The inner loop of SQLite's WAL checksum as a few dozen bytes of
 * WebAssembly, assembled here from its opcodes (no toolchain, no binary file).
 * It runs several times faster than the JavaScript loop, so a tap that
 * checksums every frame it ships takes less CPU from the database's machine
 * (figures: docs/decisions/2026-12-06-wal-checksum-wasm.md). It reads
 * little-endian words in blocks of 8; the caller handles other byte orders,
 * the rest, and runtimes without WebAssembly ({@link wasmWordSums} is `null`
 * under `node --jitless`). Results are bit-identical either way.
 */

/** Bytes of input per kernel call (the scratch area of its memory). */
export const WORD_SUMS_CHUNK_BYTES = 64 * 1024;
/** Input the kernel takes in one step: 8 words. Shorter tails stay in JavaScript. */
export const WORD_SUMS_BLOCK_BYTES = 32;

/** Where the kernel leaves the two sums, and where its input starts. */
const RESULT_AT = 0;
const INPUT_AT = 64;

// The opcodes used below (WebAssembly core specification, binary format).
const op = {
  block: 0x02,
  loop: 0x03,
  void: 0x40,
  brIf: 0x0d,
  end: 0x0b,
  localGet: 0x20,
  localSet: 0x21,
  i32Const: 0x41,
  i32Load: 0x28,
  i32Store: 0x36,
  i32Add: 0x6a,
  i32LtU: 0x49,
} as const;
const I32 = 0x7f;
/** Alignment hint 2^2 for 4-byte loads and stores. */
const ALIGN_4 = 0x02;

function leb128(value: number): number[] {
  const out: number[] = [];
  let rest = value;
  do {
    let byte = rest & 0x7f;
    rest >>>= 7;
    if (rest !== 0) byte |= 0x80;
    out.push(byte);
  } while (rest !== 0);
  return out;
}

/** Signed LEB128, the encoding of `i32.const` immediates (64 in unsigned form would read as -64). */
function signedLeb128(value: number): number[] {
  const out: number[] = [];
  let rest = value | 0;
  for (;;) {
    const byte = rest & 0x7f;
    rest >>= 7;
    const signBitClear = (byte & 0x40) === 0;
    if ((rest === 0 && signBitClear) || (rest === -1 && !signBitClear)) {
      out.push(byte);
      return out;
    }
    out.push(byte | 0x80);
  }
}

function section(id: number, contents: number[]): number[] {
  return [id, ...leb128(contents.length), ...contents];
}

function name(text: string): number[] {
  return [text.length, ...[...text].map((c) => c.charCodeAt(0))];
}

/**
 * `sums(from, to, s0, s1)`: for each pair of words (a, b) in memory
 * `[from, to)`, `s0 += a + s1; s1 += b + s0` (32-bit wrapping), then stores
 * s0 and s1 at `RESULT_AT`. `to - from` is a positive multiple of 32: the
 * loop body takes 8 words (unrolled: the sums are a serial chain, so fewer
 * branches is all there is to gain).
 */
function moduleBytes(): Uint8Array {
  const [FROM, TO, S0, S1] = [0, 1, 2, 3];
  // One instruction per line: opcode, then its immediates.
  const pair = (offset: number): number[][] => [
    [op.localGet, S0],
    [op.localGet, FROM],
    [op.i32Load, ALIGN_4, ...leb128(offset)],
    [op.i32Add],
    [op.localGet, S1],
    [op.i32Add],
    [op.localSet, S0],
    [op.localGet, S1],
    [op.localGet, FROM],
    [op.i32Load, ALIGN_4, ...leb128(offset + 4)],
    [op.i32Add],
    [op.localGet, S0],
    [op.i32Add],
    [op.localSet, S1],
  ];
  const code: number[][] = [
    [op.block, op.void],
    [op.loop, op.void],
    ...pair(0),
    ...pair(8),
    ...pair(16),
    ...pair(24),
    [op.localGet, FROM],
    [op.i32Const, ...signedLeb128(WORD_SUMS_BLOCK_BYTES)],
    [op.i32Add],
    [op.localSet, FROM],
    [op.localGet, FROM],
    [op.localGet, TO],
    [op.i32LtU],
    [op.brIf, 0], // back to the loop's start while from < to
    [op.end],
    [op.end],
    [op.i32Const, ...signedLeb128(RESULT_AT)],
    [op.localGet, S0],
    [op.i32Store, ALIGN_4, 0],
    [op.i32Const, ...signedLeb128(RESULT_AT)],
    [op.localGet, S1],
    [op.i32Store, ALIGN_4, 4],
    [op.end],
  ];
  const body = [0x00 /* no locals besides the parameters */, ...code.flat()];
  const memoryPages = Math.ceil((INPUT_AT + WORD_SUMS_CHUNK_BYTES) / 65536);
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // "\0asm", version 1
    ...section(1, [1, 0x60, 4, I32, I32, I32, I32, 0]), // type 0: (i32 ×4) → ()
    ...section(3, [1, 0]), // function 0 has type 0
    ...section(5, [1, 0x01, memoryPages, memoryPages]), // one memory, fixed size
    ...section(7, [2, ...name('sums'), 0x00, 0, ...name('memory'), 0x02, 0]), // exports
    ...section(10, [1, ...leb128(body.length), ...body]), // the code
  ]);
}

export interface WordSums {
  /**
   * Adds the words of `bytes` (little-endian, length a multiple of
   * {@link WORD_SUMS_BLOCK_BYTES}, any length) to `(s0, s1)`; the new sums
   * are then in `sums[0]` and `sums[1]`.
   */
  add(bytes: Uint8Array, s0: number, s1: number): void;
  readonly sums: Int32Array;
}

/** The part of the WebAssembly API used here (the project's types leave out the DOM's). */
interface WebAssemblyApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: KernelExports };
}

interface KernelExports {
  sums(from: number, to: number, s0: number, s1: number): void;
  memory: { buffer: ArrayBuffer };
}

function instantiate(api: WebAssemblyApi): WordSums | null {
  let exports: KernelExports;
  try {
    exports = new api.Instance(new api.Module(moduleBytes())).exports;
  } catch {
    return null;
  }
  const run = exports.sums;
  // The memory never grows, so these views stay attached.
  const buffer = exports.memory.buffer;
  const input = new Uint8Array(buffer, INPUT_AT, WORD_SUMS_CHUNK_BYTES);
  const sums = new Int32Array(buffer, RESULT_AT, 2);
  return {
    sums,
    add(bytes, s0, s1) {
      if (bytes.byteLength % WORD_SUMS_BLOCK_BYTES !== 0)
        throw new RangeError(
          `word sums take multiples of ${WORD_SUMS_BLOCK_BYTES} bytes, not ${bytes.byteLength}`,
        );
      sums[0] = s0;
      sums[1] = s1;
      for (let at = 0; at < bytes.byteLength; at += WORD_SUMS_CHUNK_BYTES) {
        const chunk = bytes.subarray(at, at + WORD_SUMS_CHUNK_BYTES);
        input.set(chunk);
        run(INPUT_AT, INPUT_AT + chunk.byteLength, sums[0]!, sums[1]!);
      }
    },
  };
}

/** The WebAssembly kernel, or `null` where WebAssembly cannot run. */
export const wasmWordSums: WordSums | null = (() => {
  const api = (globalThis as { WebAssembly?: WebAssemblyApi }).WebAssembly;
  return api === undefined ? null : instantiate(api);
})();
