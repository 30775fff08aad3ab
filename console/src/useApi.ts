/** A GET of the API as page state: the reply (with its status), loading, and a reload. */
import { useCallback, useEffect, useRef, useState } from 'react';
import { api } from './api.js';
import type { Reply } from './api.js';

export interface Loaded<T> {
  /** The newest answer, success or refusal. */
  readonly reply: Reply<T> | undefined;
  /** The newest successful body: a failed refresh (a network blip) never blanks what was shown. */
  readonly data: T | undefined;
  readonly loading: boolean;
  reload(): void;
}

export function useApi<T>(path: string | null): Loaded<T> {
  const [reply, setReply] = useState<Reply<T> | undefined>(undefined);
  const [data, setData] = useState<T | undefined>(undefined);
  const [loading, setLoading] = useState(path !== null);
  const [tick, setTick] = useState(0);
  const latest = useRef(0);
  useEffect(() => {
    if (path === null) return;
    const mine = ++latest.current;
    setLoading(true);
    void api<T>('GET', path).then((r) => {
      // Only the newest request answers: a slow earlier reply never overwrites a fresher one.
      if (mine !== latest.current) return;
      setReply(r);
      if (r.ok) setData(r.body);
      setLoading(false);
    });
  }, [path, tick]);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  return { reply, data, loading, reload };
}
