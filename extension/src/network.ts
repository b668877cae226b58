// VS Code's network settings for the host's HTTP client: `http.proxy`, `http.proxyStrictSSL`,
// `http.noProxy` and `http.systemCertificates`, sent as `network` in `initialize`/`configure`
// (docs/protocol.md). VS Code reads them from the user's settings only (application scope), so
// a workspace cannot point the host's requests, and the keys in them, at a proxy.
import * as vscode from 'vscode';

/** The `network` parameter of `initialize` and `configure`. */
export interface NetworkSettings {
  /** The proxy URL for every upstream request, or null: none (the environment's proxy variables may still apply). */
  proxy: string | null;
  /** Whether the proxy's certificate is checked. */
  proxyStrictSSL: boolean;
  /** Hosts reached without the proxy. */
  noProxy: string[];
  /** Whether the operating system's certificate store is trusted besides the bundled one. */
  systemCertificates: boolean;
}

/** The settings a change of which sends `configure` again. */
export const NETWORK_SETTINGS = ['http.proxy', 'http.proxyStrictSSL', 'http.noProxy', 'http.systemCertificates'] as const;

/** The effective network settings (VS Code's defaults where the user set nothing or something of the wrong type). */
export function readNetwork(): NetworkSettings {
  const http = vscode.workspace.getConfiguration('http');
  const proxy = http.get<unknown>('proxy');
  const strict = http.get<unknown>('proxyStrictSSL');
  const noProxy = http.get<unknown>('noProxy');
  const system = http.get<unknown>('systemCertificates');
  return {
    proxy: typeof proxy === 'string' && proxy.trim() ? proxy.trim() : null,
    proxyStrictSSL: typeof strict === 'boolean' ? strict : true,
    noProxy: Array.isArray(noProxy) ? noProxy.filter((h): h is string => typeof h === 'string' && h.trim() !== '').map(h => h.trim()) : [],
    systemCertificates: typeof system === 'boolean' ? system : true,
  };
}

/** Whether a configuration change touches the network settings. */
export function affectsNetwork(e: { affectsConfiguration(section: string): boolean }): boolean {
  return NETWORK_SETTINGS.some(s => e.affectsConfiguration(s));
}

/** Calls `onChange` when a network setting changes (the host then gets `configure` again). */
export function watchNetwork(onChange: () => void): vscode.Disposable {
  return vscode.workspace.onDidChangeConfiguration(e => {
    if (affectsNetwork(e)) onChange();
  });
}
