#!/usr/bin/env python3
"""The soak's report (scripts/soak.sh): samples.tsv, the loads' JSON and the events, read into a
markdown page on standard output. Exits 1 when a check fails; the page says which and why.

usage: soak_report.py SAMPLES.tsv LOAD-DIR EVENTS.tsv   (settings in SOAK_* variables)
"""

import json
import os
import sys
from pathlib import Path


def env(name, default=""):
    return os.environ.get("SOAK_" + name, default)


def read_samples(path):
    lines = Path(path).read_text().splitlines()
    header = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        values = line.split("\t")
        if len(values) == len(header) and all(v.strip() for v in values):
            rows.append({k: int(v) for k, v in zip(header, values)})
    return rows


def slope_per_minute(rows, key):
    """Least-squares slope of rows[key] over rows['t_s'], per minute."""
    n = len(rows)
    if n < 2:
        return 0.0
    xs = [r["t_s"] / 60 for r in rows]
    ys = [r[key] for r in rows]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def percentile(load, p):
    for entry in load["latency"]["corrected"]["percentiles"]:
        if entry["percentile"] == p:
            return entry["value_us"] / 1000
    return float("nan")


def main():
    samples_path, load_dir, events_path = sys.argv[1:4]
    rows = read_samples(samples_path)
    if len(rows) < 4:
        print(f"soak_report: only {len(rows)} samples in {samples_path}", file=sys.stderr)
        return 1
    end_t = rows[-1]["t_s"]
    settled = [r for r in rows if r["t_s"] >= end_t / 4]
    quarter, last = settled[0], rows[-1]
    failures = []

    live = int(env("LIVE", "5"))
    growth_limit_kib = int(env("GROWTH_MIB", "16")) * 1024
    fd_slack = int(env("FD_SLACK", "50"))
    anon_growth = last["anon_kib"] - quarter["anon_kib"]
    anon_peak = max(r["anon_kib"] for r in settled)
    anon_slope = slope_per_minute(settled, "anon_kib")
    rss_slope = slope_per_minute(settled, "rss_kib")
    fd_growth = last["fds"] - quarter["fds"]
    named_peak = max(r["ingresses_in_metrics"] for r in settled)

    out = []
    w = out.append
    w("# Soak: Sluice under mixed traffic and constant change")
    w("")
    source = ("Kubernetes mode: a real kube-apiserver + etcd, every change applied through the "
              "API" if env("MODE") == "kubernetes" else "standalone: a folder of manifests")
    w(f"`MODE={env('MODE', 'standalone')} scripts/soak.sh` ({source}), {env('VERSION')}, "
      f"{env('WORKERS')} workers, DURATION={env('DURATION')}: "
      f"a new Ingress every {env('CHURN_EVERY')} s ({env('INGRESSES')} in all, {live} live at a "
      f"time), the EndpointSlice rewritten every {env('ENDPOINT_EVERY')} s "
      f"({env('ENDPOINT_STEPS')} times)"
      + (f", the API server stopped for {env('APISERVER_DOWN')} s and started again "
         f"{env('APISERVER_RESTARTS')} times" if int(env("APISERVER_RESTARTS", "0")) else "")
      + f", the loads below all the while. From the quarter mark "
      f"(t = {quarter['t_s']} s, warm-up before it) to the end (t = {end_t} s):")
    w("")
    w("## Verdict")
    w("")

    def verdict(ok, text):
        w(f"- {'**ok**' if ok else '**FAILED**'}: {text}")
        if not ok:
            failures.append(text)

    verdict(anon_growth <= growth_limit_kib,
            f"anonymous memory {quarter['anon_kib'] / 1024:.1f} → {last['anon_kib'] / 1024:.1f} MiB "
            f"(growth {anon_growth / 1024:+.1f} MiB, limit {growth_limit_kib // 1024} MiB; slope "
            f"{anon_slope:+.1f} KiB/min, resident {rss_slope:+.1f} KiB/min; peak "
            f"{anon_peak / 1024:.1f} MiB)")
    verdict(fd_growth <= fd_slack,
            f"open descriptors {quarter['fds']} → {last['fds']} ({fd_growth:+d}, limit +{fd_slack})")
    # tokio's blocking pool starts threads for file reads and lets them go after 10 s idle.
    w(f"- threads {quarter['threads']} → {last['threads']} (peak "
      f"{max(r['threads'] for r in settled)}; the blocking pool's come and go)")
    # The stable Ingress, the LIVE churned ones, and one on its way in or out.
    named_limit = live + 2
    verdict(named_peak <= named_limit,
            f"Ingresses named by nginx_ingress_controller_requests: at most {named_peak} at once "
            f"(limit {named_limit}: a removed Ingress's series go with it); /metrics "
            f"{quarter['metric_lines']} → {last['metric_lines']} lines")
    unserved = int(env("UNSERVED", "0"))
    verdict(unserved == 0, f"every new Ingress served within 10 s ({unserved} not)")
    if env("MODE") == "kubernetes":
        unstatused = int(env("UNSTATUSED", "0"))
        verdict(unstatused == 0, f"every new Ingress's status written (the --publish-service "
                                 f"address) within 10 s of being served ({unstatused} not)")
    wrong = int(env("WRONG_REFUSALS", "0"))
    verdict(wrong == 0, f"a head too large answered 431 and a malformed one 400 every time "
                        f"({wrong} otherwise)")

    loads = []
    for path in sorted(Path(load_dir).glob("*.json")):
        load = json.loads(path.read_text())
        name = path.stem
        errors = sum(load["errors"].values())
        expected = "404" if name == "unknown-host-404" else "200"
        other = {k: v for k, v in load["status_codes"].items() if k != expected}
        if name == "unknown-host-404":
            errors -= load["errors"].get("status", 0)
        loads.append((name, load, errors, other, expected))
        verdict(errors == 0 and not other and load["unsent"] == 0,
                f"load {name}: {load['requests']} requests, {errors} errors, "
                f"{sum(other.values())} not {expected}, {load['unsent']} unsent")

    w("")
    w("## Loads")
    w("")
    w("| load | rate/s | requests | errors | status | TLS full / resumed | p50 ms | p99 ms | p99.9 ms | max ms |")
    w("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for name, load, errors, other, expected in loads:
        codes = ", ".join(f"{k}: {v}" for k, v in sorted(load["status_codes"].items()))
        tls = load.get("tls_handshakes") or {}
        w(f"| {name} | {load['requested_rate']:.0f} | {load['requests']} | {errors} | {codes} | "
          f"{tls.get('full', 0)} / {tls.get('resumed', 0)} | {percentile(load, 50.0):.2f} | "
          f"{percentile(load, 99.0):.2f} | {percentile(load, 99.9):.2f} | "
          f"{load['latency']['corrected']['max_us'] / 1000:.2f} |")

    w("")
    w("## Samples, one a minute")
    w("")
    w("| t (min) | resident MiB | anonymous MiB | descriptors | threads | /metrics lines | Ingresses in /metrics | Ingresses made |")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|")
    shown, next_minute = [], 0
    for r in rows:
        if r["t_s"] >= next_minute * 60:
            shown.append(r)
            next_minute = r["t_s"] // 60 + 1
    if shown[-1] is not rows[-1]:
        shown.append(rows[-1])
    for r in shown:
        w(f"| {r['t_s'] / 60:.1f} | {r['rss_kib'] / 1024:.1f} | {r['anon_kib'] / 1024:.1f} | "
          f"{r['fds']} | {r['threads']} | {r['metric_lines']} | {r['ingresses_in_metrics']} | "
          f"{r['ingresses_made']} |")

    events = Path(events_path).read_text().splitlines()
    if events:
        w("")
        w("## Events")
        w("")
        for line in events[:50]:
            t, text = line.split("\t", 1)
            w(f"- t = {t} s: {text}")
        if len(events) > 50:
            w(f"- … and {len(events) - 50} more")
    print("\n".join(out))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
