// Bundles the extension (vscode-jsonrpc included) into out/extension.js; with --tests, bundles
// the unit tests into out-test/ with a fake 'vscode' module (test/fake-vscode.ts).
import * as esbuild from 'esbuild';
import { readdirSync } from 'node:fs';

// jsonc-parser's "main" is a UMD build whose requires esbuild cannot follow: take its ES modules.
const common = { bundle: true, platform: 'node', target: 'node20', format: 'cjs', sourcemap: true, logLevel: 'warning', mainFields: ['module', 'main'] };

if (process.argv.includes('--tests')) {
  const entryPoints = readdirSync('test').filter(f => f.endsWith('.test.ts')).map(f => `test/${f}`);
  await esbuild.build({ ...common, entryPoints, outdir: 'out-test', alias: { vscode: './test/fake-vscode.ts' } });
} else {
  await esbuild.build({ ...common, entryPoints: ['src/extension.ts'], outfile: 'out/extension.js', external: ['vscode'] });
}
