// The token: taken from the `#token=` fragment of the sign-in URL that `vancetope serve`
// prints (a fragment never reaches the server, so never a log), or pasted into the
// sign-in form. Kept in sessionStorage: it survives a reload of this tab and goes with the
// tab; a new tab signs in again from the URL. Nothing else is stored.

const KEY = "vancetope.token";

/** Read `#token=…` from the address bar and remove it (history.replaceState), so it is
 * neither bookmarked nor shown over the user's shoulder. */
export function takeTokenFromFragment(): string | null {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const token = params.get("token");
  if (token === null) return null;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  return token.trim() || null;
}

export function storedToken(): string | null {
  return sessionStorage.getItem(KEY);
}

export function storeToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(KEY);
}
