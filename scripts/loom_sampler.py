#!/usr/bin/env python3
"""Python mirror of loom's sampler: lib/core/philox.h + lib/backend/sampler.cpp, bit for bit.

The golden token streams in testdata/ are drawn with this file, so a C++ backend that samples
from the same logits must pick the same tokens. Every step copies the C++ arithmetic exactly:

  * Philox4x32-10, key = (seed lo32, seed hi32), counter = (token // 4, draw lo32, draw hi32,
    sample); word token % 4 of the output is token's (draw stream 2: one call for four tokens);
    u = (float32(r >> 9) + 0.5f) * 2^-23 in float32, exact (vectorised over the vocabulary).
  * z = float32(logits) / float32(temperature) in float32.
  * top-k / top-p ordered by (z desc by the device's key, id asc); the top-p masses are the
    integer weights of lib/core/top_p_weight.h (fp32 u, its tables, read from the header),
    summed exactly ("top-p mass 2").
  * top-p on (with or without top-k; draw stream 4): inverse CDF over the kept prefix's integer
    weights: M = their sum, U = v0 | v1 << 32 of the Philox call for counter (0xFFFFFFFF, draw
    lo32, draw hi32, sample) (top_p_weight.h kTopPDrawGroup), r = (U * M) >> 64 in Python ints,
    token = the first kept id (in order) whose cumulative weight exceeds r (M = 0: the first).
  * otherwise v = z + float32(-log(-log(double(u)))) in float32: the noise is computed in float64
    with libm's log (math.log, what the C++ log(double) calls) and rounded once to float32, so
    implementations whose logs differ in the last bit agree on all but ~2^-29 of draws; token =
    argmax over kept ids (every id without a filter) of v, lowest id on ties.
  * temperature <= 0 → argmax of logits.

Run `python scripts/loom_sampler.py --selftest` to check Philox against the Random123
known-answer vectors and the sampler's invariants.
"""

import argparse
import math
import sys

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 over broadcast uint32 counters; returns four uint32 arrays (r0..r3).

    Round (Random123 philox4x32round): (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2,
    out = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); the key is bumped by the Weyl constants
    after every round, exactly as philox.h does.
    """
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) & _MASK32 for c in (c0, c1, c2, c3))
    k0, k1 = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    for _ in range(10):
        p0 = _M0 * c0  # < 2^64: the exact 32x32 → 64 product
        p1 = _M1 * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK32
        hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
        k0 = (k0 + _W0) & 0xFFFFFFFF
        k1 = (k1 + _W1) & 0xFFFFFFFF
    return tuple(np.asarray(c, dtype=np.uint32) for c in (c0, c1, c2, c3))


def philox_uniform_from_bits(r):
    """philox.h uniform_from_bits: (float32(r >> 9) + 0.5f) * 2^-23, float32."""
    return (((np.asarray(r, np.uint32) >> np.uint32(9)).astype(np.float32) + np.float32(0.5)) *
            np.float32(1.0 / 8388608.0)).astype(np.float32)


def philox_uniform(seed, sample, draw_index, tokens):
    """float32 uniforms, one per id in `tokens` (philox.h philox_uniform, draw stream 2)."""
    tokens = np.asarray(tokens, dtype=np.uint64)
    seed, draw_index = int(seed), int(draw_index)
    words = philox4x32_10(tokens >> np.uint64(2), draw_index & 0xFFFFFFFF,
                          (draw_index >> 32) & 0xFFFFFFFF, int(sample) & 0xFFFFFFFF,
                          seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    r = np.choose((tokens & np.uint64(3)).astype(np.int64), words).astype(np.uint32)
    # float(r >> 9) + 0.5f is exact (24 bits), so u < 1 always, as in C++.
    return philox_uniform_from_bits(r)


def gumbel_noise(u):
    """philox.h gumbel_noise: float32(-log(-log(double(u)))) with libm's log, per element."""
    return np.fromiter((-math.log(-math.log(v)) for v in np.asarray(u, np.float64).tolist()),
                       dtype=np.float64, count=np.size(u)).astype(np.float32)


def _order_key(z):
    """The device's float key: order-preserving uint32 bits of float32 z (+0 above -0)."""
    u = np.asarray(z, dtype=np.float32).view(np.uint32)
    return np.where(u & np.uint32(0x80000000), ~u, u | np.uint32(0x80000000)).astype(np.uint32)


