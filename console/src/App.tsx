/**
 * The console shell: who is signed in (GET /v1/session), the left navigation, and the page of
 * the current route. Navigation shows every page to everyone: what a principal may see is the
 * server's answer on each page (403/404 shown as such), never a hidden link.
 */
import { useCallback, useEffect, useState } from 'react';
import { api, onUnauthorised } from './api.js';
import type { SessionInfo } from './api.js';
import { ErrorBoundary } from './components/ErrorBoundary.js';
import { Link, NotFound } from './components/ui.js';
import { CasePage } from './pages/CasePage.js';
import { CasesPage } from './pages/CasesPage.js';
import { ExceptionsPage } from './pages/ExceptionsPage.js';
import { FleetPage } from './pages/FleetPage.js';
import { GatePage } from './pages/GatePage.js';
import { GatesPage } from './pages/GatesPage.js';
import { SignInPage } from './pages/SignInPage.js';
import { navigate, routeOf, useLocation } from './router.js';
import type { Route } from './router.js';

type SessionState = { readonly kind: 'checking' } | { readonly kind: 'signed_out' } | { readonly kind: 'signed_in'; readonly session: SessionInfo };

export function App() {
  const loc = useLocation();
  const route = routeOf(loc.pathname);
  const [session, setSession] = useState<SessionState>({ kind: 'checking' });

  const refresh = useCallback(async () => {
    const r = await api<SessionInfo>('GET', '/v1/session');
    setSession(r.ok ? { kind: 'signed_in', session: r.body } : { kind: 'signed_out' });
  }, []);
  useEffect(() => {
    void refresh();
  }, [refresh]);
  useEffect(() => onUnauthorised(() => setSession({ kind: 'signed_out' })), []);

  if (session.kind === 'checking') return <div className="loading">Loading…</div>;
  if (session.kind === 'signed_out' || route.page === 'signin') {
    const back = route.page === 'signin' || route.page === 'unknown' ? '/cases' : `${loc.pathname}${loc.search}`;
    return (
      <SignInPage
        onSignedIn={async () => {
          await refresh();
          navigate(back, { replace: true });
        }}
      />
    );
  }
  const signOut = async () => {
    await api('DELETE', '/v1/session');
    setSession({ kind: 'signed_out' });
    navigate('/signin', { replace: true });
  };
  return (
    <div className="shell">
      <nav className="nav" aria-label="console">
        <div className="brand">Everdict</div>
        <NavLink to="/cases" active={route.page === 'cases' || route.page === 'case'}>Cases</NavLink>
        <NavLink to="/gates" active={route.page === 'gates' || route.page === 'gate'}>Gates</NavLink>
        <NavLink to="/exceptions" active={route.page === 'exceptions'}>Exceptions</NavLink>
        <NavLink to="/fleet" active={route.page === 'fleet'}>Fleet</NavLink>
        <div className="who" data-testid="principal">
          <div>{session.session.principal}</div>
          <div className="muted small">{session.session.roles.join(', ') || 'no roles'}</div>
          <div className="muted small">{session.session.customers === null ? 'every customer' : session.session.customers.join(', ')}</div>
          <button className="link-button" onClick={() => void signOut()} data-testid="sign-out">
            Sign out
          </button>
        </div>
      </nav>
      <main className="main">
        <ErrorBoundary key={loc.pathname}>
          <Page route={route} />
        </ErrorBoundary>
      </main>
    </div>
  );
}

function NavLink(props: { to: string; active: boolean; children: string }) {
  return (
    <Link to={props.to} className={props.active ? 'nav-link active' : 'nav-link'}>
      {props.children}
    </Link>
  );
}

function Page(props: { route: Route }) {
  const r = props.route;
  switch (r.page) {
    case 'cases':
      return <CasesPage />;
    case 'case':
      return <CasePage key={r.caseId} caseId={r.caseId} />;
    case 'gates':
      return <GatesPage />;
    case 'gate':
      return <GatePage key={r.gateId} gateId={r.gateId} />;
    case 'exceptions':
      return <ExceptionsPage />;
    case 'fleet':
      return <FleetPage />;
    case 'signin':
    case 'unknown':
      return <NotFound what="page" />;
  }
}
