#!/usr/bin/env python3
"""ctest entry: report.html as a browser shows it (headless Chromium, Debian's `chromium`).

usage: check_report_html.py --tp-compile PATH --models DIR --work DIR [--screenshot PNG]

Compiles GPT-2 (the committed models/gpt2.onnx) to 4 ranks, opens DIR/report.html in
headless Chromium, and asserts on the page after its script ran (--dump-dom), against
report.json:
  - the script ran (body data-ready), so the page has no script error before its end;
  - one weight bar per rank, each labelled with that rank's bytes from report.json;
  - the per-layer table has the model's layers (h.0, h.1), and its collective counts add
    up to report.json's collectives per forward;
  - the cards say the number of collectives and fallbacks report.json has;
  - the value table has a row per value, and `report.html#filter=c_attn` shows exactly
    the rows whose text holds "c_attn";
  - the page fetches nothing: no http(s) URL, no external script or style.
With --screenshot, also writes a PNG of the page (docs/report.png is one) and checks that
it is an image of the size asked for that is not blank.

Exit status: 0 all pass, 1 something failed, 77 Chromium missing.
"""
import argparse
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

SKIP = 77


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium(browser, args, timeout=120):
    # --no-sandbox: CI runs as root, where Chromium refuses its sandbox.
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-extensions", "--user-data-dir=" + args[0]] + args[1:]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


class Page(html.parser.HTMLParser):
    """The parts of the rendered DOM the checks read."""

    def __init__(self):
        super().__init__()
        self.stack = []
        self.body = {}
        self.ids = {}          # id -> text inside
        self.rank_bars = []    # <title> texts of the rank-weights bars
        self.layer_rows = []   # [cells] of #layers tbody
        self.value_rows = []   # (visible, text) of #values tbody
        self.urls = []
        self._text_for = []    # ids whose text is being collected
        self._row = None
        self._in = {"rank-weights": 0, "layers": 0, "values": 0}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        for key in ("src", "href"):
            if key in a and a[key] and not a[key].startswith("#"):
                self.urls.append(a[key])
        if a.get("id"):
            self.ids.setdefault(a["id"], "")
            self._text_for.append(a["id"])
        for k in self._in:
            if a.get("id") == k or self._in[k]:
                self._in[k] += 1
        if tag == "tr" and (self._in["layers"] or self._in["values"]):
            self._row = {"cells": [], "style": a.get("style", ""), "text": ""}
        if tag == "td" and self._row is not None:
            self._row["cells"].append("")
        self.stack.append((tag, a.get("id")))

    def handle_endtag(self, tag):
        if not self.stack:
            return
        t, ident = self.stack.pop()
        for k in self._in:
            if self._in[k]:
                self._in[k] -= 1
        if ident is not None and self._text_for and self._text_for[-1] == ident:
            self._text_for.pop()
        if t == "tr" and self._row is not None:
            if self._in["layers"] and self._row["cells"]:
                self.layer_rows.append(self._row["cells"])
            elif self._in["values"] and self._row["cells"]:
                self.value_rows.append(("none" not in self._row["style"], self._row["text"]))
            self._row = None

    def handle_data(self, data):
        for ident in self._text_for:
            self.ids[ident] += data
        if self._row is not None:
            self._row["text"] += data
            if self._row["cells"]:
                self._row["cells"][-1] += data
        if self.stack and self.stack[-1][0] == "title" and self._in["rank-weights"]:
            self.rank_bars.append(data)


