#!/usr/bin/env python3
"""A hostile upstream (issue 53), for tests: the registry stand-in
(tests/upstream_standin.py, whose options and /_stats, /_control it keeps)
with the lies, stalls and redirections of the issue's attacks.

usage: hostile_upstream.py --root D [the stand-in's options]
                           [--host ADDR] [--drip BYTES_PER_S] [--drip-no-length]
                           [--endless-events] [--feed-cursor same|back]
                           [--mirror-origin URL] [--redirect-to URL] [--admin]

Roles (any number at once):
  a resting upstream   the stand-in's own faults: --fault 503 --retry-after S,
                       or per record with /_control path_faults (attack 3)
  --drip B             every bundle answered 200 with Content-Length 1,000,000,
                       then blanks at B bytes a second, for ever (attack 4:
                       above a stall limit, below any useful rate);
                       with --drip-no-length, no Content-Length (the body
                       ends when the connection closes): only a deadline
                       stops it
  --endless-events     /api/pith-number/{BODY}/events.json?offset=N answers no
                       events and next_offset N+1, for any record (attack 5)
  --feed-cursor same   the change feed's "next" is the cursor asked (after=C:
                       C; none: the first change's), so the feed never
                       advances; `back`: one before it (attack 6)
  --mirror-origin URL  /pith-mirrors.json names bundle_pattern
                       URL/pith/{suffix}/bundle.json and changes_url
                       URL/api/changes instead of this server's own: an https
                       upstream naming plain http:// (attack 7), or another
                       host or port (attack 8)
  --redirect-to URL    bundles and the resolve API answer 302 to URL + the
                       path asked (attack 8)
  --admin              the stand-in "admin service" of attack 8: answers every
                       request 200 {} and counts it (/_stats: requests,
                       by_path with ?paths=1); nothing else
--host ADDR: the address to listen on (127.0.0.1; another loopback address
such as 127.0.0.2 for the admin service). Every request of a hostile role is
counted as "fault" in /_stats, besides "requests".
"""
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import upstream_standin as us  # noqa: E402

EVENTS = "/api/pith-number/"


class Hostile(us.Handler):
    def do_GET(self):
        st = self.server.state
        a = self.server.options
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        if u.path in ("/_stats", "/_control"):
            return super().do_GET()
        if a.admin:
            with st.lock:
                st.stats["requests"] += 1
                st.by_path[self.path] = st.by_path.get(self.path, 0) + 1
            return self.send_json(200, {})
        bundle = us.BUNDLE.match(u.path)
        if a.redirect_to and (bundle or u.path == "/api/pith-number/resolve"):
            self.hostile()
            return self.send(302, b"", headers=[("Location", a.redirect_to + self.path)])
        if a.drip and bundle:
            self.hostile()
            return self.drip(a.drip)
        if a.endless_events and u.path.startswith(EVENTS) and u.path.endswith("/events.json"):
            self.hostile()
            body = u.path[len(EVENTS):-len("/events.json")]
            off = int((q.get("offset") or ["0"])[0] or 0)
            pith = self.pith_of(body)
            return self.send_json(200, {"pith_number": pith, "offset": off, "events": [],
                                        "next_offset": off + 1})
        if a.feed_cursor and u.path == "/api/changes":
            return self.stuck_feed(st, q, a.feed_cursor)
        if a.mirror_origin and u.path == "/pith-mirrors.json":
            self.hostile()
            st.count("manifest")
            o = a.mirror_origin
            return self.send_json(200, {
                "manifest_type": "pith_mirror_manifest", "manifest_version": "1.0",
                "mirrors": [{"name": "hostile", "mirror_type": "https", "base_url": st.origin,
                             "bundle_pattern": o + "/pith/{suffix}/bundle.json",
                             "changes_url": o + "/api/changes"}]})
        return super().do_GET()

    def hostile(self):
        st = self.server.state
        with st.lock:
            st.stats["requests"] += 1
            st.stats["fault"] += 1
            st.by_path[self.path] = st.by_path.get(self.path, 0) + 1

    def pith_of(self, body):
        """The full pith number of a body the feed lists (else the year 2024's)."""
        for _, c in self.server.state.feed_read() or []:
            if c["pith_number"].endswith(body):
                return c["pith_number"]
        return "pith:2024:" + body

    def drip(self, rate):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if not self.server.options.drip_no_length:
            self.send_header("Content-Length", "1000000")
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        step = max(1, rate // 20)
        try:
            for _ in range(1000000 // step):
                self.wfile.write(b" " * step)
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass
        self.close_connection = True

    def stuck_feed(self, st, q, how):
        """A page of the feed whose next cursor does not move on (same) or
        goes back (back)."""
        feed = st.feed_read() or []
        after = (q.get("after") or [""])[0]
        a = int(after) if after.isdigit() else 0
        page = [dict(c, cursor=str(i)) for i, c in feed if i > a][:1000]
        for c in page:
            c.pop("event_count", None)
        if after.isdigit():
            nxt = after if how == "same" else str(max(0, a - 1))
        else:
            nxt = page[0]["cursor"] if page else "0"
        st.count("changes")
        self.hostile()
        return self.send_json(200, {"changes": page, "next": nxt})


def main():
    ap = us.parser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--drip", type=int, default=0)
    ap.add_argument("--drip-no-length", action="store_true")
    ap.add_argument("--endless-events", action="store_true")
    ap.add_argument("--feed-cursor", choices=("same", "back"))
    ap.add_argument("--mirror-origin")
    ap.add_argument("--redirect-to")
    ap.add_argument("--admin", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.root, exist_ok=True)
    us.serve(a, Hostile, host=a.host)


if __name__ == "__main__":
    sys.exit(main())
