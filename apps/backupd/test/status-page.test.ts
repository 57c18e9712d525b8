/**
 * The status page renders in a real browser (Debian's `chromium`, headless,
 * driven by playwright-core): a healthy replica with the database and its
 * lag, and an unhealthy one with its reason and the error behind it. The
 * screenshot is kept in test-artifacts/status-page.png (git-ignored).
 * Without /usr/bin/chromium the test is skipped with one line naming
 * scripts/install-browser.sh; under CI=true that is a failure instead.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Page } from 'playwright-core';
import { describe, expect, test } from 'vitest';
import {
  baseEnv,
  createWalDatabase,
  getText,
  listeningUrl,
  startBackupd,
  suiteWorkspace,
  waitFor,
} from './helpers/cli.ts';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const ARTIFACTS = fileURLToPath(new URL('../../../test-artifacts/', import.meta.url));
const haveChromium = existsSync(CHROMIUM);
const inCi = process.env.CI === 'true';
if (!haveChromium && !inCi)
  console.warn(
    `backupd status page: skipped, ${CHROMIUM} is missing (run scripts/install-browser.sh)`,
  );

/** Runs `use` with a page of a fresh headless Chromium profile, removed afterwards. */
async function withPage(use: (page: Page) => Promise<void>): Promise<void> {
  const profile = mkdtempSync(join(tmpdir(), 'backupd-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 480 },
  });
  try {
    await use(context.pages()[0] ?? (await context.newPage()));
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

/** Saves the page into test-artifacts/ and checks that a real image came out. */
async function saveScreenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const screenshot = join(ARTIFACTS, name);
  await page.screenshot({ path: screenshot, fullPage: true });
  expect(statSync(screenshot).size).toBeGreaterThan(5_000);
}

describe('the status page in headless Chromium', () => {
  const { directory, running } = suiteWorkspace('page');

  test.skipIf(!haveChromium && !inCi)(
    'shows the database path and its lag, and is saved as a screenshot',
    async () => {
      if (!haveChromium)
        throw new Error(
          `${CHROMIUM} is missing under CI=true: run scripts/install-browser.sh first`,
        );
      const databasePath = join(directory, 'shop.db');
      await createWalDatabase(databasePath);
      // The embedded default (a directory beside the database): no cloud, no server.
      const replicate = startBackupd(['replicate', databasePath, '--listen', '127.0.0.1:0'], {
        env: baseEnv({ BACKUPD_INTERVAL: '200ms', BACKUPD_LEASE_TTL: '3s' }),
      });
      running.push(replicate);
      const base = await listeningUrl(replicate);
      await waitFor(
        'backupd to be healthy',
        async () => (await getText(`${base}/healthz`)).status === 200,
        {
          describe: () => replicate.describe(),
        },
      );

      await withPage(async (page) => {
        const response = await page.goto(`${base}/`, { waitUntil: 'load' });
        expect(response?.status()).toBe(200);
        expect(await page.title()).toBe('backupd — healthy');
        const row = page.locator('tbody tr');
        await expect.poll(() => row.count()).toBe(1);
        const cells = await row.locator('td').allInnerTexts();
        expect(cells[0]).toBe(databasePath);
        expect(cells[1]).toBe(`file://${databasePath}-backups`);
        expect(cells[2]).toBe('healthy');
        // The lag column, as rendered: whole seconds.
        // biome-ignore lint/performance/useDomNodeTextContent: the text as the browser renders it is what this test is about
        expect(await row.locator('td.lag').innerText()).toMatch(/^\d+s$/);
        const headers = await page.locator('thead th').allInnerTexts();
        expect(headers.indexOf('Lag')).toBe(3);
        await saveScreenshot(page, 'status-page.png');
      });
      expect(await replicate.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    },
  );

  test.skipIf(!haveChromium && !inCi)(
    'shows an unhealthy replica with its reason and the error behind it',
    async () => {
      if (!haveChromium)
        throw new Error(
          `${CHROMIUM} is missing under CI=true: run scripts/install-browser.sh first`,
        );
      const databasePath = join(directory, 'unreachable.db');
      await createWalDatabase(databasePath);
      // A bucket nobody answers for: every lease attempt fails, connection refused.
      const url =
        's3://nowhere/app?endpoint=http%3A%2F%2F127.0.0.1%3A9&forcePathStyle=true&region=us-east-1';
      const replicate = startBackupd(['replicate', databasePath, url, '--listen', '127.0.0.1:0'], {
        env: baseEnv({
          BACKUPD_INTERVAL: '200ms',
          AWS_ACCESS_KEY_ID: 'status-page-test',
          AWS_SECRET_ACCESS_KEY: 'status-page-test-secret',
        }),
      });
      running.push(replicate);
      const base = await listeningUrl(replicate);
      await waitFor(
        'the replica to turn unhealthy after failed attempts',
        async () => (await getText(`${base}/healthz`)).body.includes('consecutive failed'),
        { describe: () => replicate.describe(), timeoutMs: 90_000 },
      );

      await withPage(async (page) => {
        const response = await page.goto(`${base}/`, { waitUntil: 'load' });
        expect(response?.status()).toBe(200);
        expect(await page.title()).toBe('backupd — attention needed');
        const cells = await page.locator('tbody tr').first().locator('td').allInnerTexts();
        expect(cells[0]).toBe(databasePath);
        expect(cells[2]).toMatch(/^unhealthy\n/);
        expect(cells[2]).toMatch(/consecutive failed backup steps \(last: .*ECONNREFUSED/);
        expect(cells[6]).toBe('none yet');
        await saveScreenshot(page, 'status-page-unhealthy.png');
      });
      await replicate.stop('SIGTERM');
    },
    120_000,
  );
});
