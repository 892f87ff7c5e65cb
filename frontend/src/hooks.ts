// Small Preact hooks: load-and-reload data, live messages, connection state.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage } from './api';
import { formErrors, NO_ERRORS, type FieldRule, type FormErrors } from './forms';
import { currentRole, live, onRoleChange, type Role } from './session';
import type { LiveMessage } from './types';
import type { ConnectionState } from './ws';

export interface Resource<T> {
  data: T | null;
  error: string | null;
  loading: boolean;
  reload: () => Promise<void>;
  setData: (update: T | ((current: T | null) => T | null)) => void;
}

export interface ResourceOptions {
  /** Re-fetch every pollMs while the page is visible. */
  pollMs?: number;
}

/** Fetch on mount and whenever deps change; re-fetch after a live reconnect (re-sync). */
export function useResource<T>(load: () => Promise<T>, deps: unknown[], options: ResourceOptions = {}): Resource<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const latestLoad = useRef(load);
  latestLoad.current = load;
  const sequence = useRef(0);

  const reload = useCallback(async () => {
    const id = ++sequence.current;
    setLoading(true);
    try {
      const value = await latestLoad.current();
      if (id === sequence.current) {
        setData(value);
        setError(null);
      }
    } catch (err) {
      if (id === sequence.current) setError(errorMessage(err));
    } finally {
      if (id === sequence.current) setLoading(false);
    }
  }, []);

  useEffect(() => {
    void reload();
  }, deps);

  useEffect(() => live.onResync(() => void reload()), [reload]);

  useEffect(() => {
    if (!options.pollMs) return;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') void reload();
    }, options.pollMs);
    return () => clearInterval(timer);
  }, [options.pollMs, reload]);

  return { data, error, loading, reload, setData: setData as Resource<T>['setData'] };
}

/** Call listener for every live job message while the component is mounted. */
export function useLiveMessages(listener: (message: LiveMessage) => void): void {
  const latest = useRef(listener);
  latest.current = listener;
  useEffect(() => live.onMessage((message) => latest.current(message)), []);
}

export function useConnectionState(): ConnectionState {
  const [state, setState] = useState(live.state);
  useEffect(() => {
    setState(live.state);
    return live.onState(setState);
  }, []);
  return state;
}

/**
 * Run `action`, tracking busy state and the error message to show. `setError` puts another
 * failure of the page (its own reads) in the same message, so that the latest one shows.
 */
export function useAction(): {
  busy: boolean;
  error: string | null;
  run: <T>(action: () => Promise<T>) => Promise<T | undefined>;
  clear: () => void;
  setError: (message: string | null) => void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async <T,>(action: () => Promise<T>) => {
    setBusy(true);
    setError(null);
    try {
      return await action();
    } catch (err) {
      setError(errorMessage(err));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(null), setError };
}

/** The signed-in user's role, following changes; null while unknown. */
export function useRole(): Role | null {
  const [role, setRole] = useState<Role | null>(currentRole());
  useEffect(() => onRoleChange(setRole), []);
  return role;
}

/**
 * Run a form's save, tracking busy state; a validation answer lands beside the field its
 * message names (`rules`), anything else above the form.
 */
export function useSave(rules: readonly FieldRule[]): {
  busy: boolean;
  errors: FormErrors;
  save: <T>(action: () => Promise<T>) => Promise<T | undefined>;
  clear: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const latestRules = useRef(rules);
  latestRules.current = rules;
  const save = useCallback(async <T,>(action: () => Promise<T>) => {
    setBusy(true);
    setErrors(NO_ERRORS);
    try {
      return await action();
    } catch (err) {
      setErrors(formErrors(err, latestRules.current));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, errors, save, clear: () => setErrors(NO_ERRORS) };
}
