#!/usr/bin/env node
// The backupd command. It runs from the TypeScript sources (Node >= 22.18
// strips types natively), so a repository checkout needs no build step; the
// `@x/source` export condition makes the workspace packages resolve to their
// sources as well, in this same process (no wrapper process: signals and
// exit codes are the command's own).
import { registerHooks } from 'node:module';

registerHooks({
  resolve(specifier, context, nextResolve) {
    const conditions = context.conditions.includes('@x/source')
      ? context.conditions
      : ['@x/source', ...context.conditions];
    return nextResolve(specifier, { ...context, conditions });
  },
});

const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