def _top_p_tables():
    """lib/core/top_p_weight.h's LOOM_TOP_P_COARSE and LOOM_TOP_P_FINE, read from the header."""
    import os
    import re
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib", "core",
                          "top_p_weight.h")
    text = open(header).read()
    tables = []
    for name in ("LOOM_TOP_P_COARSE", "LOOM_TOP_P_FINE"):
        body = re.search(r"#define " + name + r"((?:[^\n]*\\\n)*[^\n]*)", text).group(1)
        tables.append(np.array([int(v) for v in re.findall(r"(\d+)u", body)], dtype=np.uint64))
    return tables


_TOP_P_COARSE, _TOP_P_FINE = _top_p_tables()


def top_p_weights(z, zmax):
    """core/top_p_weight.h's integer weights (uint64), vectorised: fp32 u, q, the tables."""
    u = (np.float32(zmax) - np.asarray(z, dtype=np.float32)) * np.float32(1.44269504088896341)
    live = u < np.float32(40.0)  # False for NaN
    q = np.where(live, u * np.float32(4096.0), 0).astype(np.uint64)
    f = (_TOP_P_COARSE[(q >> np.uint64(6)) & np.uint64(63)] * _TOP_P_FINE[q & np.uint64(63)]) \
        >> np.uint64(31)
    return np.where(live, (f << np.uint64(9)) >> (q >> np.uint64(12)), np.uint64(0))


def top_p_target(top_p, total):
    """ceil(P total / 2^40), P = floor(p 2^40): the kept prefix's least mass."""
    big_p = int(float(np.float32(top_p)) * 2.0 ** 40)
    return (big_p * int(total) + (1 << 40) - 1) >> 40


