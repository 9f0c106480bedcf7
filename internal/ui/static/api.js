// The /v1 API as the page calls it: same origin, with the session cookie
// (HttpOnly: the page never sees it, nor the token it stands for).
// Browsers add Sec-Fetch-Site to every request, which the server checks on
// changes.

export class APIError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

export async function api(path, { method = "GET", body, signal } = {}) {
  const opts = { method, credentials: "same-origin", signal, headers: {} };
  if (body !== undefined) {
    opts.body = JSON.stringify(body);
    opts.headers["Content-Type"] = "application/json";
  }
  const resp = await fetch(path, opts);
  if (!resp.ok) {
    let msg = resp.statusText;
    try { msg = (await resp.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new APIError(resp.status, msg);
  }
  if (resp.status === 204) return null;
  return resp.json();
}

export const enc = encodeURIComponent;
