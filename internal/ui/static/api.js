// The /v1 API as the page calls it: same origin, with the session cookie
// (HttpOnly: the page never sees it, nor the token it stands for).
// Browsers add Sec-Fetch-Site to every request, which the server checks on
// changes.

// problems are a 422's, each {field, pos ("job:12:5"), message}.
export class APIError extends Error {
  constructor(status, msg, problems) { super(msg); this.status = status; this.problems = problems || []; }
}

export async function api(path, { method = "GET", body, signal } = {}) {
  const opts = { method, credentials: "same-origin", signal, headers: {} };
  if (body !== undefined) {
    opts.body = JSON.stringify(body);
    opts.headers["Content-Type"] = "application/json";
  }
  const resp = await fetch(path, opts);
  if (!resp.ok) {
    let msg = resp.statusText, problems;
    try { const b = await resp.json(); msg = b.error || msg; problems = b.problems; } catch (e) { /* not JSON */ }
    throw new APIError(resp.status, msg, problems);
  }
  if (resp.status === 204) return null;
  return resp.json();
}

export const enc = encodeURIComponent;
