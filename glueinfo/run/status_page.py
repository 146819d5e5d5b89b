"""The status page (``GET /``): one self-contained HTML document for a person.

A renderer: it takes a :class:`glueinfo.run.stats.Status` and never reads
the config.  Plain HTML, CSS and inline SVG, no script, no external asset
(nothing is fetched from anywhere but this page); it reloads itself every
``refresh_s`` seconds (meta refresh).  Every text that comes from outside
(host names, CPU models, CE ids, errors, the site's name) is escaped.  What
glueinfo does not know is shown as "unknown" or left out, never as 0.

A site (``run``, ``serve``) shows its CEs with state and job counts (and
accelerators free, used and total when the batch system counts them) and a
24-hour chart of free CPUs and running/waiting jobs each, its SubClusters
with their hosts and hardware (accelerators per host when they are known),
hosts that are stale or Unknown and since
when, collector, source and job health, and the last publication with any
LDAP rejections.  A worker's agent (``serve --no-ldif``) shows its one host.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Optional

from glueinfo.run.stats import HealthRow, Status
from glueinfo.site.accelerators import AcceleratorKind

CONTENT_TYPE = "text/html; charset=utf-8"
DAY_S = 86400.0
MAX_LISTED_HOSTS = 200  # per SubCluster and in the stale list: the rest are counted, not listed

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{background:#243447;color:#fff;padding:12px 20px}
header h1{margin:0;font-size:20px}
header p{margin:2px 0 0;color:#c9d3df;font-size:13px}
main{padding:12px 20px;display:grid;grid-template-columns:repeat(auto-fill,minmax(430px,1fr));gap:14px}
section{background:#fff;border:1px solid #d8dde4;border-radius:6px;padding:10px 14px;overflow:auto}
section.wide{grid-column:1/-1}
h2{font-size:15px;margin:0 0 8px;color:#243447}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:3px 8px 3px 0;border-bottom:1px solid #eef0f3;vertical-align:top}
th{font-weight:600;color:#4a5668;font-size:12px}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#1a7f37;font-weight:600}.bad{color:#c62828;font-weight:600}.warn{color:#b26a00;font-weight:600}
.muted{color:#7a8596}.err{color:#c62828;font-size:12px;word-break:break-all}
.tiles{display:flex;gap:10px;flex-wrap:wrap}
.tile{background:#f0f3f7;border-radius:5px;padding:6px 10px;min-width:80px}
.tile b{display:block;font-size:20px}
.legend span{display:inline-block;margin-right:10px;font-size:12px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
ul.hosts{margin:4px 0 0;padding-left:18px;columns:2;font-size:12px}
"""

COLOURS = (("free CPUs", "#2e7d32"), ("running jobs", "#1565c0"), ("waiting jobs", "#ef6c00"))


def esc(value: object) -> str:
    """Text for HTML content and attribute values: &, <, >, " and ' escaped."""
    return html.escape(str(value), quote=True)


def when(timestamp: Optional[float], now: float) -> str:
    """'2024-05-01 12:00:00 UTC (5 min ago)'; 'never' for None or 0."""
    if not timestamp:
        return "never"
    stamp = datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({ago(now - timestamp)})"


def ago(seconds: float) -> str:
    if seconds < 0:
        return "in the future"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.1f} days ago"


def number(value: Optional[int]) -> str:
    return "unknown" if value is None else str(value)


def accelerator_text(kind: AcceleratorKind) -> str:
    """'2 x NVIDIA H100 80GB HBM3 (81559 MB, compute capability 9.0)' of one kind per host."""
    details = [f"{kind.memory_mb} MB" if kind.memory_mb is not None else "",
               f"compute capability {kind.compute_capability}" if kind.compute_capability else "",
               f"partitions {kind.partition}" if kind.partition else ""]
    shown = ", ".join(d for d in details if d)
    return f"{kind.count} x {kind.label()}" + (f" ({shown})" if shown else "")


def _verdict(ok: Optional[bool]) -> str:
    if ok is None:
        return '<span class="muted">not run</span>'
    return '<span class="ok">ok</span>' if ok else '<span class="bad">failed</span>'


