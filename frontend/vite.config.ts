import { defineConfig } from 'vitest/config';

// The Rust server serves dist/ on the UI port and answers /api/* and /ws on the same origin.
// During `npm run dev`, forward those to a locally running `condense serve` (API on :3100).
const apiTarget = process.env.CONDENSE_API ?? 'http://127.0.0.1:3100';

export default defineConfig({
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false },
  server: {
    proxy: {
      '/api': { target: apiTarget, changeOrigin: true },
      '/ws': { target: apiTarget, ws: true, changeOrigin: true },
    },
  },
  test: {
    include: ['tests/**/*.test.{ts,tsx}'],
    environment: 'node',
  },
});
