import { MemoryStore, PrefixedStore } from '@x/store';

const tenant = new PrefixedStore(new MemoryStore(), 'tenants/acme');
await tenant.put('wal/0001', new Uint8Array([1, 2, 3]));
const { commonPrefixes } = await tenant.list('', { delimiter: '/' });
console.log(commonPrefixes); // [ 'wal/' ]