def chart(points: Sequence[tuple[float, Optional[int], Optional[int], Optional[int]]], now: float,
          width: int = 400, height: int = 110) -> str:
    """An inline SVG of the last 24 hours: one line per figure, broken where it was unknown."""
    left, right, top, bottom = 34, 6, 6, 18
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for p in points for v in p[1:] if v is not None]
    peak = max(values, default=0) or 1
    start = now - DAY_S

    def x(t: float) -> float:
        return left + max(0.0, min(1.0, (t - start) / DAY_S)) * plot_w

    def y(v: float) -> float:
        return top + plot_h - v / peak * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="last 24 hours">',
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafbfc" stroke="#d8dde4"/>',
             f'<text x="{left - 4}" y="{top + 9}" font-size="10" text-anchor="end" fill="#4a5668">{peak}</text>',
             f'<text x="{left - 4}" y="{top + plot_h}" font-size="10" text-anchor="end" fill="#4a5668">0</text>',
             f'<text x="{left}" y="{height - 4}" font-size="10" fill="#4a5668">-24 h</text>',
             f'<text x="{left + plot_w / 2}" y="{height - 4}" font-size="10" text-anchor="middle" fill="#4a5668">-12 h</text>',
             f'<text x="{left + plot_w}" y="{height - 4}" font-size="10" text-anchor="end" fill="#4a5668">now</text>']
    for index, (label, colour) in enumerate(COLOURS, start=1):
        runs: list[list[str]] = [[]]
        for point in points:
            value = point[index]
            if value is None:
                if runs[-1]:
                    runs.append([])
                continue
            runs[-1].append(f"{x(point[0]):.1f},{y(value):.1f}")
        for run in runs:
            if len(run) == 1:
                cx, cy = run[0].split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{colour}"><title>{esc(label)}</title></circle>')
            elif run:
                parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{" ".join(run)}">'
                             f'<title>{esc(label)}</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def _health_table(title: str, rows: Iterable[HealthRow], now: float, extra: bool = False) -> str:
    rows = list(rows)
    if not rows:
        return ""
    out = [f"<section><h2>{esc(title)}</h2><table><tr><th>name</th><th>last run</th><th>took</th>"
           f"<th>failures</th>{'<th>snapshots</th>' if extra else ''}</tr>"]
    for row in rows:
        took = f"{row.last_duration_s:.3f} s" if row.last_duration_s is not None else ""
        out.append(f"<tr><td>{esc(row.name)}</td><td>{_verdict(row.ok)}</td><td class=\"n\">{took}</td>"
                   f"<td class=\"n\">{row.failures}</td>"
                   + (f"<td class=\"n\">{number(row.snapshots)}</td>" if extra else "") + "</tr>")
        if row.error:
            span = 5 if extra else 4
            out.append(f'<tr><td colspan="{span}" class="err">{esc(row.error)}</td></tr>')
    out.append("</table></section>")
    return "".join(out)


