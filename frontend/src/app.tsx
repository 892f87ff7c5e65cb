import { useEffect, useState } from 'preact/hooks';
import { ConnectionIndicator } from './components';
import { Insights } from './pages/Insights';
import { JobDetail } from './pages/JobDetail';
import { Jobs } from './pages/Jobs';
import { Libraries } from './pages/Libraries';
import { Login } from './pages/Login';
import { Nodes } from './pages/Nodes';
import { Overview } from './pages/Overview';
import { Settings } from './pages/Settings';
import { routeHref, useRoute, type Route } from './router';
import { api, live, loadRole, logout, onAuthChange } from './session';

const NAV = [
  { path: '', label: 'Overview' },
  { path: 'jobs', label: 'Jobs' },
  { path: 'libraries', label: 'Libraries' },
  { path: 'nodes', label: 'Nodes' },
  { path: 'insights', label: 'Insights' },
  { path: 'settings', label: 'Settings' },
];

/** Check the token's expiry this often; API calls also refresh it on their way out. */
const REFRESH_CHECK_MS = 60_000;

export function App() {
  const [loggedIn, setLoggedIn] = useState(api.isLoggedIn());
  const [expired, setExpired] = useState(false);
  const route = useRoute();

  useEffect(
    () =>
      onAuthChange((now, wasExpired) => {
        setExpired(wasExpired);
        setLoggedIn(now);
      }),
    [],
  );

  useEffect(() => {
    if (!loggedIn) return;
    void loadRole();
    live.start();
    const timer = setInterval(() => void api.refreshIfNeeded().catch(() => {}), REFRESH_CHECK_MS);
    return () => {
      clearInterval(timer);
      live.stop();
    };
  }, [loggedIn]);

  if (!loggedIn) return <Login expired={expired} />;
  return <Shell route={route} />;
}

function Shell({ route }: { route: Route }) {
  const [menuOpen, setMenuOpen] = useState(false);
  const section = route.segments[0] ?? '';
  useEffect(() => setMenuOpen(false), [route]);

  return (
    <div class="shell">
      <a class="skip-link" href="#main" onClick={(e) => {
        e.preventDefault();
        document.getElementById('main')?.focus();
      }}>
        Skip to content
      </a>
      <header class="topbar">
        <a class="brand" href={routeHref('/')} aria-label="condense overview">
          <span class="brand-mark" aria-hidden="true" />
          condense
        </a>
        <ConnectionIndicator />
        <button
          type="button"
          class="icon-button menu-button"
          aria-label={menuOpen ? 'Close menu' : 'Open menu'}
          aria-expanded={menuOpen}
          aria-controls="main-nav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          <span class="menu-icon" aria-hidden="true" />
        </button>
        <nav id="main-nav" class={`nav${menuOpen ? ' nav-open' : ''}`} aria-label="Main">
          {NAV.map((item) => (
            <a
              key={item.path}
              href={routeHref(`/${item.path}`)}
              aria-current={section === item.path ? 'page' : undefined}
              // The route effect closes the menu, but following the link of the page shown changes no route.
              onClick={() => setMenuOpen(false)}
            >
              {item.label}
            </a>
          ))}
          <button type="button" class="nav-logout" onClick={logout}>
            Sign out
          </button>
        </nav>
      </header>
      <main id="main" tabIndex={-1}>
        <Page route={route} />
      </main>
    </div>
  );
}

function Page({ route }: { route: Route }) {
  const [section, id] = route.segments;
  switch (section ?? '') {
    case '':
    case 'login':
      return <Overview />;
    case 'jobs': {
      const jobId = Number(id);
      if (id !== undefined) return Number.isInteger(jobId) && jobId > 0 ? <JobDetail key={jobId} id={jobId} /> : <NotFound />;
      return <Jobs route={route} />;
    }
    case 'libraries':
      return <Libraries />;
    case 'nodes':
      return <Nodes />;
    case 'insights':
      return <Insights />;
    case 'settings':
      return <Settings />;
    default:
      return <NotFound />;
  }
}

function NotFound() {
  return (
    <div class="page">
      <h1>Not found</h1>
      <p>
        This page does not exist. <a href={routeHref('/')}>Back to the overview</a>.
      </p>
    </div>
  );
}
