# Session 25's simulation (numpy, not a kernel) of a two-pass top-p over fp32 logits with
# provisional quanta, against scripts/loom_sampler.py's stream-4 token (bench/NOTES-cuda.md,
# session 25): z0 = the max of the row's first 2,048 logits / t (read before pass 1); pass 1
# takes zmax and counts each token's q0 = quantum against z0 (tokens above z0 kept as exact
# candidates; q0 past 65,535 weighed in pass 2); after it each q0 bin's exact quanta lie in
# q0 + [D - 2, D + 2], D = (zmax - z0) in quanta (on a device pass 2 would check that for every
# token and fall back where it fails: "BOUND VIOLATED" below); windows of bins that must hold
# the cut and the draw follow from those bounds; pass 2 weighs every token exactly, sums the
# mass above each window and gathers the windows' tokens, and the cut and the draw are exact.
# Run: build/pyenv/bin/python3 bench/experiments/2026-12-02-top-p-f32-two-pass-sim.py
# (~10 s; any python3 with numpy).
import os, sys, numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts'))
import loom_sampler as ls
C = np.float32(1.44269504088896341)

def quantum(z, zmax):
    u = (np.float32(zmax) - z.astype(np.float32)) * C
    return np.where(u < np.float32(40), (u * np.float32(4096)).astype(np.float64), np.inf)

def w_of_q(q):
    q = np.asarray(q)
    live = q < 40 * 4096
    qi = np.where(live, q, 0).astype(np.uint64)
    f = (ls._TOP_P_COARSE[(qi >> np.uint64(6)) & np.uint64(63)] * ls._TOP_P_FINE[qi & np.uint64(63)]) >> np.uint64(31)
    return np.where(live, (f << np.uint64(9)) >> (qi >> np.uint64(12)), np.uint64(0)).astype(object)

def run(x, t, p, seed, sample, draw, first=2048, margin=2, cand_max=4096):
    x = np.asarray(x, np.float32); t = np.float32(t)
    z = (x / t).astype(np.float32)
    z0 = np.float32(x[:first].max() / t)
    zmax = np.float32(x.max() / t)
    above = z > z0
    q0 = np.floor(quantum(z, z0))  # inf past u 40
    q0[above] = -1
    inb = (q0 >= 0) & (q0 < 65536)
    if above.sum() > cand_max: return None, 'above'
    D = float(np.float32((zmax - z0)) * C * np.float32(4096))
    qt = np.floor(quantum(z, zmax))
    # check the bound
    ok = np.all((qt[inb] >= q0[inb] + np.floor(D) - margin) & (qt[inb] <= q0[inb] + np.ceil(D) + margin))
    if not ok: return None, 'BOUND VIOLATED'
    cnt = np.bincount(q0[inb].astype(np.int64), minlength=65536).astype(object)
    bins = np.arange(65536)
    w_hi = w_of_q(np.maximum(bins + np.floor(D) - margin, 0))
    w_lo = w_of_q(bins + np.ceil(D) + margin)
    # the classes in order: each above-token its own class (exact), then bins 0..65535, then the tail
    wa = w_of_q(qt[above]); order_a = np.lexsort((np.flatnonzero(above), -ls._order_key(z[above]).astype(np.int64)))
    wa = [wa[i] for i in order_a]
    tail_n = int((~inb & ~above).sum())
    c_all = [1] * len(wa) + list(cnt) + [tail_n]
    lo_all = wa + list(w_lo) + [0]
    hi_all = wa + list(w_hi) + [w_of_q(np.array([65536 + np.floor(D) - margin]))[0]]
    c_all = np.array(c_all, dtype=object); lo_all = np.array(lo_all, dtype=object); hi_all = np.array(hi_all, dtype=object)
    Clo = np.cumsum(c_all * lo_all); Chi = np.cumsum(c_all * hi_all)
    Tlo, Thi = ls.top_p_target(p, Clo[-1]), ls.top_p_target(p, Chi[-1])
    first_ = lambda cond: int(np.flatnonzero(cond)[0]) if cond.any() else len(cond) - 1
    ca, cb = first_(Chi >= Tlo), first_(Clo >= Thi)
    wtop = max(hi_all[ca:cb + 1])
    Plo = ls.top_p_draw_point(seed, sample, draw, Tlo)
    Phi = ls.top_p_draw_point(seed, sample, draw, Thi + wtop)
    da, db = first_(Chi > Plo), first_(Clo > Phi)
    na = len(wa)
    cls = np.where(above, -1, np.where(inb, q0, 65536)).astype(np.int64)
    # class index of each token: above tokens by their rank
    idx = np.empty(x.size, dtype=np.int64)
    idx[~above] = na + cls[~above]
    ab_ids = np.flatnonzero(above)[order_a]
    idx[ab_ids] = np.arange(na)
    w = ls.top_p_weights(z, zmax).astype(object)
    M = sum(w)
    ids = np.arange(x.size)
    def window(a, b):
        sel = ids[(idx >= a) & (idx <= b)]
        o = np.lexsort((sel, -ls._order_key(z[sel]).astype(np.int64)))
        return sum(w[idx < a]), sel[o]
    T = ls.top_p_target(p, M)
    ab, cand = window(ca, cb)
    if cb == len(c_all) - 1: return None, 'cut in tail'
    cum = ab; cut = None
    for i in cand:
        cum += w[i]
        if cum >= T: cut = i; break
    if cut is None or ab >= T: return None, 'cut outside'
    P = ls.top_p_draw_point(seed, sample, draw, cum)
    abd, candd = window(da, db)
    if abd > P: return None, 'draw outside'
    cum = abd; tok = None
    for i in candd:
        cum += w[i]
        if cum > P: tok = i; break
    if tok is None: return None, 'draw outside'
    return int(tok), (int(above.sum()), len(cand), len(candd))

rng = np.random.default_rng(7)
V = 262145
rows = eq = fb = 0; big = 0
for sigma in (0.5, 1, 2, 4, 8):
    for t in (1.0, 0.9, 0.5):
        for p in (0.1, 0.5, 0.9, 0.99):
            x = (rng.standard_normal(V) * sigma).astype(np.float32)
            seed = int(rng.integers(1 << 40)); s = int(rng.integers(4)); d = int(rng.integers(1000))
            ref = ls.sample_token(x, t, 0, p, seed, s, d)
            tok, info = run(x, t, p, seed, s, d)
            rows += 1
            if tok is None:
                fb += 1; print(f"sigma {sigma} T {t} p {p}: fallback ({info})")
            else:
                eq += tok == ref
                if tok != ref: print(f"sigma {sigma} T {t} p {p}: MISMATCH {tok} vs {ref}")
                big += max(info[1], info[2]) > 4096
                print(f"sigma {sigma} T {t} p {p}: above z0 {info[0]}, cut window {info[1]}, draw window {info[2]}")
print(f"{rows} rows, {eq} equal, {fb} fallbacks, {big} with a window over 4,096")
