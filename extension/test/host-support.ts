// What the unit tests that run a real Host share: the stand-in host program, a log that keeps
// its lines, and the Hosts to dispose after each test.
import * as path from 'node:path';
import type { Host, Log } from '../src/host';

// the tests run from extension/out-test; the fixture stays in test/fixtures
export const FAKE = path.resolve(__dirname, '..', 'test', 'fixtures', 'fake-host.js');

export class MemoryLog implements Log {
  lines: [string, string][] = [];
  trace(m: string): void { this.lines.push(['trace', m]); }
  debug(m: string): void { this.lines.push(['debug', m]); }
  info(m: string): void { this.lines.push(['info', m]); }
  warn(m: string): void { this.lines.push(['warn', m]); }
  error(m: string): void { this.lines.push(['error', m]); }
  appendLine(m: string): void { this.lines.push(['line', m]); }
  at(level: string): string[] { return this.lines.filter(l => l[0] === level).map(l => l[1]); }
}

// A request written to a process that has just died makes vscode-jsonrpc reject a promise no
// one can observe (its sendRequest rethrows inside a Promise executor); VS Code only logs it.
process.on('unhandledRejection', (e: NodeJS.ErrnoException) => {
  if (e?.code !== 'ERR_STREAM_DESTROYED' && e?.code !== 'EPIPE') throw e;
});

/** Hosts a test started; the test file's afterEach disposes them. */
export const hosts: Host[] = [];
