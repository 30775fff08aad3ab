/**
 * Sign-in: the principal's bearer token is exchanged once (POST /v1/session) for an HttpOnly
 * session cookie; the token is never stored by the console.
 */
import { useState } from 'react';
import type { FormEvent } from 'react';
import { api } from '../api.js';
import type { ApiError } from '../api.js';
import { ErrorBox } from '../components/ui.js';

export function SignInPage(props: { onSignedIn: () => Promise<void> }) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<{ status: number; error: ApiError } | undefined>();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setFailure(undefined);
    const r = await api('POST', '/v1/session', { token: token.trim() });
    setBusy(false);
    if (!r.ok) return setFailure({ status: r.status, error: r.body });
    setToken('');
    await props.onSignedIn();
  };

  return (
    <div className="signin">
      <form className="card signin-card" onSubmit={(e) => void submit(e)} data-testid="signin-form">
        <h1>Everdict console</h1>
        <p className="muted">Sign in with your API token. It is exchanged for a session cookie and not kept by this page.</p>
        <label>
          Token
          <input type="password" autoComplete="off" value={token} onChange={(e) => setToken(e.target.value)} name="token" data-testid="token" required />
        </label>
        <button type="submit" disabled={busy || token.trim() === ''} data-testid="sign-in">
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {failure ? <ErrorBox status={failure.status} error={failure.error} /> : null}
      </form>
    </div>
  );
}
