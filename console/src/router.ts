/**
 * Client-side routes under the /ui base intake serves the console from (every unknown /ui/*
 * path answers index.html, so a deep link or a reload lands on the right page).
 */
import { useEffect, useState } from 'react';

export const BASE = '/ui';

export type Route =
  | { readonly page: 'cases' }
  | { readonly page: 'case'; readonly caseId: string }
  | { readonly page: 'gates' }
  | { readonly page: 'gate'; readonly gateId: string }
  | { readonly page: 'exceptions' }
  | { readonly page: 'fleet' }
  | { readonly page: 'signin' }
  | { readonly page: 'unknown'; readonly path: string };

/** Pure: the route of a pathname (with or without the /ui base). */
export function routeOf(pathname: string): Route {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const parts = rest.split('/').filter(Boolean).map(decodeURIComponent);
  const [first, second] = parts;
  if (parts.length === 0 || (first === 'cases' && parts.length === 1)) return { page: 'cases' };
  if (first === 'cases' && parts.length === 2) return { page: 'case', caseId: second! };
  if (first === 'gates' && parts.length === 1) return { page: 'gates' };
  if (first === 'gates' && parts.length === 2) return { page: 'gate', gateId: second! };
  if (first === 'exceptions' && parts.length === 1) return { page: 'exceptions' };
  if (first === 'fleet' && parts.length === 1) return { page: 'fleet' };
  if (first === 'signin' && parts.length === 1) return { page: 'signin' };
  return { page: 'unknown', path: rest };
}

const CHANGE = 'everdict:navigate';

export function navigate(path: string, opts: { replace?: boolean } = {}): void {
  const full = path.startsWith(BASE) ? path : `${BASE}${path}`;
  if (opts.replace) history.replaceState(null, '', full);
  else history.pushState(null, '', full);
  window.dispatchEvent(new Event(CHANGE));
}

/** The current location (pathname + search), re-rendered on navigation and history moves. */
export function useLocation(): { pathname: string; search: string } {
  const read = () => ({ pathname: window.location.pathname, search: window.location.search });
  const [loc, setLoc] = useState(read);
  useEffect(() => {
    const update = () => setLoc(read());
    window.addEventListener('popstate', update);
    window.addEventListener(CHANGE, update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener(CHANGE, update);
    };
  }, []);
  return loc;
}
