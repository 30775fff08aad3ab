import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (for a child process told to listen on it). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', resolve);
  });
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}
