// Browser tests against a real server: `npm run e2e` (see README.md). Kept apart from the unit
// tests (vite.config.ts only includes tests/), which must stay fast and need no server.
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** The files build on each other's data (library, finished jobs): run them in name order. */
class ByName extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return [...files].sort((a, b) => a.moduleId.localeCompare(b.moduleId));
  }
}

export default defineConfig({
  test: {
    include: ['e2e/**/*.test.ts'],
    environment: 'node',
    globalSetup: ['e2e/global-setup.ts'],
    // One browser and one server: one file at a time, in order.
    fileParallelism: false,
    maxWorkers: 1,
    sequence: { sequencer: ByName },
    testTimeout: 180_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    // A failed run says why; a retry would hide flakiness.
    retry: 0,
  },
});
