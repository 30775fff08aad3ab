// Container healthcheck (infra/Dockerfile HEALTHCHECK, docker-compose.yml): exit 0 iff this
// container's own /livez answers 2xx within the timeout. Liveness only, never dependencies:
// a broker outage must not mark every worker unhealthy (service-kit http.ts). Plain node, so
// slim images need no curl.
const port = process.env.PORT || '8080';
const timeoutMs = Number(process.env.HEALTHCHECK_TIMEOUT_MS || 3000);

try {
  const res = await fetch(`http://127.0.0.1:${port}/livez`, { signal: AbortSignal.timeout(timeoutMs) });
  process.exitCode = res.ok ? 0 : 1;
} catch {
  process.exitCode = 1;
}
