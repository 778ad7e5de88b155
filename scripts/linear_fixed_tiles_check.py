#!/usr/bin/env python3
"""Desk check of linear_fixed's tiled path (kernels/linear_fixed.cu, linear_fixed_tiled_kernel):
replays its copy mapping and fragment addressing for one ring slot of each tile shape and
asserts that
  - every 16-byte slot vector is written by exactly one thread's cp.async, and each group of 8
    consecutive threads writes 8 different bank groups;
  - lane (g, t) of every warp reads, for chunk c, weight rows g and g + 8 of each 16-row tile and
    token g of each 8-token tile at k vector 4c + t of the step: the vectors the register path
    loads from global memory (its vector s·32 + 4c' + t, c' = 2·(step % 4) + c);
  - each quarter warp's 16-byte reads hit 8 different bank groups (no conflicts);
  - the output staging writes each (token, row) once, one bank per lane.
The constants mirror TileShape and the dispatch (WN, WM, RT, NT); change both together.
Run: python3 scripts/linear_fixed_tiles_check.py
"""

def check(WN, WM, RT, NT):
    kThreads = 32*WN*WM; kRows = WN*RT*16; kToks = WM*NT*8
    kSlotRows = kRows + kToks; kChunkBytes = kSlotRows*64; kCopyRows = kThreads//8
    kCopies = kSlotRows//kCopyRows; kWeightCopies = kRows//kCopyRows
    assert kRows % kCopyRows == 0 and kToks % kCopyRows == 0
    smem = {}  # byte offset -> (kind,row,kvec-in-step)
    for tid in range(kThreads):
        cv = tid & 3; cc = (tid >> 3) & 1; r0 = ((tid >> 4) << 1) | ((tid >> 2) & 1)
        k_copy = cc*32 + cv*8
        dst0 = cc*kChunkBytes + r0*64 + cv*16
        for i in range(kCopies):
            r = r0 + i*kCopyRows
            dst = dst0 + i*kCopyRows*64
            kind = 'w' if i < kWeightCopies else 'x'
            row = r if kind == 'w' else r - kRows
            assert dst not in smem, (tid, i)
            smem[dst] = (kind, row, k_copy // 8)
    assert len(smem) == kSlotRows*8 and all(o % 16 == 0 for o in smem) and max(smem) == 2*kChunkBytes - 16
    # write-phase conflicts: each group of 8 consecutive threads for copy i
    for i in range(kCopies):
        for q in range(kThreads//8):
            banks = set()
            for tid in range(8*q, 8*q+8):
                cv = tid & 3; cc = (tid >> 3) & 1; r0 = ((tid >> 4) << 1) | ((tid >> 2) & 1)
                dst = cc*kChunkBytes + r0*64 + cv*16 + i*kCopyRows*64
                banks.add((dst // 16) % 8)
            assert len(banks) == 8, ('write conflict', i, q)
    # fragment reads
    for warp in range(WN*WM):
        wn = warp % WN; wm = warp // WN
        for c in range(2):
            base = c*kChunkBytes
            for rt in range(RT):
                for h in range(2):
                    phases = {}
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        a_off = (wn*RT*16 + g)*64 + t*16
                        off = base + a_off + (rt*16 + 8*h)*64
                        kind, row, kv = smem[off]
                        assert kind == 'w' and row == wn*RT*16 + rt*16 + g + 8*h and kv == c*4 + t, (warp, lane, c, rt, h, smem[off])
                        phases.setdefault(lane // 8, set()).add((off//16) % 8)
                    assert all(len(b) == 8 for b in phases.values()), 'A read conflict'
            for nt in range(NT):
                phases = {}
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    b_off = (kRows + wm*NT*8 + g)*64 + t*16
                    off = base + b_off + nt*8*64
                    kind, row, kv = smem[off]
                    assert kind == 'x' and row == wm*NT*8 + nt*8 + g and kv == c*4 + t
                    phases.setdefault(lane // 8, set()).add((off//16) % 8)
                assert all(len(b) == 8 for b in phases.values()), 'B read conflict'
    # output staging: every (tok,row) written exactly once, bank-conflict-free per store instr
    kOutLd = kRows + 4
    seen = set()
    for warp in range(WN*WM):
        wn = warp % WN; wm = warp // WN
        for rt in range(RT):
            for nt in range(NT):
                for i in range(4):
                    banks = set()
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        row = wn*RT*16 + rt*16 + g + 8*(i >> 1)
                        tok = wm*NT*8 + nt*8 + 2*t + (i & 1)
                        assert (tok, row) not in seen
                        seen.add((tok, row))
                        banks.add((tok*kOutLd + row) % 32)
                    assert len(banks) == 32, 'staging conflict'
    assert len(seen) == kRows*kToks
    ring = 4*2*kChunkBytes; out = kToks*kOutLd*4
    print(WN, WM, RT, NT, 'ok: tile', kRows, 'x', kToks, 'threads', kThreads, 'smem', max(ring, out), 'ring', ring, 'out', out)
for cfg in [(2,2,2,4), (2,4,4,4), (4,2,3,8)]:
    check(*cfg)