def top_p_draw_point(seed, sample, draw_index, kept_mass):
    """top_p_weight.h top_p_draw_point: (U * M) >> 64, U = v0 | v1 << 32 of the Philox call for
    group kTopPDrawGroup (0xFFFFFFFF, no token's)."""
    seed, draw_index = int(seed), int(draw_index)
    v = philox4x32_10(0xFFFFFFFF, draw_index & 0xFFFFFFFF, (draw_index >> 32) & 0xFFFFFFFF,
                      int(sample) & 0xFFFFFFFF, seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    u = int(v[0]) | (int(v[1]) << 32)
    return (u * int(kept_mass)) >> 64


def _order(z):
    """All ids in the C++ order: z descending, the lower id first among equal keys."""
    return np.lexsort((np.arange(z.size), -_order_key(z).astype(np.int64)))


def _z_gap(z, order, i):
    """z of the id at position i less z of the one at i + 1 (inf past the end or with a NaN):
    an error below half of it in every z cannot swap the two."""
    if i < 0 or i + 1 >= order.size:
        return np.inf
    gap = float(z[order[i]]) - float(z[order[i + 1]])
    return gap if np.isfinite(gap) else np.inf


def _filter(z, top_k, top_p):
    """kept_ids' work, with what the draw's margins read too: (order, n, w, target). order: all
    ids in the C++ order, n the kept count (None, 0 when no filter is on); with top-p w, the
    candidates' integer weights (uint64), and target, the kept prefix's least mass (else None,
    None)."""
    vocab = z.size
    top_k_on = 0 < top_k < vocab
    top_p32 = np.float32(top_p)
    if not (top_k_on or top_p32 < np.float32(1.0)):
        return None, 0, None, None
    order = _order(z)
    n = top_k if top_k_on else vocab
    if top_p32 >= np.float32(1.0):
        return order, n, None, None
    zmax = np.float32(np.nanmax(z)) if not np.all(np.isnan(z)) else np.float32(-np.inf)
    w = top_p_weights(z[order[:n]], zmax)
    cum = np.cumsum(w, dtype=np.uint64)  # exact: below 2^64 for vocabularies under 2^24
    target = top_p_target(top_p32, cum[-1])
    return order, int(np.flatnonzero(cum >= np.uint64(target))[0]) + 1, w, target


def kept_ids(z, top_k, top_p):
    """Ids the draw may pick, in the C++ order, and with top-p on their integer weights (uint64,
    else None); (None, None) when no filter is on (all of the vocab)."""
    order, n, w, _ = _filter(z, top_k, top_p)
    if order is None:
        return None, None
    return order[:n], None if w is None else w[:n]


def sample_token(logits, temperature=1.0, top_k=0, top_p=1.0, seed=0, sample_index=0,
                 draw_index=0, details=None):
    """The token lib/backend/sampler.cpp's sample_token returns for these logits.

    `details`, when a dict, receives "margin": how far the winner's score (logit, or z + Gumbel
    noise) is ahead of the runner-up's; goldens use it to avoid draws that a 1e-5 logit error
    could flip. For a top-p draw it is 4 d, d the distance of r / M from the nearer inner end of
    the token's cumulative interval (0 and 1 stay put): an error of e in every z moves an end by
    at most e / 2, so, as for Gumbel-max, an error below margin / 2 keeps the token (a weight's
    1/4096 step of u is an error of ln 2 / 4096 ≈ 1.7e-4 in z). With a filter it also receives
    "order_margin", in the same units, for what the order of the ids decides: the z gaps of the
    drawn id to its neighbours and top-p's cut (top-p), or the gap at the k-th id (top-k alone).
    The weight quantum enters only the cut, and there only through the few weights whose u lies
    within the error of a quantum's edge, so goldens hold these to a smaller bound than "margin".
    """
    logits = np.asarray(logits, dtype=np.float32).reshape(-1)
    temperature = np.float32(temperature)
    if temperature <= np.float32(0.0):
        if details is not None:
            top2 = np.partition(logits, -2)[-2:] if logits.size > 1 else [0, np.inf]
            details["margin"] = float(top2[1]) - float(top2[0])
        return int(np.argmax(logits))  # first maximum: lowest id on ties
    z = (logits / temperature).astype(np.float32)  # [vocab]
    order, n, w, target = _filter(z, int(top_k), float(top_p))
    kept = np.arange(z.size) if order is None else order[:n]
    if w is not None:  # top-p: inverse CDF (draw stream 4)
        cand = [int(c) for c in np.cumsum(w, dtype=np.uint64)]  # exact, as in _filter
        cum, total = cand[:n], cand[-1]
        mass = cum[-1]
        r = top_p_draw_point(seed, sample_index, draw_index, mass)
        j = next((i for i, c in enumerate(cum) if c > r), 0)  # none: mass 0
        if details is not None:  # 0 and M are no ends that move
            lo = r - cum[j - 1] if j else np.inf
            hi = cum[j] - r if j + 1 < len(cum) else np.inf
            details["margin"] = 4.0 * min(lo, hi) / mass if mass else np.inf
            # The ends are not all that moves: ids whose z nearly tie swap places in the order
            # (the drawn id with either neighbour, the next one possibly outside the kept set),
            # and the cut moves, changing M and so r, when the target nearly meets the mass
            # before or at the last kept id (a fraction f of the candidates' mass, which an
            # error e in every z moves by at most ~e: 2 f, like a z gap).
            cut = min(cum[n - 1] - target, target - (cum[n - 2] if n > 1 else 0))
            details["order_margin"] = min(_z_gap(z, order, j - 1), _z_gap(z, order, j),
                                          2.0 * cut / total if total else np.inf)
        return int(kept[j])
    u = philox_uniform(seed, sample_index, draw_index, kept)
    v = (z[kept] + gumbel_noise(u)).astype(np.float32)
    best = v.max()
    if details is not None:
        details["margin"] = float(best) - float(np.partition(v, -2)[-2]) if v.size > 1 else np.inf
        if 0 < int(top_k) < z.size:  # the k-th and the next id swapping changes the set
            details["order_margin"] = _z_gap(z, order, int(top_k) - 1)
    return int(kept[v == best].min())


# Random123 kat_vectors, philox4x32_10: (counter, key, expected output).
_PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def selftest():
    ok = True
    for ctr, key, want in _PHILOX_KAT:
        got = tuple(int(x) for x in philox4x32_10(*ctr, *key))
        good = got == want
        ok &= good
        print("philox4x32_10 ctr=%s key=%s -> %s %s" % (
            " ".join("%08x" % c for c in ctr), " ".join("%08x" % k for k in key),
            " ".join("%08x" % g for g in got), "ok" if good else
            "MISMATCH, expected " + " ".join("%08x" % w for w in want)))

    # Vectorised lanes equal scalar calls.
    lanes = philox4x32_10(np.arange(5), 7, 0, 3, 1234, 0)
    for t in range(5):
        one = philox4x32_10(t, 7, 0, 3, 1234, 0)
        ok &= all(int(lanes[j][t]) == int(one[j]) for j in range(4))

    # Draw stream 2: tokens 4 g .. 4 g + 3 take the four words of counter g (here the first
    # known answer: seed, sample and draw 0).
    ok &= bool(np.array_equal(philox_uniform(0, 0, 0, [0, 1, 2, 3]),
                              philox_uniform_from_bits(np.uint32(_PHILOX_KAT[0][2]))))

    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, 1000).astype(np.float32)
    # Greedy: lowest id among equal maxima.
    tied = logits.copy()
    tied[[17, 500]] = tied.max() + 1
    ok &= sample_token(tied, 0.0) == 17
    # Same arguments, same token; the draw depends on seed, sample and draw index.
    a = [sample_token(logits, 0.9, 0, 1.0, 5, 0, d) for d in range(50)]
    ok &= a == [sample_token(logits, 0.9, 0, 1.0, 5, 0, d) for d in range(50)]
    ok &= a != [sample_token(logits, 0.9, 0, 1.0, 5, 1, d) for d in range(50)]
    # top_k 1 and a tiny top_p are greedy.
    ok &= all(sample_token(logits, 0.8, 1, 1.0, s) == int(np.argmax(logits)) for s in range(20))
    ok &= all(sample_token(logits, 0.8, 0, 1e-6, s) == int(np.argmax(logits)) for s in range(20))
    # Draws stay inside the top-k set.
    top5 = set(np.argsort(-logits)[:5].tolist())
    ok &= all(sample_token(logits, 1.0, 5, 1.0, s, 0, 3) in top5 for s in range(100))
    # Gumbel-max frequencies follow softmax(z) for a small vocabulary.
    small = np.float32([0.0, 1.0, 2.0, 0.5])
    counts = np.bincount([sample_token(small, 1.0, 0, 1.0, 9, 0, d) for d in range(4000)],
                         minlength=4)
    want = np.exp(small) / np.exp(small).sum()
    ok &= bool(np.all(np.abs(counts / 4000 - want) < 0.03))
    print("sampler invariants and softmax frequencies:", counts / 4000, "vs", want.round(3))

    # Draw stream 4: top-p draws by inverse CDF, each kept id with w / M, none outside the prefix
    # (tests/test_sampler.cpp checks the same row, draw points and tokens).
    ok &= top_p_draw_point(0, 0, 0, 1 << 40) == 0x4434EC4EC5  # U >> 24
    ok &= top_p_draw_point(0x123456789ABC, 3, 0x500000007, 1000003) == 427301
    row = np.float32([1.0, 2.0, 0.5, -1.0, 3.0, 0.0, 2.5, -0.5])
    kept, w = kept_ids(row, 0, 0.9)
    ok &= kept.tolist() == [4, 6, 1, 0]
    ok &= [sample_token(row, 1.0, 0, 0.9, 1, 0, d) for d in range(8)] == [6, 4, 1, 6, 0, 6, 4, 6]
    counts = np.bincount([sample_token(row, 1.0, 0, 0.9, 9, 0, d) for d in range(4000)],
                         minlength=8)
    want = np.zeros(8)
    want[kept] = w / float(w.sum())
    ok &= bool(np.all(np.abs(counts / 4000 - want) < 0.03)) and not counts[[2, 3, 5, 7]].any()
    print("top-p inverse-CDF frequencies:", counts / 4000, "vs", want.round(3))

    # u never reaches 1: the largest value is 1 - 2^-24 and its noise is finite.
    u_max = philox_uniform_from_bits(np.uint32(0xFFFFFFFF))
    ok &= bool(u_max < np.float32(1.0)) and bool(np.isfinite(gumbel_noise([u_max])[0]))
    print("selftest", "passed" if ok else "FAILED")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--selftest", action="store_true", help="run the known-answer tests")
    args = ap.parse_args()
    if args.selftest:
        sys.exit(0 if selftest() else 1)
    ap.print_help()


if __name__ == "__main__":
    main()
