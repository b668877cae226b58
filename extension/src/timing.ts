// A timing log of the hops one request takes (the extension's half of lmbridge/timing.py).
import * as fs from 'fs';

/**
 * Off unless the LMBRIDGE_TIMING environment variable names a file (benchmarks/load.py --hops
 * sets it for the VS Code it starts). Then each call appends one JSON line,
 * `{"t": ms, "pid", "at", ...fields}`, with `t` on the system's monotonic clock, the clock
 * Python's time.monotonic reads on Linux, so the host's lines and these line up. No content:
 * names, ids and counts only. A log that cannot be written is turned off.
 */
let file: string | undefined = process.env.LMBRIDGE_TIMING || undefined;
let fd: number | undefined;

export function mark(at: string, fields: Record<string, string | number> = {}): void {
  if (file === undefined) return;
  try {
    fd ??= fs.openSync(file, 'a');
    fs.writeSync(fd, JSON.stringify({ t: Number(process.hrtime.bigint()) / 1e6, pid: process.pid, at, ...fields }) + '\n');
  } catch {
    file = undefined;
  }
}
