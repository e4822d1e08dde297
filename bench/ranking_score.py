#!/usr/bin/env python3
"""Scores a blind ranking prediction against measured times (issues 4 and 5).

  python3 bench/ranking_score.py PREDICTION.json MEASURED.json [MEASURED.json ...] \
      --title TITLE --out FILE.md

PREDICTION.json: {"date", "machine", "command", "tools": {..}, "types": {TYPE: {TARGET:
{"size", "ranking": [{"variant", "estimate_us", "low_us", "high_us", "rung", "tie_group"}]}}}}
MEASURED.json:   {"date", "machine", "target", "command", "seconds", "types": {TYPE: {VARIANT:
{"verdict", "median_us", "p10_us", "p90_us"}}}}; "prediction_target" names the TARGET key of the
prediction when it differs from "target".

Kendall tau (Kendall 1938) over the pairs whose measured medians differ by more than the larger
half-spread (p90 - p10) / 2 of the two (closer pairs are noise); a pair the prediction ties
(equal estimates) counts as neither concordant nor discordant; tau = (C - D) / pairs scored.
Top-1 regret = (measured time of the predicted best - measured best) / measured best.
In band: the variants whose measured median lies inside the prediction's [low_us, high_us].
Writes FILE.md and, beside it, FILE.json (the same scores for machines).
Variants whose measured verdict is not PASS / UNVERIFIED / INVALID are left out (listed).
"""
import argparse
import os
import datetime
import itertools
import json
import math

OK = ("PASS", "UNVERIFIED", "INVALID")


def score_type(pred_rows, meas):
    P = {r["variant"]: r for r in pred_rows if r.get("estimate_us") is not None}
    M = {v: r for v, r in meas.items() if r.get("median_us") and r.get("verdict") in OK}
    vs = sorted(set(P) & set(M))
    c = d = n = 0
    for a, b in itertools.combinations(vs, 2):
        ta, tb = M[a]["median_us"], M[b]["median_us"]
        noise = max((M[a]["p90_us"] - M[a]["p10_us"]) / 2, (M[b]["p90_us"] - M[b]["p10_us"]) / 2)
        if abs(ta - tb) <= noise:
            continue
        n += 1
        pa, pb = P[a]["estimate_us"], P[b]["estimate_us"]
        if pa == pb:
            continue
        if (pa < pb) == (ta < tb):
            c += 1
        else:
            d += 1
    tau = (c - d) / n if n else float("nan")
    best_p = min(vs, key=lambda v: (P[v]["estimate_us"], v)) if vs else None
    best_m = min(vs, key=lambda v: M[v]["median_us"]) if vs else None
    regret = ((M[best_p]["median_us"] - M[best_m]["median_us"]) / M[best_m]["median_us"]
              if vs else float("nan"))
    left_out = sorted(set(meas) - set(M))
    in_band = sum(1 for v in vs if P[v].get("low_us") is not None and P[v].get("high_us") is not None
                  and P[v]["low_us"] <= M[v]["median_us"] <= P[v]["high_us"])
    return {"variants": len(vs), "in_band": in_band, "pairs": n, "concordant": c, "discordant": d, "tau": tau,
            "best_predicted": best_p, "best_measured": best_m, "regret": regret,
            "left_out": left_out}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("prediction")
    ap.add_argument("measured", nargs="+")
    ap.add_argument("--title", default="Blind ranking study")
    ap.add_argument("--out", required=True)
    ap.add_argument("--notes", help="a Markdown file (the study's reading: what limits it) "
                    "appended after the scores, so that re-scoring keeps it")
    a = ap.parse_args()
    pred = json.load(open(a.prediction))
    doc = {"prediction": a.prediction, "prediction_date": pred["date"],
           "prediction_command": pred["command"], "prediction_commit": pred.get("commit"),
           "scored": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")}
    L = [f"# {a.title}", "",
         f"- scored {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC')} by "
         f"`bench/ranking_score.py`",
         f"- prediction made {pred['date']} on {pred['machine']}: `{pred['command']}`"
         + "".join(f"; {v}" for v in pred.get("tools", {}).values() if v),
         "- Kendall tau over the pairs whose measured medians differ by more than the larger "
         "half-spread (p90-p10)/2 of the two; a pair the prediction ties counts 0; top-1 regret "
         "= (time of the predicted best - true best) / true best.", ""]
    for mf in a.measured:
        m = json.load(open(mf))
        tg = m.get("prediction_target", m["target"])
        if tg == "local" and not any(tg in v for v in pred["types"].values()):
            tg = "local-cpu"  # measured JSONs written before prediction_target existed
        L += [f"## {m['target']}: {m['machine']}", "",
              f"- measured {m['date']} in {m.get('seconds', '?')} s: `{m['command']}`", "",
              "| kernel | variants | pairs scored | tau | top-1 predicted | top-1 measured | regret | in band |",
              "|---|---|---|---|---|---|---|---|"]
        C = D = N = 0
        V = B = 0
        scores = doc.setdefault("targets", {}).setdefault(m["target"], {"measured": mf, "types": {}})
        regrets = []
        for t, per in m["types"].items():
            if t not in pred["types"] or tg not in pred["types"][t]:
                L.append(f"| {t} | no prediction for target {tg} | | | | | |")
                continue
            s = score_type(pred["types"][t][tg]["ranking"], per)
            C += s["concordant"]; D += s["discordant"]; N += s["pairs"]
            V += s["variants"]; B += s["in_band"]
            scores["types"][t] = s
            if not math.isnan(s["regret"]):
                regrets.append(s["regret"])
            L.append(f"| {t} | {s['variants']} | {s['pairs']} | {s['tau']:.2f} | "
                     f"{s['best_predicted']} | {s['best_measured']} | {s['regret']:.2f} | "
                     f"{s['in_band']}/{s['variants']} |"
                     + (f" left out: {', '.join(s['left_out'])}" if s["left_out"] else ""))
        tau = (C - D) / N if N else float("nan")
        mean_r = sum(regrets) / len(regrets) if regrets else float("nan")
        L.append(f"| **all** | {V} | {N} | **{tau:.2f}** | | | mean {mean_r:.2f} | "
                 f"{B}/{V} ({100 * B / V if V else 0:.0f} %) |")
        scores.update({"tau": tau, "pairs": N, "mean_regret": mean_r, "in_band": B, "variants": V})
        L += ["", "Measured median (p10-p90) vs predicted estimate, microseconds:", ""]
        for t, per in m["types"].items():
            P = {r["variant"]: r for r in pred["types"].get(t, {}).get(tg, {}).get("ranking", [])}
            cells = []
            for v, r in sorted(per.items(), key=lambda x: x[1].get("median_us") or 1e18):
                e = P.get(v, {}).get("estimate_us")
                med = r.get("median_us")
                cells.append(f"{v} {med if med is None else f'{med:.4g}'}"
                             f" ({r.get('p10_us') or 0:.4g}-{r.get('p90_us') or 0:.4g})"
                             f" pred {e if e is None else f'{e:.4g}'}"
                             + ("" if r.get("verdict") in ("PASS", "UNVERIFIED")
                                else f" [{r.get('verdict')}]"))
            L.append(f"- {t}: " + "; ".join(cells))
        L.append("")
    if a.notes and os.path.exists(a.notes):
        L += [open(a.notes).read().rstrip("\n")]
    open(a.out, "w").write("\n".join(L) + "\n")
    json.dump(doc, open(os.path.splitext(a.out)[0] + ".json", "w"), indent=1, default=str)
    print("\n".join(L))


if __name__ == "__main__":
    main()
