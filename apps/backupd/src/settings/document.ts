/** Plain helpers for a YAML document's mappings. */

export function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Sets a dotted key (`checkpoint.passivePages`) in a document, making the mappings on the way. */
export function setKey(document: Record<string, unknown>, key: string, value: unknown): void {
  const [head, ...rest] = key.split('.');
  if (head === undefined) return;
  if (rest.length === 0) {
    document[head] = value;
    return;
  }
  const inner = document[head];
  const mapping: Record<string, unknown> = isMapping(inner) ? inner : {};
  document[head] = mapping;
  setKey(mapping, rest.join('.'), value);
}