def render(status: Status, refresh_s: int = 30) -> bytes:
    """The page's bytes (UTF-8)."""
    now = status.generated_at
    agent = status.role == "agent"
    title = f"{status.hostname or 'this host'} (worker agent)" if agent else (status.site_name or "glueinfo site")
    body: list[str] = []
    unknown = status.states.get("Unknown", 0)
    tiles = [("hosts", status.hosts_total), ("stale", status.hosts_stale), ("Unknown", unknown)]
    tiles += [(state, count) for state, count in sorted(status.states.items()) if state != "Unknown"]
    body.append('<section class="wide"><h2>Overview</h2><div class="tiles">'
                + "".join(f'<div class="tile"><b>{count}</b>{esc(label)}</div>' for label, count in tiles) + "</div>")
    if status.problems:
        body.append("<ul>" + "".join(f'<li class="err">{esc(p)}</li>' for p in status.problems[:50]) + "</ul>")
    body.append("</section>")

    if agent or status.local_host:
        rows = "".join(f"<tr><th>{esc(label)}</th><td>{esc(value)}</td></tr>" for label, value in status.local_host)
        body.append(f'<section><h2>This host: {esc(status.hostname or "unknown")}</h2><table>'
                    f'<tr><th>State</th><td>{esc(status.host_state or "unknown")}</td></tr>{rows}</table></section>')

    if status.ces and not agent:
        legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{esc(label)}</span>' for label, c in COLOURS)
        for ce in status.ces:
            state = esc(ce.status or "unknown")
            if ce.queue_missing:  # published as not serving: the [ce:NAME] queue needs fixing
                state = f'<span class="err">{state}: the batch system has no queue {esc(ce.queue)}</span>'
            figures = (f"<tr><th>LRMS</th><td>{esc(ce.lrms)} queue {esc(ce.queue)}</td></tr>"
                       f"<tr><th>state</th><td>{state}</td></tr>"
                       f"<tr><th>CPUs free / total</th><td>{number(ce.free_cpus)} / {number(ce.total_cpus)}</td></tr>"
                       f"<tr><th>jobs running / waiting / total</th><td>{number(ce.running_jobs)} / {number(ce.waiting_jobs)}"
                       f" / {number(ce.total_jobs)}</td></tr>"
                       f"<tr><th>LRMS asked</th><td>{esc(when(ce.collected_at, now))}"
                       + (f", took {ce.query_duration_s:.3f} s" if ce.query_duration_s is not None else "") + "</td></tr>")
            for item in ce.accelerators:
                figures += (f"<tr><th>{esc(item.type)}{' ' + esc(item.model) if item.model else ''} free / used / total</th>"
                            f"<td>{number(item.free)} / {number(item.used)} / {number(item.total)}</td></tr>")
            if ce.error:
                figures += f'<tr><td colspan="2" class="err">{esc(ce.error)}</td></tr>'
            history = status.history.get(ce.unique_id, [])
            body.append(f'<section><h2>CE {esc(ce.unique_id)}</h2><table>{figures}</table>'
                        f'<div class="legend">{legend}</div>{chart(history, now)}</section>')

    if status.subclusters and not agent:
        out = ['<section class="wide"><h2>SubClusters</h2><table><tr><th>SubCluster</th><th>hardware</th><th>hosts</th></tr>']
        for sc in status.subclusters:
            shown = list(sc.hardware)
            if sc.accelerators is not None:  # unknown: left out
                shown.append(("accelerators per host", "; ".join(accelerator_text(k) for k in sc.accelerators) or "none"))
            hardware = "<br>".join(f"{esc(label)}: {esc(value)}" for label, value in shown) or '<span class="muted">unknown</span>'
            hosts = "".join(f"<li>{esc(h)}</li>" for h in sc.hosts[:MAX_LISTED_HOSTS])
            more = f'<li class="muted">and {len(sc.hosts) - MAX_LISTED_HOSTS} more</li>' if len(sc.hosts) > MAX_LISTED_HOSTS else ""
            out.append(f"<tr><td>{esc(sc.name)}<br><span class=\"muted\">{esc(sc.unique_id)} in {esc(sc.cluster)}</span></td>"
                       f"<td>{hardware}</td><td>{len(sc.hosts)}<ul class=\"hosts\">{hosts}{more}</ul></td></tr>")
        out.append("</table></section>")
        body.append("".join(out))

    if not agent:
        if status.notable_hosts:
            rows = "".join(f"<tr><td>{esc(h.hostname)}</td><td class=\"warn\">{esc(h.state)}</td>"
                           f"<td>{esc(when(h.collected_at, now))}</td><td>{esc(', '.join(h.sources))}</td></tr>"
                           for h in status.notable_hosts[:MAX_LISTED_HOSTS])
            more = (f'<p class="muted">and {len(status.notable_hosts) - MAX_LISTED_HOSTS} more</p>'
                    if len(status.notable_hosts) > MAX_LISTED_HOSTS else "")
            body.append('<section class="wide"><h2>Hosts stale or Unknown</h2><table><tr><th>host</th><th>State</th>'
                        f'<th>facts from</th><th>sources</th></tr>{rows}</table>{more}</section>')
        else:
            body.append('<section><h2>Hosts stale or Unknown</h2><p class="ok">none</p></section>')

    publish = status.publish
    if publish is not None and not agent:  # a worker's agent publishes its Node only
        lines = [f"<tr><th>result</th><td>{_verdict(publish.ok)}</td></tr>",
                f"<tr><th>last</th><td>{esc(when(publish.last_at, now))}"
                + (f", took {publish.last_duration_s:.3f} s" if publish.last_duration_s is not None else "") + "</td></tr>",
                f"<tr><th>GLUE entries</th><td>{number(publish.entries)}</td></tr>",
                f"<tr><th>runs / failures</th><td>{publish.runs} / {publish.failures}</td></tr>"]
        if publish.error:
            lines.append(f'<tr><td colspan="2" class="err">{esc(publish.error)}</td></tr>')
        if publish.ldap_state is not None:
            cls = "ok" if publish.ldap_state == "ok" else "bad"
            lines.append(f"<tr><th>LDAP {esc(publish.ldap_url or '')}</th><td class=\"{cls}\">{esc(publish.ldap_state)}"
                        f"</td></tr><tr><th>last sync</th><td>+{number(publish.ldap_added)} ~{number(publish.ldap_modified)} "
                        f"-{number(publish.ldap_deleted)}, {len(publish.rejected)} rejected</td></tr>")
            lines += [f'<tr><td colspan="2" class="err">{esc(line)}</td></tr>' for line in publish.rejected[:50]]
        for output in status.outputs:
            age = "missing" if output.age_s is None else ago(output.age_s)
            lines.append(f"<tr><th>{esc(output.kind)}</th><td>{esc(output.path)}: written or marked fresh {esc(age)}"
                        + (f' <span class="err">{esc(output.error)}</span>' if output.error else "") + "</td></tr>")
        body.append(f'<section><h2>Last publication</h2><table>{"".join(lines)}</table></section>')

    body.append(_health_table("Collectors (this host)", status.collectors, now))
    body.append(_health_table("Sources", status.sources, now, extra=True))
    body.append(_health_table("Jobs", status.jobs, now))
    if status.output_plugins:
        body.append(_health_table("Outputs", status.output_plugins, now))
    for outbox in status.outboxes:
        broker = {True: '<span class="ok">confirming</span>', False: '<span class="bad">not confirming</span>',
                  None: "not tried yet"}[outbox.up]
        cls = "ok" if outbox.depth == 0 else "bad" if outbox.up is False else ""
        outbox_rows = [f"<tr><th>broker</th><td>{broker}</td></tr>",
                f'<tr><th>documents waiting</th><td class="{cls}">{outbox.depth}</td></tr>',
                f"<tr><th>last confirm</th><td>{esc(when(outbox.last_confirm_at, now))}</td></tr>",
                f"<tr><th>confirmed since start</th><td>{outbox.confirmed}</td></tr>"]
        if outbox.error:
            outbox_rows.append(f'<tr><td colspan="2" class="err">{esc(outbox.error)}</td></tr>')
        body.append(f'<section><h2>Outbox of the {esc(outbox.output)} output</h2><table>{"".join(outbox_rows)}</table>'
                    "</section>")

    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="refresh" content="{int(refresh_s)}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)} - glueinfo</title><style>{CSS}</style></head><body>"
            f"<header><h1>{esc(title)}</h1><p>glueinfo {esc(status.version)} &middot; "
            f"{esc(datetime.fromtimestamp(now, UTC).strftime('%Y-%m-%d %H:%M:%S UTC'))} &middot; reloads every "
            f"{int(refresh_s)} s &middot; <a style=\"color:#c9d3df\" href=\"/metrics\">metrics</a> &middot; "
            f"<a style=\"color:#c9d3df\" href=\"/health\">health</a></p></header>"
            f"<main>{''.join(body)}</main></body></html>\n")
    return page.encode("utf-8")
