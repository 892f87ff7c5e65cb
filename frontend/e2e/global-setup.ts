// Global setup of the browser tests: test clips made with the ffmpeg program, a freshly built
// dashboard, and a real `condense serve` on free ports with a temporary data directory.
// What the tests need (addresses, paths, password) reaches them through `inject()`.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';

const FRONTEND = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const REPO = resolve(FRONTEND, '..');
export const ARTIFACTS = join(REPO, 'test-artifacts', 'e2e');

/** Two playable H.264 clips (8 s at 25 fps: 200 frames, 8 s of throttled encoding each) and one corrupt file. */
const CLIPS = [
  { name: 'alpha.mkv', seconds: 8 },
  { name: 'bravo.mkv', seconds: 8 },
];
export const BROKEN = 'broken.mkv';
const PASSWORD = 'e2e-admin-password';

declare module 'vitest' {
  export interface ProvidedContext {
    uiUrl: string;
    clipsDir: string;
    clipNames: string[];
    username: string;
    password: string;
    artifactsDir: string;
  }
}

function run(command: string, args: string[], cwd: string): void {
  const result = spawnSync(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  if (result.error) throw new Error(`${command} could not start: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
}

function makeClips(dir: string): void {
  for (const clip of CLIPS) {
    run(
      'ffmpeg',
      ['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=25', '-t', String(clip.seconds),
        '-c:v', 'libx264', '-preset', 'ultrafast', '-qp', '12', join(dir, clip.name)],
      dir,
    );
  }
  // Random bytes with a video file's name: validation fails on every attempt.
  writeFileSync(join(dir, BROKEN), randomBytes(256 * 1024));
}

function newestMtime(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((name) => newestMtime(join(path, name))));
}

/** Build dist/ when it is missing or older than the sources it is made of. */
function buildDashboard(): string {
  const dist = join(FRONTEND, 'dist');
  const index = join(dist, 'index.html');
  const sources = Math.max(...['src', 'index.html', 'public', 'vite.config.ts', 'package-lock.json']
    .map((name) => join(FRONTEND, name))
    .filter((path) => existsSync(path))
    .map(newestMtime));
  if (!existsSync(index) || statSync(index).mtimeMs < sources) run('npm', ['run', '--silent', 'build'], FRONTEND);
  return dist;
}

/** Settings of the developer's shell that would change what the server under test does. */
const CLEARED = ['ROLE', 'DATABASE_URL', 'MAIN_NODE_URL', 'JWT_SECRET', 'ADMIN_USERNAME', 'CLUSTER_TOKEN', 'NODE_NAME',
  'LICENSE_KEY', 'LICENSE_PUBLIC_KEY', 'LOG_LEVEL', 'TOKEN_TTL_HOURS', 'HTTP_WORKERS'];

function startServer(binary: string, env: NodeJS.ProcessEnv, logPath: string): Promise<{ child: ChildProcess; uiUrl: string }> {
  const child = spawn(binary, ['serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(logPath);
  let output = '';
  let settled = false;
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => fail(new Error('the server did not log "listening" within 60 s')), 60_000);
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${error.message}\n--- server output ---\n${output}`));
    };
    const onData = (chunk: Buffer) => {
      log.write(chunk);
      if (settled) return;
      output += chunk.toString('utf8');
      // e.g. `INFO condense::serve: listening api_addr=127.0.0.1:36467 ui_addr=127.0.0.1:39097 node=vm`
      const line = output.split('\n').find((l) => l.includes('listening') && l.includes('ui_addr='));
      const address = line?.replace(/\x1b\[[0-9;]*m/g, '').match(/ui_addr=(\S+)/)?.[1];
      if (address) {
        settled = true;
        clearTimeout(timer);
        resolvePromise({ child, uiUrl: `http://${address}` });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('error', (error) => fail(error));
    child.on('exit', (code, signal) => fail(new Error(`the server exited (${signal ?? code}) before listening`)));
  });
}

/** SIGTERM, as a service manager would; SIGKILL after 20 s, and say so. */
function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    console.warn(`condense serve had already exited (${child.signalCode ?? child.exitCode}); see test-artifacts/e2e/server.log`);
    return Promise.resolve();
  }
  return new Promise((done) => {
    const kill = setTimeout(() => {
      console.warn('condense serve did not stop within 20 s of SIGTERM; killed');
      child.kill('SIGKILL');
    }, 20_000);
    child.once('exit', () => {
      clearTimeout(kill);
      done();
    });
    child.kill('SIGTERM');
  });
}

function serverEnv(dataDir: string, dist: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of CLEARED) delete env[name];
  return Object.assign(env, {
    DATA_DIR: dataDir,
    BIND: '127.0.0.1',
    PORT: '0',
    UI_PORT: '0',
    FRONTEND_DIR: dist,
    ADMIN_PASSWORD: PASSWORD,
    SEGMENT_SECONDS: '1',
    // Slows every encoded frame, so a person (and the tests) can watch a job and pause it.
    CONDENSE_THROTTLE_MS_PER_FRAME: '40',
    WATCH_SETTLE_SECONDS: '1',
    NO_COLOR: '1',
  });
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // target/debug/condense, as `cargo build --bin condense --bin condense-media` leaves it (in CARGO_TARGET_DIR when set).
  const binary = resolve(REPO, process.env.CONDENSE_BIN ?? join(process.env.CARGO_TARGET_DIR ?? 'target', 'debug', 'condense'));
  if (!existsSync(binary)) {
    throw new Error(`no condense binary at ${binary}: run \`cargo build --bin condense --bin condense-media\` first (or set CONDENSE_BIN)`);
  }
  // Screenshots of an earlier run would pass for this one's.
  rmSync(ARTIFACTS, { recursive: true, force: true });
  mkdirSync(ARTIFACTS, { recursive: true });
  const root = mkdtempSync(join(tmpdir(), 'condense-e2e-'));
  const clipsDir = join(root, 'clips');
  const dataDir = join(root, 'data');
  let started: { child: ChildProcess; uiUrl: string };
  try {
    mkdirSync(clipsDir);
    mkdirSync(dataDir);
    makeClips(clipsDir);
    started = await startServer(binary, serverEnv(dataDir, buildDashboard()), join(ARTIFACTS, 'server.log'));
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    throw error;
  }
  const { child, uiUrl } = started;

  // Should the runner die without its teardown (Ctrl-C twice), the server goes with it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  project.provide('uiUrl', uiUrl);
  project.provide('clipsDir', clipsDir);
  project.provide('clipNames', [...CLIPS.map((clip) => clip.name), BROKEN]);
  project.provide('username', 'admin');
  project.provide('password', PASSWORD);
  project.provide('artifactsDir', ARTIFACTS);

  return async () => {
    await stopServer(child);
    process.off('exit', killOnExit);
    if (process.env.E2E_KEEP !== '1') rmSync(root, { recursive: true, force: true });
  };
}
