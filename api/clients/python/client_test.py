"""Uses the client openapi-python-client generates from api/openapi.yaml
against a running gateway (GATEWAY_URL): writes points, reads them back raw
following cursors and aggregated with three aggregates, reads a batch with
agg as a list and as a comma string, and reads a 400 problem as a problem.
Every answer is compared with what the points written make."""

import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

from tsgate_client import Client  # noqa: E402
from tsgate_client.api.read import query_batch, read_points  # noqa: E402
from tsgate_client.api.write import write_points  # noqa: E402
from tsgate_client.models import (  # noqa: E402
    BatchAnswer,
    BatchQuery,
    BatchRequest,
    PointsAnswer,
    Point,
    Problem,
    WriteRequest,
)

passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}", file=sys.stderr)


client = Client(base_url=os.environ["GATEWAY_URL"], raise_on_unexpected_status=True)
now = int(time.time() * 1000)
minute = 60_000
start = (now - 3 * 3_600_000) // (10 * minute) * (10 * minute)
series = f"py-{now}"
values = {start + i * 7_000: round(math.sin(i / 10) * 50 + i % 13, 2) for i in range(900)}

answer = write_points.sync(
    client=client,
    body=WriteRequest(points=[Point(series=series, t=t, v=v) for t, v in values.items()]),
)
check("write", answer is not None and getattr(answer, "accepted", None) == len(values), answer)

# Raw points, three at most a page, following next_cursor.
got, cursor, pages = [], None, 0
frm, to = str(start), str(start + 2 * 3_600_000)
while True:
    kwargs = {"cursor": cursor} if cursor else {}
    page = read_points.sync(series, client=client, from_=frm, to=to, resolution="raw", limit=250, **kwargs)
    if not isinstance(page, PointsAnswer):
        check("raw page", False, page)
        break
    pages += 1
    got.extend((int(p[0]), p[1]) for p in page.points)
    if not isinstance(page.next_cursor, str):
        break
    cursor = page.next_cursor
want = sorted((t, v) for t, v in values.items() if t < start + 2 * 3_600_000)
check("raw points over pages", got == want, f"{len(got)} points, want {len(want)}")
check("pages", pages == (len(want) + 249) // 250, pages)

# Three aggregates, sent as a repeated query parameter: three columns.
agg = read_points.sync(
    series, client=client, from_=frm, to=to, resolution="10m", agg=["min", "max", "avg"]
)
windows = {}
for t, v in want:
    windows.setdefault(t // 600_000 * 600_000, []).append(v)
want_agg = [[float(w), min(vs), max(vs), sum(vs) / len(vs)] for w, vs in sorted(windows.items())]
check("aggregate answer", isinstance(agg, PointsAnswer), agg)
if isinstance(agg, PointsAnswer):
    check("aggregate columns", agg.columns == ["t", "min", "max", "avg"], agg.columns)
    ok = len(agg.points) == len(want_agg) and all(
        len(g) == 4 and g[0] == w[0] and g[1] == w[1] and g[2] == w[2] and abs(g[3] - w[3]) < 1e-9
        for g, w in zip(agg.points, want_agg)
    )
    check("aggregate windows", ok, f"{agg.points[:2]} want {want_agg[:2]}")

# A batch: agg as a list for one query, as a comma string for the other.
batch = query_batch.sync(
    client=client,
    body=BatchRequest(
        from_=frm,
        to=to,
        resolution="10m",
        queries=[
            BatchQuery(series=series, agg=["max", "min"]),
            BatchQuery(series=series, agg="max,min"),
        ],
    ),
)
check("batch answer", isinstance(batch, BatchAnswer), batch)
if isinstance(batch, BatchAnswer):
    rows = []
    for r in batch.results:
        check("batch result", isinstance(r, PointsAnswer), r)
        if isinstance(r, PointsAnswer):
            check("batch columns", r.columns == ["t", "max", "min"], r.columns)
            rows.append(r.points)
    want_rows = [[w[0], w[2], w[1]] for w in want_agg]
    check("batch windows", rows == [want_rows, want_rows], rows[:1])

# A bad parameter is a problem naming it.
bad = read_points.sync_detailed(series, client=client, from_=frm, limit=0)
check("problem status", bad.status_code == 400, bad.status_code)
check("problem content type", bad.headers.get("content-type") == "application/problem+json", bad.headers)
p = bad.parsed
check("problem parsed", isinstance(p, Problem), p)
if isinstance(p, Problem):
    check("problem names the parameter", p.status == 400 and [e.param for e in p.errors] == ["limit"], p)

print(f"python client: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