def png_ok(path, width, height):
    """The PNG's size is (width, height) and its pixels are not all one colour."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "not a PNG"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    if size != (width, height):
        return f"size {size}, expected {(width, height)}"
    raw = zlib.decompress(idat)
    if len(set(raw[1:4096 * 4])) < 3 or len(set(raw[len(raw) // 2:len(raw) // 2 + 65536])) < 3:
        return "the image is blank"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp-compile", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--screenshot", help="also write the page as this PNG")
    args = ap.parse_args()
    browser = find_chromium()
    if browser is None:
        print("SKIP: no Chromium (Debian: apt-get install chromium; `make deps` installs it)")
        return SKIP
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    plan = os.path.join(args.work, "gpt2_tp4")
    r = subprocess.run([args.tp_compile, os.path.join(args.models, "gpt2.onnx"), "--tp", "4",
                        "-o", plan, "--quiet"], capture_output=True, text=True)
    if r.returncode != 0:
        print("tp-compile failed:", r.stderr)
        return 1
    report = json.load(open(os.path.join(plan, "report.json")))
    page_path = os.path.join(plan, "report.html")
    text = open(page_path, encoding="utf-8").read()
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    profile = os.path.join(args.work, "chromium-profile")
    url = "file://" + os.path.abspath(page_path)
    doms = {}
    for name, suffix in (("plain", ""), ("filtered", "#filter=c_attn")):
        out = chromium(browser, [profile, "--dump-dom", url + suffix])
        if out.returncode != 0 or "<body" not in out.stdout:
            print(out.stderr[-2000:])
            check(False, f"chromium --dump-dom ({name}) exits 0 with a page")
            return 1
        page = Page()
        page.feed(out.stdout)
        doms[name] = page
    page = doms["plain"]
    check(page.body.get("data-ready") == "1", "the page's script ran to its end (data-ready)")
    check("http://" not in text and "https://" not in text and not page.urls,
          f"the page fetches nothing (urls: {page.urls[:3]})")

    per_rank = report["per_rank_weight_bytes"]
    check(len(page.rank_bars) == len(per_rank) == 4,
          f"one weight bar per rank ({len(page.rank_bars)} bars, {len(per_rank)} ranks)")
    for i, title in enumerate(page.rank_bars):
        kib = per_rank[i] / 1024
        check(title.startswith(f"rank {i}: ") and f"{kib:.1f} KiB" in title,
              f"rank {i}'s bar says {kib:.1f} KiB ({title!r})")

    layers = [row[0].strip() for row in page.layer_rows]
    check("h.0" in layers and "h.1" in layers, f"the layer table has h.0 and h.1 ({layers})")
    kinds = {}
    for row in page.layer_rows:
        for part in row[1].split(","):
            part = part.strip()
            if part and part != "none":
                count, kind = part.split(" ", 1)
                kinds[kind] = kinds.get(kind, 0) + int(count)
    expected = {c["kind"]: c["count"] for c in report["collectives_per_forward"]}
    check(kinds == expected, f"the layers' collectives add up to report.json's ({kinds} vs "
          f"{expected})")
    total = sum(expected.values())
    check(page.ids.get("card-collectives", "").strip().startswith(str(total)),
          f"the collectives card says {total} ({page.ids.get('card-collectives', '')!r})")
    check(page.ids.get("card-fallbacks", "").strip().startswith(str(len(report["fallback_ops"]))),
          "the fallbacks card says report.json's number")

    rows = page.value_rows
    check(len(rows) >= len(report["placements"]) and all(v for v, _ in rows),
          f"the value table shows every value ({len(rows)} rows, {len(report['placements'])} "
          "placed)")
    check(page.ids.get("shown", "").strip() == f"{len(rows)} of {len(rows)} values",
          f"the counter says all rows show ({page.ids.get('shown', '')!r})")
    filtered = doms["filtered"].value_rows
    want = sum(1 for _, t in filtered if "c_attn" in t.lower())
    shown = sum(1 for v, _ in filtered if v)
    check(want > 0 and shown == want and len(filtered) == len(rows),
          f"#filter=c_attn shows the {want} rows that hold it (shown {shown})")
    check(all(("c_attn" in t.lower()) == v for v, t in filtered),
          "every shown row holds the filter text, every hidden one does not")

    if args.screenshot:
        out = chromium(browser, [profile, "--window-size=1200,1400",
                                 "--screenshot=" + os.path.abspath(args.screenshot), url])
        check(out.returncode == 0 and os.path.exists(args.screenshot), "chromium --screenshot")
        if os.path.exists(args.screenshot):
            problem = png_ok(args.screenshot, 1200, 1400)
            check(problem is None, f"the screenshot is a 1200x1400 page, not blank ({problem})")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
